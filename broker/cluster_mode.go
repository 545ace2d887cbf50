package broker

// Cluster mode's membership and metadata (owner: the cluster-metadata
// work; see cluster_config.go for who owns what).

import (
	"context"
	"errors"

	"github.com/verbatim-kafka/verbatim/clustermeta"
)

// JoinCluster registers this broker in the cluster store with the
// endpoints its listeners serve (after they are bound), then follows the
// store: every snapshot is reconciled into topics, partitions, hosted
// logs and roles until Shutdown. Cluster mode only.
func (s *Server) JoinCluster(ctx context.Context, endpoints []clustermeta.Endpoint) error {
	return errors.New("broker: cluster mode is not built yet")
}

// clusterSnapshot is the latest snapshot of the cluster store the
// reconciler applied (nil on a single node or before the first).
func (s *Server) clusterSnapshot() *clustermeta.Snapshot { return nil }

// brokerEpoch is this broker's registration epoch (0 before it joined).
func (s *Server) brokerEpoch() int64 { return 0 }

// clusterSession is this broker's registration session (nil before it
// joined); a leader's ISR changes are fenced by it.
func (s *Server) clusterSession() *clustermeta.Session { return nil }

package broker

// The controlled shutdown's mark (owner: the cluster-run work, which
// drives it from `verbatim serve`; see cluster_config.go for who owns
// what).

import (
	"context"
	"errors"
)

// MarkShuttingDown sets ShuttingDown on this broker's registration
// (controlled.shutdown.enable): the controller then moves its leaderships
// to other in-sync replicas and takes it out of the ISRs. Cluster mode,
// after JoinCluster.
func (s *Server) MarkShuttingDown(ctx context.Context) error {
	sess := s.clusterSession()
	if sess == nil {
		return errors.New("broker: not registered in a cluster")
	}
	info := sess.Info
	info.ShuttingDown = true
	return sess.Update(ctx, info)
}

package broker

// A hosted partition's role in cluster mode (owner: the replication work;
// see cluster_config.go for who owns what).

import "github.com/verbatim-kafka/verbatim/clustermeta"

// replState is a hosted replica's role and replication state.
type replState struct{}

// SetFollowers installs the replica fetcher manager (cluster mode); call
// it once after Open and before JoinCluster.
func (s *Server) SetFollowers(f Followers) {}

// applyRole makes p's local replica what st says (leader or follower at
// st.LeaderEpoch); the reconciler calls it for every hosted partition
// whose state changed, in snapshot order, never concurrently for one
// partition.
func (s *Server) applyRole(p *Partition, st clustermeta.PartitionState) {}

package broker

// Mirror topics in cluster mode (docs/cluster.md "Mirror topics in a
// cluster"): the leader's own leader-epoch raises (KIP-1279's rule, the
// stop's bump). Cluster links on a cluster are link_cluster.go's.
//
// A raise is a compare-and-swap of the partition's state like any epoch
// change (raiseLeaderEpochs), so followers and a later leader see it.
// The reconciler then applies that state; as a change of leader epoch it
// would end the leadership and start a new one (applyRole), failing the
// acks=all waiters of the very append that asked for the raise. A state
// that is exactly this broker's own raise (the version its write got)
// keeps the leadership instead: the followers, the ISR and the waiters
// carry over, only the epoch moves. Any other epoch change (a controller
// decision) is a re-election as before.

import (
	"sync"

	"github.com/verbatim-kafka/verbatim/clustermeta"
)

// epochRaises are the partition states this broker wrote as its own
// leader-epoch raises, by partition, until the reconciler applies them.
// mu is held across a raise's write, so the reconciler never applies a
// raise before its version is recorded.
type epochRaises struct {
	mu       sync.Mutex
	versions map[partitionKey]int64
}

// partitionKey names a partition across topic re-creations.
type partitionKey struct {
	id   [16]byte
	part int32
}

// recordLocked notes states written as raises. REQUIRES: r.mu.
func (r *epochRaises) recordLocked(states []clustermeta.PartitionState) {
	if r.versions == nil {
		r.versions = make(map[partitionKey]int64)
	}
	for _, st := range states {
		r.versions[partitionKey{st.TopicID, st.Partition}] = st.Version
	}
}

// ownEpochRaise reports whether st is the state of a raise this broker
// wrote for p and forgets it once a state at or past it is applied.
func (s *Server) ownEpochRaise(p *Partition, st clustermeta.PartitionState) bool {
	if s.cm == nil {
		return false
	}
	r := &s.cm.raises
	r.mu.Lock()
	defer r.mu.Unlock()
	k := partitionKey{p.Topic.ID, p.Index}
	v, ok := r.versions[k]
	if !ok || st.Version < v {
		return false
	}
	delete(r.versions, k)
	return st.Version == v && st.Leader == s.cfg.NodeID
}

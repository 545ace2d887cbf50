package broker

// A hosted partition's role in cluster mode (owner: the replication work;
// see cluster_config.go for who owns what).
//
// Every hosted replica is the leader or a follower at the leader epoch
// the cluster store gives (applyRole). The role is one immutable
// replState published in Partition.repl; a role change publishes a new
// one, so the data-plane handlers read it with one atomic load. A leader's
// replState carries its leaderState (replica_leader.go): the followers'
// fetch positions, the ISR as the store confirmed it, the acks=all
// waiters. A follower's partition is handed to Followers (the replica
// fetcher manager), which appends through the Replica of
// replica_follower.go.
//
// The partition's leader epoch (Partition.leaderEpoch) follows the store
// in cluster mode (raised, never lowered: an older state is never
// applied) and is never persisted locally there.

import (
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/verbatim-kafka/verbatim/client"
	"github.com/verbatim-kafka/verbatim/clustermeta"
)

// replState is a hosted replica's role and replication state.
type replState struct {
	// leader: this broker leads the partition at epoch; otherwise it
	// follows leaderID (clustermeta.NoLeader: nobody leads, nothing to
	// fetch from).
	leader   bool
	epoch    int32
	leaderID int32
	// lead is the leader's state (nil for a follower).
	lead *leaderState
}

// replServer is the server's replication state (Server.repl).
type replServer struct {
	// mu serialises role changes with SetFollowers.
	mu        sync.Mutex
	followers Followers
	// now is the clock of the ISR's lag accounting (tests inject one;
	// nil: time.Now).
	now atomic.Pointer[func() time.Time]
	// fence, when set, fences the ISR writes instead of the session's
	// (tests without a registration).
	fence atomic.Pointer[clustermeta.Fence]
	// ckpt is the high-watermark checkpoint read at open
	// (replica_checkpoint.go).
	ckptOnce sync.Once
	ckpt     map[TopicPartition]int64
	// ckptMu serialises checkpoint writes.
	ckptMu sync.Mutex
	// interBroker is how followers dial leaders (SetInterBrokerClient;
	// nil: plaintext).
	interBroker atomic.Pointer[client.Options]
}

func (r *replServer) clock() time.Time {
	if now := r.now.Load(); now != nil {
		return (*now)()
	}
	return time.Now()
}

// SetFollowers installs the replica fetcher manager (cluster mode); call
// it once after Open and before JoinCluster.
func (s *Server) SetFollowers(f Followers) {
	s.repl.mu.Lock()
	s.repl.followers = f
	s.repl.mu.Unlock()
}

func (s *Server) follow(fp FollowedPartition) {
	s.repl.mu.Lock()
	f := s.repl.followers
	s.repl.mu.Unlock()
	if f != nil {
		f.Follow([]FollowedPartition{fp})
	}
}

func (s *Server) unfollow(p *Partition) {
	s.repl.mu.Lock()
	f := s.repl.followers
	s.repl.mu.Unlock()
	if f != nil {
		f.Unfollow([]TopicPartition{{Topic: p.Topic.Name, Partition: p.Index}})
	}
}

// applyRole makes p's local replica what st says (leader or follower at
// st.LeaderEpoch); the reconciler calls it for every hosted partition
// whose state changed, in snapshot order, never concurrently for one
// partition.
func (s *Server) applyRole(p *Partition, st clustermeta.PartitionState) {
	self := s.cfg.NodeID
	cur := p.repl.Load()
	if !slices.Contains(st.Replicas, self) {
		// No longer a replica (moved away, deleted): neither lead nor
		// follow.
		s.dropRole(p, cur)
		return
	}
	if st.Leader == self && s.registeredSince(st) {
		// The state named this broker leader before its current
		// registration (it restarted, or was fenced and registered again,
		// faster than the controller looked): it must not lead in that
		// epoch, whose writes it may not all have and whose high
		// watermark it no longer knows. The controller re-elects in a new
		// epoch (controller.Decide's "leader restarted"); until then the
		// replica neither leads nor follows.
		st.Leader = clustermeta.NoLeader
	}
	if st.Leader == self {
		if cur != nil && cur.leader && cur.epoch == st.LeaderEpoch {
			cur.lead.update(st) // an ISR or assignment change under the same leader
			return
		}
		if cur != nil && cur.leader && s.ownEpochRaise(p, st) {
			// This broker's own raise (a mirror's epoch rule): the
			// leadership goes on at the new epoch, its waiters too.
			p.raiseLeaderEpoch(st.LeaderEpoch)
			p.repl.Store(&replState{leader: true, epoch: st.LeaderEpoch, leaderID: self, lead: cur.lead})
			cur.lead.update(st)
			s.log.Info("partition leader epoch raised", "topic", p.Topic.Name, "partition", p.Index, "leader_epoch", st.LeaderEpoch)
			return
		}
		if cur != nil && !cur.leader {
			// The fetcher must append nothing more once this broker
			// takes writes.
			s.unfollow(p)
		}
		p.raiseLeaderEpoch(st.LeaderEpoch)
		ls := newLeaderState(s, p, st)
		p.repl.Store(&replState{leader: true, epoch: st.LeaderEpoch, leaderID: self, lead: ls})
		if cur != nil && cur.leader {
			// The same broker re-elected at a newer epoch: the old
			// epoch's waiters end (their clients retry at the new one).
			cur.lead.resign()
		}
		s.log.Info("partition leader", "topic", p.Topic.Name, "partition", p.Index, "leader_epoch", st.LeaderEpoch, "isr", st.ISR)
		s.applySourceStart(p) // a mirror forward the old leader took (mirror_start_epoch_cluster.go)
		if isInternalTopic(p.Topic.Name) {
			s.coordinatorsElected(p, st.LeaderEpoch)
		}
		p.wakeWaiters()
		return
	}
	if cur != nil && !cur.leader && cur.epoch == st.LeaderEpoch && cur.leaderID == st.Leader {
		return // only the ISR or the assignment changed
	}
	p.repl.Store(&replState{epoch: st.LeaderEpoch, leaderID: st.Leader})
	p.raiseLeaderEpoch(st.LeaderEpoch)
	if cur != nil && cur.leader {
		cur.lead.resign()
		if isInternalTopic(p.Topic.Name) {
			s.coordinatorsResigned(p)
		}
	}
	if st.Leader == clustermeta.NoLeader {
		s.unfollow(p)
	} else {
		s.follow(FollowedPartition{TopicPartition: TopicPartition{Topic: p.Topic.Name, Partition: p.Index},
			TopicID: p.Topic.ID, Leader: st.Leader, LeaderEpoch: st.LeaderEpoch})
	}
	// Long polls on the partition answer NOT_LEADER_OR_FOLLOWER now.
	p.wakeWaiters()
}

// registeredSince reports whether this broker's registration is newer
// than st (its epoch, the registration's etcd revision, above the state's
// version), as the controller's statusRestarted tells it; unknown
// revisions (0) never count.
func (s *Server) registeredSince(st clustermeta.PartitionState) bool {
	e := s.brokerEpoch()
	return e > 0 && st.Version > 0 && e > st.Version
}

// dropRole ends p's role (the broker is no longer one of its replicas).
func (s *Server) dropRole(p *Partition, cur *replState) {
	if cur == nil {
		return
	}
	p.repl.Store(nil)
	s.unfollow(p)
	if cur.leader {
		cur.lead.resign()
		if isInternalTopic(p.Topic.Name) {
			s.coordinatorsResigned(p)
		}
	}
	p.wakeWaiters()
}

// leaderCheck is the data APIs' leadership check in cluster mode (nil on
// a single node, which leads everything): a partition this broker does
// not host or does not lead is NOT_LEADER_OR_FOLLOWER; a CurrentLeaderEpoch
// (>= 0) that is not the partition's is FENCED_LEADER_EPOCH (older) or
// UNKNOWN_LEADER_EPOCH (newer), checked first as Kafka does.
func (s *Server) leaderCheck(p *Partition, currentEpoch int32) (*replState, error) {
	if s.cfg.Cluster == nil {
		return nil, nil
	}
	rs := p.repl.Load()
	if rs == nil {
		return nil, errNotLeader(p, "this broker does not host it")
	}
	if err := checkLeaderEpoch(p, currentEpoch); err != nil {
		return nil, err
	}
	if !rs.leader {
		return nil, errNotLeader(p, fmt.Sprintf("broker %d leads it at epoch %d", rs.leaderID, rs.epoch))
	}
	return rs, nil
}

func errNotLeader(p *Partition, why string) error {
	return kafkaErr(kerr.NotLeaderForPartition, fmt.Sprintf("this broker is not the leader of %s: %s", p.Dir(), why))
}

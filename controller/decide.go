package controller

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/verbatim-kafka/verbatim/clustermeta"
)

// Policy is what the decisions depend on besides the snapshot: the
// broker defaults that topic configs override. No decision depends on
// the time: a broker's failure is its registration's lease expiring in
// etcd, whose clock decides it, and Kafka's controller times no election.
type Policy struct {
	// UncleanLeaderElection is the broker default of
	// unclean.leader.election.enable.
	UncleanLeaderElection bool
}

// UncleanLeaderElectionConfig is the topic config that overrides
// Policy.UncleanLeaderElection.
const UncleanLeaderElectionConfig = "unclean.leader.election.enable"

// Reason says why a decision was taken (the log line's reason).
type Reason string

// The reasons of the decisions.
const (
	// The leader's broker is not registered (its lease expired).
	ReasonLeaderFenced Reason = "leader fenced"
	// The leader's broker is in controlled shutdown.
	ReasonControlledShutdown Reason = "controlled shutdown"
	// The leader's broker registered again after the state named it
	// leader: a new incarnation, which must not lead in the old epoch.
	ReasonLeaderRestarted Reason = "leader restarted"
	// The leader is not in the ISR (a state no decision of the
	// controller leaves, repaired as an election).
	ReasonLeaderNotInISR Reason = "leader not in ISR"
	// A leaderless partition's ISR member is registered (again).
	ReasonLeaderElected Reason = "ISR member available"
	// ISR members whose brokers are fenced, shutting down or restarted
	// are taken out of the ISR; the leader stays.
	ReasonISRShrink Reason = "ISR member fenced"
	// No ISR member is registered and unclean election is enabled: the
	// first live replica leads with ISR = [it].
	ReasonUncleanElection Reason = "unclean election"
	// ElectLeaders asked for the preferred replica.
	ReasonPreferredElection Reason = "preferred election"
)

// Decision is one partition's new state and why.
type Decision struct {
	Old, New clustermeta.PartitionState
	Reason   Reason
}

// LeaderChanged reports whether the decision changes the leader.
func (d Decision) LeaderChanged() bool {
	return d.Old.Leader != d.New.Leader || d.Old.LeaderEpoch != d.New.LeaderEpoch
}

// String is the decision's log line.
func (d Decision) String() string {
	return fmt.Sprintf("%s-%d leader %d -> %d epoch %d -> %d isr %v -> %v (%s)",
		d.New.Topic, d.New.Partition, d.Old.Leader, d.New.Leader,
		d.Old.LeaderEpoch, d.New.LeaderEpoch, d.Old.ISR, d.New.ISR, d.Reason)
}

// Decide is the controller's decisions on a snapshot: at most one new
// state per partition, in topic then partition order, each with
// LeaderEpoch+1 when the leader changes (to NoLeader too) and
// PartitionEpoch+1. For each partition:
//
//   - the leader's broker is fenced (not registered), in controlled
//     shutdown, restarted since the state was written, or the leader is
//     not in the ISR: the leader moves to the first live ISR member in
//     replica order; without one, to a restarted ISR member (the old
//     leader first); the fenced, shutting-down and restarted members
//     leave the ISR, the new leader stays. With no ISR member to elect,
//     unclean election when enabled and no ISR member is registered at
//     all; otherwise Leader = NoLeader and the ISR is kept as it is (as
//     KRaft keeps the last ISR member: never an empty ISR);
//   - the leader is live: the ISR members that are fenced, shutting down
//     or restarted leave the ISR;
//   - no leader: the first registered ISR member not shutting down is
//     elected (ISR members fenced, shutting down or restarted leave the
//     ISR, the new leader stays); none, and unclean election enabled with
//     no ISR member registered: the first live replica, ISR = [it].
//
// A broker "restarted since the state was written" is one whose
// registration (its Epoch, the etcd revision that created it) is newer
// than the state (its Version): the controller missed the registration's
// gap, and decides as if it had seen the broker fenced. A state or
// registration without a revision (0) is never taken as restarted.
func Decide(snap *clustermeta.Snapshot, pol Policy) []Decision {
	var out []Decision
	for _, topic := range sortedTopics(snap) {
		unclean := uncleanFor(snap, topic, pol)
		for _, s := range snap.Partitions[topic] {
			if len(s.Replicas) == 0 {
				continue // no state stored (or it did not decode): nothing to decide on
			}
			if n, why, ok := decidePartition(s, snap.Brokers, unclean); ok {
				out = append(out, Decision{Old: s, New: n, Reason: why})
			}
		}
	}
	return out
}

// uncleanFor is the topic's unclean.leader.election.enable.
func uncleanFor(snap *clustermeta.Snapshot, topic string, pol Policy) bool {
	if t, ok := snap.Topics[topic]; ok {
		switch strings.ToLower(strings.TrimSpace(t.Configs[UncleanLeaderElectionConfig])) {
		case "true":
			return true
		case "false":
			return false
		}
	}
	return pol.UncleanLeaderElection
}

func sortedTopics(snap *clustermeta.Snapshot) []string {
	names := make([]string, 0, len(snap.Partitions))
	for name := range snap.Partitions {
		names = append(names, name)
	}
	sort.Strings(names)
	return names
}

// brokerStatus is a replica's broker as a partition state sees it.
type brokerStatus int8

const (
	statusGone         brokerStatus = iota // not registered: fenced
	statusShuttingDown                     // registered, in controlled shutdown
	statusRestarted                        // registered after the state was written
	statusLive                             // registered before the state, serving
)

func statusOf(brokers map[int32]clustermeta.BrokerInfo, id int32, s clustermeta.PartitionState) brokerStatus {
	b, ok := brokers[id]
	switch {
	case !ok:
		return statusGone
	case b.ShuttingDown:
		return statusShuttingDown
	case b.Epoch > 0 && s.Version > 0 && b.Epoch > s.Version:
		return statusRestarted
	}
	return statusLive
}

// electable: registered and not shutting down.
func electable(st brokerStatus) bool { return st == statusLive || st == statusRestarted }

// candidateOrder is the order replicas are considered for leadership:
// the assignment's order (the preferred replica first), then ISR members
// the assignment lacks (a state no decision leaves).
func candidateOrder(s clustermeta.PartitionState) []int32 {
	out := append([]int32(nil), s.Replicas...)
	for _, id := range s.ISR {
		if !slices.Contains(s.Replicas, id) {
			out = append(out, id)
		}
	}
	return out
}

// decidePartition is the one change a partition needs, if any.
func decidePartition(s clustermeta.PartitionState, brokers map[int32]clustermeta.BrokerInfo, unclean bool) (clustermeta.PartitionState, Reason, bool) {
	st := func(id int32) brokerStatus { return statusOf(brokers, id, s) }
	if s.Leader != clustermeta.NoLeader && slices.Contains(s.ISR, s.Leader) && st(s.Leader) == statusLive {
		isr := filter(s.ISR, func(id int32) bool { return id == s.Leader || st(id) == statusLive })
		if len(isr) == len(s.ISR) {
			return s, "", false
		}
		return changed(s, s.Leader, isr, false), ReasonISRShrink, true
	}

	var why Reason
	switch {
	case s.Leader == clustermeta.NoLeader:
		why = ReasonLeaderElected
	case !slices.Contains(s.ISR, s.Leader):
		why = ReasonLeaderNotInISR
	case st(s.Leader) == statusGone:
		why = ReasonLeaderFenced
	case st(s.Leader) == statusShuttingDown:
		why = ReasonControlledShutdown
	default:
		why = ReasonLeaderRestarted
	}

	// A clean election: a live ISR member, else a restarted one (the old
	// leader first: its log is the longest).
	pick := clustermeta.NoLeader
	order := candidateOrder(s)
	for _, id := range order {
		if id != s.Leader && slices.Contains(s.ISR, id) && st(id) == statusLive {
			pick = id
			break
		}
	}
	if pick == clustermeta.NoLeader && s.Leader != clustermeta.NoLeader && slices.Contains(s.ISR, s.Leader) && st(s.Leader) == statusRestarted {
		pick = s.Leader
	}
	if pick == clustermeta.NoLeader {
		for _, id := range order {
			if slices.Contains(s.ISR, id) && st(id) == statusRestarted {
				pick = id
				break
			}
		}
	}
	if pick != clustermeta.NoLeader {
		isr := filter(s.ISR, func(id int32) bool { return id == pick || st(id) == statusLive })
		return changed(s, pick, isr, true), why, true
	}

	// Unclean: only when no ISR member is registered at all (one in
	// controlled shutdown still holds every acknowledged record).
	if unclean && !anyOf(s.ISR, func(id int32) bool { return st(id) != statusGone }) {
		for _, id := range s.Replicas {
			if electable(st(id)) {
				return changed(s, id, []int32{id}, true), ReasonUncleanElection, true
			}
		}
	}
	if s.Leader == clustermeta.NoLeader {
		return s, "", false
	}
	// Nobody to elect: no leader, the ISR kept (never empty).
	return changed(s, clustermeta.NoLeader, s.ISR, true), why, true
}

// changed is s with a new leader and ISR, its epochs raised (the leader
// epoch when bump is set). The slices are fresh: snapshots are shared.
func changed(s clustermeta.PartitionState, leader int32, isr []int32, bump bool) clustermeta.PartitionState {
	n := s
	n.Replicas = append([]int32(nil), s.Replicas...)
	n.ISR = append([]int32(nil), isr...)
	n.AddingReplicas = append([]int32(nil), s.AddingReplicas...)
	n.RemovingReplicas = append([]int32(nil), s.RemovingReplicas...)
	n.Leader = leader
	if bump {
		n.LeaderEpoch++
	}
	n.PartitionEpoch++
	return n
}

func filter(ids []int32, keep func(int32) bool) []int32 {
	out := make([]int32, 0, len(ids))
	for _, id := range ids {
		if keep(id) {
			out = append(out, id)
		}
	}
	return out
}

func anyOf(ids []int32, f func(int32) bool) bool {
	for _, id := range ids {
		if f(id) {
			return true
		}
	}
	return false
}

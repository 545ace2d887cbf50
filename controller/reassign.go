package controller

// Partition reassignment (KIP-455), as Kafka's controller carries it out:
// AlterPartitionReassignments writes the target into the partition state
// (Reassign: Replicas = the target then the replicas being removed,
// AddingReplicas and RemovingReplicas set), the leader adds the new
// replicas to the ISR once they have caught up, and the controller then
// completes the move (Complete: Replicas = target, the removed replicas
// out of the ISR, the leader moved onto the target if it was removed).

import (
	"errors"
	"fmt"
	"slices"

	"github.com/verbatim-kafka/verbatim/clustermeta"
)

// Reasons of the reassignment decisions.
const (
	// Every adding replica is in the ISR: the reassignment completes.
	ReasonReassignmentComplete Reason = "reassignment complete"
)

// Errors of Reassign, each one of Kafka's error codes (the broker maps
// them).
var (
	// ErrNoReassignment: a cancellation of a partition with no
	// reassignment in progress (NO_REASSIGNMENT_IN_PROGRESS).
	ErrNoReassignment = errors.New("controller: no reassignment in progress")
	// ErrInvalidAssignment: the target is empty, repeats a broker or
	// names an unregistered one (INVALID_REPLICA_ASSIGNMENT).
	ErrInvalidAssignment = errors.New("controller: invalid replica assignment")
	// ErrReplicationFactorChange: the target changes the replication
	// factor and the request does not allow it (INVALID_REPLICATION_FACTOR).
	ErrReplicationFactorChange = errors.New("controller: the reassignment changes the replication factor")
)

// Target is the assignment a reassignment moves to: the replicas the
// state keeps once it completes (the replicas being removed left out, in
// the state's order). Without a reassignment, Replicas.
func Target(s clustermeta.PartitionState) []int32 {
	return filter(s.Replicas, func(id int32) bool { return !slices.Contains(s.RemovingReplicas, id) })
}

// Original is the assignment before the reassignment in progress (the
// replicas being added left out): what a cancellation returns to.
func Original(s clustermeta.PartitionState) []int32 {
	return filter(s.Replicas, func(id int32) bool { return !slices.Contains(s.AddingReplicas, id) })
}

// Reassigning reports whether a reassignment is in progress.
func Reassigning(s clustermeta.PartitionState) bool {
	return len(s.AddingReplicas) > 0 || len(s.RemovingReplicas) > 0
}

// Reassign is the state that starts moving s to target (nil: cancel the
// reassignment in progress, back to the original replicas), as Kafka's
// controller builds it: a reassignment in progress is reverted first, so
// the current replicas are Original(s); then Replicas = target followed
// by the current replicas the target drops (RemovingReplicas),
// AddingReplicas = the target's replicas not current, and the ISR keeps
// its members among those. Sending the same target again is therefore
// the same state. A target adding no replica (a reorder, a shrink), or a
// cancellation, changes the replicas at once: the ISR keeps only the
// target's members and the leader moves onto the target if it was
// dropped, its epoch raised. allowRFChange false refuses a target of
// another size than the current replicas. The partition epoch is raised.
func Reassign(s clustermeta.PartitionState, target []int32, allowRFChange bool, brokers map[int32]clustermeta.BrokerInfo) (clustermeta.PartitionState, error) {
	cur := Original(s)
	if target == nil {
		if !Reassigning(s) {
			return s, ErrNoReassignment
		}
		return settle(s, cur, brokers)
	}
	if len(target) == 0 {
		return s, fmt.Errorf("%w: the target replica list is empty", ErrInvalidAssignment)
	}
	for i, id := range target {
		if slices.Contains(target[:i], id) {
			return s, fmt.Errorf("%w: the target replicas %v contain broker %d more than once", ErrInvalidAssignment, target, id)
		}
		if _, ok := brokers[id]; !ok {
			return s, fmt.Errorf("%w: the target replicas %v contain broker %d, which is not registered", ErrInvalidAssignment, target, id)
		}
	}
	if !allowRFChange && len(target) != len(cur) {
		return s, fmt.Errorf("%w: from %d to %d replicas", ErrReplicationFactorChange, len(cur), len(target))
	}
	adding := filter(target, func(id int32) bool { return !slices.Contains(cur, id) })
	if len(adding) == 0 {
		return settle(s, target, brokers)
	}
	removing := filter(cur, func(id int32) bool { return !slices.Contains(target, id) })
	if s.Leader != clustermeta.NoLeader && !slices.Contains(cur, s.Leader) && !slices.Contains(target, s.Leader) {
		// The leader is a replica the reverted reassignment added (it was
		// elected meanwhile) and the new target drops: it leads until the
		// move completes, as any replica being removed.
		removing = append(removing, s.Leader)
	}
	replicas := append(slices.Clone(target), removing...)
	n := changed(s, s.Leader, filter(s.ISR, func(id int32) bool { return slices.Contains(replicas, id) }), false)
	n.Replicas = replicas
	n.AddingReplicas, n.RemovingReplicas = adding, nilIfEmpty(removing)
	return n, nil
}

// settle makes target the assignment at once (every replica of it is a
// current one): the ISR keeps the target's members (never empty), the
// leader moves onto the target when it is not on it.
func settle(s clustermeta.PartitionState, target []int32, brokers map[int32]clustermeta.BrokerInfo) (clustermeta.PartitionState, error) {
	isr := filter(s.ISR, func(id int32) bool { return slices.Contains(target, id) })
	if len(isr) == 0 {
		return s, fmt.Errorf("%w: no replica of %v is in the ISR %v", ErrInvalidAssignment, target, s.ISR)
	}
	n, ok := finish(s, target, isr, brokers)
	if !ok {
		return s, fmt.Errorf("%w: no in-sync replica of %v is available to lead", ErrInvalidAssignment, target)
	}
	return n, nil
}

// finish is s with the assignment target and ISR isr, no reassignment in
// progress, and the leader on the target: kept when it is there, else
// the first live ISR member of the target (epoch raised); false when the
// leader must move and no one can take it.
func finish(s clustermeta.PartitionState, target, isr []int32, brokers map[int32]clustermeta.BrokerInfo) (clustermeta.PartitionState, bool) {
	leader := s.Leader
	if leader == clustermeta.NoLeader || !slices.Contains(target, leader) {
		leader = clustermeta.NoLeader
		for _, id := range target {
			if slices.Contains(isr, id) && statusOf(brokers, id, s) == statusLive {
				leader = id
				break
			}
		}
		if leader == clustermeta.NoLeader && s.Leader != clustermeta.NoLeader {
			return s, false
		}
	}
	bump := leader != s.Leader
	n := changed(s, leader, isr, bump)
	n.Replicas = slices.Clone(target)
	n.AddingReplicas, n.RemovingReplicas = nil, nil
	return n, true
}

// Complete is the decision that finishes s's reassignment, if it can:
// every adding replica is in the ISR. Replicas becomes the target, the
// removed replicas leave the ISR, and a leader being removed hands the
// leadership to the first live in-sync replica of the target (leader
// epoch +1). It waits (false) while a replica to add is not in sync, or
// when the leader must move and no target replica is live and in sync.
func Complete(s clustermeta.PartitionState, brokers map[int32]clustermeta.BrokerInfo) (clustermeta.PartitionState, bool) {
	if !Reassigning(s) || s.Leader == clustermeta.NoLeader {
		return s, false
	}
	for _, id := range s.AddingReplicas {
		if !slices.Contains(s.ISR, id) {
			return s, false
		}
	}
	target := Target(s)
	isr := filter(s.ISR, func(id int32) bool { return slices.Contains(target, id) })
	if len(isr) == 0 {
		return s, false
	}
	return finish(s, target, isr, brokers)
}

// Reassignments is the controller's reassignment decisions on a
// snapshot: Complete on every partition in progress that Decide leaves
// alone (skip holds the partitions Decide changes: one decision per
// partition per look).
func Reassignments(snap *clustermeta.Snapshot, skip map[TopicPartitionKey]bool) []Decision {
	var out []Decision
	for _, topic := range sortedTopics(snap) {
		for _, s := range snap.Partitions[topic] {
			if !Reassigning(s) || skip[TopicPartitionKey{s.Topic, s.Partition}] {
				continue
			}
			if n, ok := Complete(s, snap.Brokers); ok {
				out = append(out, Decision{Old: s, New: n, Reason: ReasonReassignmentComplete})
			}
		}
	}
	return out
}

// TopicPartitionKey names a partition in the decisions' sets.
type TopicPartitionKey struct {
	Topic     string
	Partition int32
}

// DecideAll is Decide followed by the reassignment steps Decide leaves
// room for: the runner's decisions on one snapshot.
func DecideAll(snap *clustermeta.Snapshot, pol Policy) []Decision {
	ds := Decide(snap, pol)
	skip := make(map[TopicPartitionKey]bool, len(ds))
	for _, d := range ds {
		skip[TopicPartitionKey{d.New.Topic, d.New.Partition}] = true
	}
	return append(ds, Reassignments(snap, skip)...)
}

func nilIfEmpty(ids []int32) []int32 {
	if len(ids) == 0 {
		return nil
	}
	return ids
}

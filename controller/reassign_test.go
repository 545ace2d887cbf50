package controller

import (
	"errors"
	"reflect"
	"testing"
)

func TestReassignStart(t *testing.T) {
	brokers := brokerSpec{1: "up", 2: "up", 3: "up", 4: "up"}.infos()
	s := pstate("t", 0, ids(1, 2, 3), 1, ids(1, 2, 3))
	n, err := Reassign(s, ids(1, 2, 4), true, brokers)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(n.Replicas, ids(1, 2, 4, 3)) || !reflect.DeepEqual(n.AddingReplicas, ids(4)) || !reflect.DeepEqual(n.RemovingReplicas, ids(3)) {
		t.Fatalf("replicas %v adding %v removing %v", n.Replicas, n.AddingReplicas, n.RemovingReplicas)
	}
	if n.Leader != 1 || n.LeaderEpoch != s.LeaderEpoch || n.PartitionEpoch != s.PartitionEpoch+1 || !reflect.DeepEqual(n.ISR, ids(1, 2, 3)) {
		t.Fatalf("leader %d epoch %d partition epoch %d isr %v", n.Leader, n.LeaderEpoch, n.PartitionEpoch, n.ISR)
	}
	if !reflect.DeepEqual(Target(n), ids(1, 2, 4)) || !reflect.DeepEqual(Original(n), ids(1, 2, 3)) {
		t.Fatalf("target %v original %v", Target(n), Original(n))
	}
	// Not complete until the added replica is in sync.
	if _, ok := Complete(n, brokers); ok {
		t.Fatal("completed with replica 4 out of the ISR")
	}
	n.ISR = ids(1, 2, 3, 4)
	done, ok := Complete(n, brokers)
	if !ok {
		t.Fatal("not completed with every adding replica in sync")
	}
	if !reflect.DeepEqual(done.Replicas, ids(1, 2, 4)) || !reflect.DeepEqual(done.ISR, ids(1, 2, 4)) || done.AddingReplicas != nil || done.RemovingReplicas != nil {
		t.Fatalf("completed: replicas %v isr %v adding %v removing %v", done.Replicas, done.ISR, done.AddingReplicas, done.RemovingReplicas)
	}
	if done.Leader != 1 || done.LeaderEpoch != n.LeaderEpoch || done.PartitionEpoch != n.PartitionEpoch+1 {
		t.Fatalf("completed: leader %d epoch %d partition epoch %d", done.Leader, done.LeaderEpoch, done.PartitionEpoch)
	}
}

func TestReassignMovesRemovedLeader(t *testing.T) {
	brokers := brokerSpec{1: "up", 2: "down", 3: "up", 4: "up"}.infos()
	s := pstate("t", 0, ids(1, 2, 3), 1, ids(1, 2, 3))
	n, err := Reassign(s, ids(2, 3, 4), true, brokers)
	if err == nil {
		t.Fatal("a target naming unregistered broker 2 was accepted")
	}
	n, err = Reassign(s, ids(4, 3), true, brokers)
	if err != nil {
		t.Fatal(err)
	}
	n.ISR = ids(1, 3, 4)
	done, ok := Complete(n, brokers)
	if !ok {
		t.Fatal("not completed")
	}
	// 4 is first in the target and in sync: it leads, in a new epoch.
	if done.Leader != 4 || done.LeaderEpoch != s.LeaderEpoch+1 || !reflect.DeepEqual(done.ISR, ids(3, 4)) || !reflect.DeepEqual(done.Replicas, ids(4, 3)) {
		t.Fatalf("leader %d epoch %d isr %v replicas %v", done.Leader, done.LeaderEpoch, done.ISR, done.Replicas)
	}
	// No live in-sync target replica to take the leadership: wait.
	down := brokerSpec{1: "up", 3: "down", 4: "down"}.infos()
	if _, ok := Complete(n, down); ok {
		t.Fatal("completed with nobody on the target to lead")
	}
}

func TestReassignCancel(t *testing.T) {
	brokers := brokerSpec{1: "up", 2: "up", 3: "up", 4: "up"}.infos()
	s := pstate("t", 0, ids(1, 2, 3), 1, ids(1, 2, 3))
	if _, err := Reassign(s, nil, true, brokers); !errors.Is(err, ErrNoReassignment) {
		t.Fatalf("cancel without a reassignment: %v", err)
	}
	n, err := Reassign(s, ids(4, 2, 3), true, brokers)
	if err != nil {
		t.Fatal(err)
	}
	n.ISR = ids(1, 2, 3, 4)
	back, err := Reassign(n, nil, true, brokers)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(back.Replicas, ids(2, 3, 1)) {
		t.Fatalf("cancelled replicas %v", back.Replicas)
	}
	if !reflect.DeepEqual(back.ISR, ids(1, 2, 3)) || Reassigning(back) || back.Leader != 1 || back.LeaderEpoch != s.LeaderEpoch {
		t.Fatalf("cancelled: isr %v leader %d epoch %d adding %v removing %v", back.ISR, back.Leader, back.LeaderEpoch, back.AddingReplicas, back.RemovingReplicas)
	}
}

func TestReassignValidation(t *testing.T) {
	brokers := brokerSpec{1: "up", 2: "up", 3: "up", 4: "up"}.infos()
	s := pstate("t", 0, ids(1, 2, 3), 1, ids(1, 2, 3))
	for _, target := range [][]int32{{}, {1, 1, 2}, {1, 2, 9}} {
		if _, err := Reassign(s, target, true, brokers); !errors.Is(err, ErrInvalidAssignment) {
			t.Errorf("target %v: %v", target, err)
		}
	}
	if _, err := Reassign(s, ids(1, 2, 3, 4), false, brokers); !errors.Is(err, ErrReplicationFactorChange) {
		t.Errorf("rf change refused: %v", err)
	}
	if _, err := Reassign(s, ids(1, 2, 3, 4), true, brokers); err != nil {
		t.Errorf("rf change allowed: %v", err)
	}
	// Dropping replicas only completes at once; the leader moves when
	// it is dropped.
	n, err := Reassign(s, ids(3, 2), true, brokers)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(n.Replicas, ids(3, 2)) || !reflect.DeepEqual(n.ISR, ids(2, 3)) || n.Leader != 3 || n.LeaderEpoch != s.LeaderEpoch+1 || Reassigning(n) {
		t.Fatalf("shrink: replicas %v isr %v leader %d epoch %d", n.Replicas, n.ISR, n.Leader, n.LeaderEpoch)
	}
	// A target whose replicas are none in sync is refused.
	out := pstate("t", 0, ids(1, 2, 3), 1, ids(1))
	if _, err := Reassign(out, ids(2, 3), true, brokers); !errors.Is(err, ErrInvalidAssignment) {
		t.Fatalf("target out of the ISR: %v", err)
	}
}

// DecideAll takes one decision per partition: a failover first, the
// reassignment's completion on a later look.
func TestDecideAllOneDecisionPerPartition(t *testing.T) {
	s := pstate("t", 0, ids(4, 2, 3), 3, ids(2, 3, 4))
	s.AddingReplicas, s.RemovingReplicas = ids(4), ids(3)
	s.Replicas = ids(4, 2, 3)
	other := pstate("u", 0, ids(1, 2, 4), 1, ids(1, 2, 4))
	snap := snapWith(brokerSpec{1: "up", 2: "up", 3: "down", 4: "up"}, nil, s, other)
	ds := DecideAll(snap, Policy{})
	if len(ds) != 1 || ds[0].Reason != ReasonLeaderFenced || !Reassigning(ds[0].New) {
		t.Fatalf("decisions %v", ds)
	}
	next := ds[0].New
	next.Version = stateRev
	snap = snapWith(brokerSpec{1: "up", 2: "up", 3: "down", 4: "up"}, nil, next, other)
	ds = DecideAll(snap, Policy{})
	if len(ds) != 1 || ds[0].Reason != ReasonReassignmentComplete {
		t.Fatalf("decisions %v", ds)
	}
	if got := ds[0].New; !reflect.DeepEqual(got.Replicas, ids(4, 2)) || got.Leader != next.Leader || Reassigning(got) {
		t.Fatalf("completed %+v", got)
	}
}

// A target sent again while its reassignment is in progress is the same
// state (the added replica keeps its place in the ISR); a new target
// replaces the old one from the original replicas.
func TestReassignAgain(t *testing.T) {
	brokers := brokerSpec{1: "up", 2: "up", 3: "up", 4: "up", 5: "up"}.infos()
	s := pstate("t", 0, ids(1, 2, 3), 1, ids(1, 2, 3))
	n, err := Reassign(s, ids(1, 2, 4), true, brokers)
	if err != nil {
		t.Fatal(err)
	}
	n.ISR = ids(1, 2, 3, 4)
	again, err := Reassign(n, ids(1, 2, 4), true, brokers)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(again.Replicas, n.Replicas) || !reflect.DeepEqual(again.ISR, n.ISR) || !reflect.DeepEqual(again.AddingReplicas, ids(4)) || !reflect.DeepEqual(again.RemovingReplicas, ids(3)) {
		t.Fatalf("again: %+v", again)
	}
	other, err := Reassign(n, ids(1, 5, 3), true, brokers)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(other.Replicas, ids(1, 5, 3, 2)) || !reflect.DeepEqual(other.AddingReplicas, ids(5)) || !reflect.DeepEqual(other.RemovingReplicas, ids(2)) || !reflect.DeepEqual(other.ISR, ids(1, 2, 3)) {
		t.Fatalf("replaced: %+v", other)
	}
	// An added replica elected leader meanwhile, dropped by a new target,
	// leads until the move completes.
	n.Leader = 4
	moved, err := Reassign(n, ids(1, 2, 5), true, brokers)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(moved.Replicas, ids(1, 2, 5, 3, 4)) || moved.Leader != 4 || !reflect.DeepEqual(moved.RemovingReplicas, ids(3, 4)) {
		t.Fatalf("leader dropped: %+v", moved)
	}
}

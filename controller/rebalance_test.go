package controller

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/verbatim-kafka/verbatim/clustermeta"
	"github.com/verbatim-kafka/verbatim/clustermeta/memstore"
	"github.com/verbatim-kafka/verbatim/internal/testkit/logbuf"
)

// rebalanceSnap is topic "t" with ten partitions whose preferred replica
// is 1 (replicas 1,2,3), led by 2 where moved lists them, plus ten whose
// preferred is 2, all led by 2.
func rebalanceSnap(brokers brokerSpec, moved map[int32]bool, edit func(*clustermeta.PartitionState)) *clustermeta.Snapshot {
	var states []clustermeta.PartitionState
	for p := int32(0); p < 10; p++ {
		leader := int32(1)
		if moved[p] {
			leader = 2
		}
		s := pstate("t", p, ids(1, 2, 3), leader, ids(1, 2, 3))
		if edit != nil {
			edit(&s)
		}
		states = append(states, s)
	}
	for p := int32(0); p < 10; p++ {
		states = append(states, pstate("u", p, ids(2, 3, 1), 2, ids(1, 2, 3)))
	}
	return snapWith(brokers, nil, states...)
}

func movedPartitions(ds []Decision) string {
	var out []string
	for _, d := range ds {
		if d.Reason != ReasonPreferredElection || d.New.Leader != d.New.Replicas[0] || d.New.LeaderEpoch != d.Old.LeaderEpoch+1 {
			return fmt.Sprintf("unexpected decision %v", d)
		}
		out = append(out, fmt.Sprintf("%s-%d", d.New.Topic, d.New.Partition))
	}
	return fmt.Sprint(out)
}

func TestRebalance(t *testing.T) {
	all := brokerSpec{1: "up", 2: "up", 3: "up"}
	cases := []struct {
		name    string
		brokers brokerSpec
		moved   map[int32]bool
		percent int
		edit    func(*clustermeta.PartitionState)
		want    string
	}{
		{name: "balanced", brokers: all, percent: 10, want: "[]"},
		{name: "at the threshold", brokers: all, moved: map[int32]bool{4: true}, percent: 10, want: "[]"},
		{name: "above the threshold", brokers: all, moved: map[int32]bool{4: true, 7: true}, percent: 10, want: "[t-4 t-7]"},
		{name: "any imbalance with 0", brokers: all, moved: map[int32]bool{4: true}, percent: 0, want: "[t-4]"},
		{name: "preferred broker fenced", brokers: brokerSpec{2: "up", 3: "up"}, moved: map[int32]bool{4: true, 7: true}, percent: 10, want: "[]"},
		{name: "preferred broker shutting down", brokers: brokerSpec{1: "shut", 2: "up", 3: "up"}, moved: map[int32]bool{4: true, 7: true}, percent: 10, want: "[]"},
		{name: "preferred out of one ISR", brokers: all, moved: map[int32]bool{4: true, 7: true}, percent: 10,
			edit: func(s *clustermeta.PartitionState) {
				if s.Partition == 7 {
					s.ISR = ids(2, 3)
				}
			}, want: "[t-4]"},
		{name: "reassignment in progress", brokers: all, moved: map[int32]bool{4: true, 7: true}, percent: 10,
			edit: func(s *clustermeta.PartitionState) {
				if s.Partition == 4 {
					s.AddingReplicas = ids(4)
				}
			}, want: "[t-7]"},
		{name: "leaderless partitions are Decide's", brokers: all, moved: map[int32]bool{4: true, 7: true}, percent: 10,
			edit: func(s *clustermeta.PartitionState) {
				if s.Partition == 4 {
					s.Leader = none
				}
			}, want: "[t-7]"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := movedPartitions(Rebalance(rebalanceSnap(c.brokers, c.moved, c.edit), c.percent))
			if got != c.want {
				t.Fatalf("moved %s, want %s", got, c.want)
			}
		})
	}
}

// TestRunRebalances: an elected controller with the rebalance on moves a
// leadership back to its preferred replica at its next look.
func TestRunRebalances(t *testing.T) {
	st := memstore.New()
	defer st.Close()
	registerBrokers(t, st, 3)
	ctx := context.Background()
	snap, err := st.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	p0, _ := snap.Partition("t", 0)
	moved := changed(p0, p0.Replicas[1], p0.ISR, true)
	if _, err := st.CASPartitions(ctx, clustermeta.Fence{}, []clustermeta.PartitionState{moved}); err != nil {
		t.Fatal(err)
	}
	log := &logbuf.Buffer{}
	c := Config{Store: st, NodeID: 1, Log: textLogger(log), RetryBackoff: time.Millisecond,
		Rebalance: RebalanceConfig{Enable: true, Interval: 10 * time.Millisecond, PerBrokerPercentage: 10}}
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- Run(runCtx, c) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	}()
	waitSnap(t, st, "the preferred leader back", func(s *clustermeta.Snapshot) bool {
		p, _ := s.Partition("t", 0)
		return p.Leader == p0.Replicas[0] && p.LeaderEpoch == moved.LeaderEpoch+1
	})
	waitLog(t, log, "controller", "reason=\"preferred election\"")
}

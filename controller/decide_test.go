package controller

import (
	"reflect"
	"testing"

	"github.com/verbatim-kafka/verbatim/clustermeta"
)

// The tables' conventions: partition states are written at revision 100,
// brokers registered at 10 ("up"), registered at 200 ("restarted": after
// the state was written), "down" (not registered) or "shut" (registered,
// in controlled shutdown).
const stateRev = 100

type brokerSpec map[int32]string

func (b brokerSpec) infos() map[int32]clustermeta.BrokerInfo {
	out := map[int32]clustermeta.BrokerInfo{}
	for id, st := range b {
		switch st {
		case "up":
			out[id] = clustermeta.BrokerInfo{NodeID: id, Epoch: 10}
		case "restarted":
			out[id] = clustermeta.BrokerInfo{NodeID: id, Epoch: 200}
		case "shut":
			out[id] = clustermeta.BrokerInfo{NodeID: id, Epoch: 10, ShuttingDown: true}
		case "down":
		default:
			panic(st)
		}
	}
	return out
}

func pstate(topic string, p int32, replicas []int32, leader int32, isr []int32) clustermeta.PartitionState {
	return clustermeta.PartitionState{
		Topic: topic, Partition: p, Replicas: replicas, Leader: leader, ISR: isr,
		LeaderEpoch: 5, PartitionEpoch: 7, Version: stateRev,
	}
}

func snapWith(brokers brokerSpec, topicConfigs map[string]string, states ...clustermeta.PartitionState) *clustermeta.Snapshot {
	snap := &clustermeta.Snapshot{
		Revision:   300,
		Brokers:    brokers.infos(),
		Topics:     map[string]clustermeta.TopicRecord{},
		Partitions: map[string][]clustermeta.PartitionState{},
		Controller: clustermeta.NoLeader,
	}
	for _, s := range states {
		snap.Partitions[s.Topic] = append(snap.Partitions[s.Topic], s)
		t := snap.Topics[s.Topic]
		t.Name, t.Partitions, t.Configs = s.Topic, t.Partitions+1, topicConfigs
		snap.Topics[s.Topic] = t
	}
	return snap
}

func ids(v ...int32) []int32 { return v }

const none = clustermeta.NoLeader

func TestDecide(t *testing.T) {
	r123 := ids(1, 2, 3)
	all := brokerSpec{1: "up", 2: "up", 3: "up"}
	cases := []struct {
		name    string
		brokers brokerSpec
		unclean bool              // broker default
		configs map[string]string // topic configs
		leader  int32
		isr     []int32
		// want: no decision when wantReason is "".
		wantReason Reason
		wantLeader int32
		wantISR    []int32
	}{
		{name: "all live", brokers: all, leader: 1, isr: r123},
		{name: "leader fenced", brokers: brokerSpec{2: "up", 3: "up"}, leader: 1, isr: r123,
			wantReason: ReasonLeaderFenced, wantLeader: 2, wantISR: ids(2, 3)},
		{name: "leader in controlled shutdown", brokers: brokerSpec{1: "shut", 2: "up", 3: "up"}, leader: 1, isr: r123,
			wantReason: ReasonControlledShutdown, wantLeader: 2, wantISR: ids(2, 3)},
		{name: "leader restarted, others live", brokers: brokerSpec{1: "restarted", 2: "up", 3: "up"}, leader: 1, isr: r123,
			wantReason: ReasonLeaderRestarted, wantLeader: 2, wantISR: ids(2, 3)},
		{name: "leader restarted, alone in the ISR: re-elected in a new epoch", brokers: brokerSpec{1: "restarted", 2: "up", 3: "up"}, leader: 1, isr: ids(1),
			wantReason: ReasonLeaderRestarted, wantLeader: 1, wantISR: ids(1)},
		{name: "restarted ISR members only: the old leader first", brokers: brokerSpec{1: "restarted", 2: "restarted"}, leader: 2, isr: ids(1, 2),
			wantReason: ReasonLeaderRestarted, wantLeader: 2, wantISR: ids(2)},
		{name: "new leader in replica order, not ISR order", brokers: brokerSpec{2: "up", 3: "up"}, leader: 1, isr: ids(1, 3, 2),
			wantReason: ReasonLeaderFenced, wantLeader: 2, wantISR: ids(3, 2)},
		{name: "follower fenced", brokers: brokerSpec{1: "up", 2: "up"}, leader: 1, isr: r123,
			wantReason: ReasonISRShrink, wantLeader: 1, wantISR: ids(1, 2)},
		{name: "followers shutting down and restarted", brokers: brokerSpec{1: "up", 2: "shut", 3: "restarted"}, leader: 1, isr: r123,
			wantReason: ReasonISRShrink, wantLeader: 1, wantISR: ids(1)},
		{name: "fenced replica outside the ISR is no change", brokers: brokerSpec{1: "up", 2: "up"}, leader: 1, isr: ids(1, 2)},
		{name: "last ISR member fenced: no leader, ISR kept", brokers: brokerSpec{2: "up", 3: "up"}, leader: 1, isr: ids(1),
			wantReason: ReasonLeaderFenced, wantLeader: none, wantISR: ids(1)},
		{name: "whole ISR fenced at once: no leader, ISR kept", brokers: brokerSpec{}, leader: 1, isr: r123,
			wantReason: ReasonLeaderFenced, wantLeader: none, wantISR: r123},
		{name: "last ISR member shutting down: no leader, ISR kept", brokers: brokerSpec{1: "shut", 2: "up", 3: "up"}, leader: 1, isr: ids(1),
			wantReason: ReasonControlledShutdown, wantLeader: none, wantISR: ids(1)},
		{name: "leaderless, ISR member back", brokers: brokerSpec{1: "restarted", 2: "up", 3: "up"}, leader: none, isr: ids(1),
			wantReason: ReasonLeaderElected, wantLeader: 1, wantISR: ids(1)},
		{name: "leaderless, a live ISR member preferred over a restarted one", brokers: brokerSpec{1: "down", 2: "restarted", 3: "up"}, leader: none, isr: ids(2, 3),
			wantReason: ReasonLeaderElected, wantLeader: 3, wantISR: ids(3)},
		{name: "leaderless, others fenced leave the ISR", brokers: brokerSpec{2: "restarted"}, leader: none, isr: r123,
			wantReason: ReasonLeaderElected, wantLeader: 2, wantISR: ids(2)},
		{name: "leaderless, ISR fenced, no unclean", brokers: brokerSpec{2: "up", 3: "up"}, leader: none, isr: ids(1)},
		{name: "leaderless, ISR fenced, unclean by broker default", brokers: brokerSpec{2: "up", 3: "up"}, unclean: true, leader: none, isr: ids(1),
			wantReason: ReasonUncleanElection, wantLeader: 2, wantISR: ids(2)},
		{name: "unclean skips replicas shutting down", brokers: brokerSpec{2: "shut", 3: "restarted"}, unclean: true, leader: none, isr: ids(1),
			wantReason: ReasonUncleanElection, wantLeader: 3, wantISR: ids(3)},
		{name: "topic config false overrides the default", brokers: brokerSpec{2: "up", 3: "up"}, unclean: true,
			configs: map[string]string{UncleanLeaderElectionConfig: "false"}, leader: none, isr: ids(1)},
		{name: "topic config true overrides the default", brokers: brokerSpec{2: "up", 3: "up"},
			configs: map[string]string{UncleanLeaderElectionConfig: "TRUE"}, leader: none, isr: ids(1),
			wantReason: ReasonUncleanElection, wantLeader: 2, wantISR: ids(2)},
		{name: "unclean waits for an ISR member shutting down", brokers: brokerSpec{1: "shut", 2: "up"}, unclean: true, leader: none, isr: ids(1)},
		{name: "leader fenced, unclean in the same decision", brokers: brokerSpec{3: "up"}, unclean: true, leader: 1, isr: ids(1),
			wantReason: ReasonUncleanElection, wantLeader: 3, wantISR: ids(3)},
		{name: "leader fenced, ISR member shutting down blocks unclean", brokers: brokerSpec{2: "shut", 3: "up"}, unclean: true, leader: 1, isr: ids(1, 2),
			wantReason: ReasonLeaderFenced, wantLeader: none, wantISR: ids(1, 2)},
		{name: "leader fenced, a restarted ISR member leads cleanly", brokers: brokerSpec{2: "up", 3: "restarted"}, unclean: true, leader: 1, isr: ids(1, 3),
			wantReason: ReasonLeaderFenced, wantLeader: 3, wantISR: ids(3)},
		{name: "no replica live, unclean: no leader", brokers: brokerSpec{}, unclean: true, leader: none, isr: ids(1)},
		{name: "leader outside the ISR is repaired", brokers: all, leader: 1, isr: ids(2, 3),
			wantReason: ReasonLeaderNotInISR, wantLeader: 2, wantISR: ids(2, 3)},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := pstate("t", 0, r123, c.leader, c.isr)
			snap := snapWith(c.brokers, c.configs, s)
			got := Decide(snap, Policy{UncleanLeaderElection: c.unclean})
			if c.wantReason == "" {
				if len(got) != 0 {
					t.Fatalf("want no decision, got %v", got)
				}
				return
			}
			if len(got) != 1 {
				t.Fatalf("want one decision, got %v", got)
			}
			d := got[0]
			wantLE := s.LeaderEpoch
			if c.wantLeader != c.leader || c.wantReason == ReasonLeaderRestarted {
				wantLE++
			}
			if d.Reason != c.wantReason || d.New.Leader != c.wantLeader || !reflect.DeepEqual(d.New.ISR, c.wantISR) ||
				d.New.LeaderEpoch != wantLE || d.New.PartitionEpoch != s.PartitionEpoch+1 {
				t.Fatalf("got %v (partition epoch %d), want leader %d isr %v epoch %d (%s)",
					d, d.New.PartitionEpoch, c.wantLeader, c.wantISR, wantLE, c.wantReason)
			}
			if !reflect.DeepEqual(d.Old, s) || d.New.Version != s.Version || !reflect.DeepEqual(d.New.Replicas, s.Replicas) {
				t.Fatalf("old %+v / new %+v: want the read state and its version, the replicas kept", d.Old, d.New)
			}
			// Applying the decision and deciding again makes no second
			// decision of the same kind: the controller converges.
			again := d.New
			again.Version = 300 // written after every registration of the table
			if next := Decide(snapWith(c.brokers, c.configs, again), Policy{UncleanLeaderElection: c.unclean}); len(next) > 0 && next[0].Reason == d.Reason && next[0].New.Leader == d.New.Leader {
				t.Fatalf("decided %v again after %v", next, d)
			}
		})
	}
}

func TestDecideRevisionsUnknown(t *testing.T) {
	// A state without a version is never taken as older than a
	// registration: no restart is inferred.
	s := pstate("t", 0, ids(1, 2), 1, ids(1, 2))
	s.Version = 0
	if got := Decide(snapWith(brokerSpec{1: "restarted", 2: "restarted"}, nil, s), Policy{}); len(got) != 0 {
		t.Fatalf("got %v", got)
	}
}

func TestDecideSkipsMissingStates(t *testing.T) {
	// What the store's snapshot holds for a partition whose state is
	// absent or did not decode.
	s := clustermeta.PartitionState{Topic: "t", Partition: 0, Leader: none}
	if got := Decide(snapWith(brokerSpec{1: "up"}, map[string]string{UncleanLeaderElectionConfig: "true"}, s), Policy{}); len(got) != 0 {
		t.Fatalf("got %v", got)
	}
}

func TestDecideManyPartitions(t *testing.T) {
	b := brokerSpec{2: "up", 3: "up"}
	states := []clustermeta.PartitionState{
		pstate("b", 0, ids(1, 2, 3), 1, ids(1, 2, 3)),
		pstate("b", 1, ids(2, 3, 1), 2, ids(2, 3, 1)),
		pstate("b", 2, ids(3, 1, 2), 3, ids(3, 2)),
		pstate("a", 0, ids(1, 3), 1, ids(1)),
	}
	snap := snapWith(b, nil, states...)
	before := snap.Partitions["b"][0].ISR[0]
	got := Decide(snap, Policy{})
	var summary []string
	for _, d := range got {
		summary = append(summary, d.String())
	}
	want := []string{
		"a-0 leader 1 -> -1 epoch 5 -> 6 isr [1] -> [1] (leader fenced)",
		"b-0 leader 1 -> 2 epoch 5 -> 6 isr [1 2 3] -> [2 3] (leader fenced)",
		"b-1 leader 2 -> 2 epoch 5 -> 5 isr [2 3 1] -> [2 3] (ISR member fenced)",
	}
	if !reflect.DeepEqual(summary, want) {
		t.Fatalf("got\n%v\nwant\n%v", summary, want)
	}
	// The decisions own their slices: the snapshot is untouched.
	got[1].New.ISR[0] = 99
	if snap.Partitions["b"][0].ISR[0] != before {
		t.Fatal("a decision aliases the snapshot's ISR")
	}
}

func TestElect(t *testing.T) {
	all := brokerSpec{1: "up", 2: "up", 3: "up"}
	r := ids(1, 2, 3)
	cases := []struct {
		name    string
		kind    ElectionType
		brokers brokerSpec
		configs map[string]string
		leader  int32
		isr     []int32
		wantErr error
		want    int32
		wantISR []int32
	}{
		{name: "preferred", kind: PreferredElection, brokers: all, leader: 2, isr: r, want: 1, wantISR: r},
		{name: "preferred leads already", kind: PreferredElection, brokers: all, leader: 1, isr: r, wantErr: ErrElectionNotNeeded},
		{name: "preferred not in ISR", kind: PreferredElection, brokers: all, leader: 2, isr: ids(2, 3), wantErr: ErrPreferredLeaderNotAvailable},
		{name: "preferred fenced", kind: PreferredElection, brokers: brokerSpec{2: "up", 3: "up"}, leader: 2, isr: r, wantErr: ErrPreferredLeaderNotAvailable},
		{name: "preferred shutting down", kind: PreferredElection, brokers: brokerSpec{1: "shut", 2: "up"}, leader: 2, isr: r, wantErr: ErrPreferredLeaderNotAvailable},
		{name: "preferred restarted", kind: PreferredElection, brokers: brokerSpec{1: "restarted", 2: "up"}, leader: 2, isr: r, wantErr: ErrPreferredLeaderNotAvailable},
		{name: "preferred for a leaderless partition", kind: PreferredElection, brokers: all, leader: none, isr: r, want: 1, wantISR: r},
		{name: "unclean with a live leader", kind: UncleanElection, brokers: all, leader: 2, isr: r, wantErr: ErrElectionNotNeeded},
		{name: "unclean despite the topic config", kind: UncleanElection, brokers: brokerSpec{3: "up"},
			configs: map[string]string{UncleanLeaderElectionConfig: "false"}, leader: none, isr: ids(1), want: 3, wantISR: ids(3)},
		{name: "unclean request, clean election possible", kind: UncleanElection, brokers: brokerSpec{1: "restarted", 3: "up"}, leader: none, isr: ids(1), want: 1, wantISR: ids(1)},
		{name: "unclean, leader fenced", kind: UncleanElection, brokers: brokerSpec{2: "up"}, leader: 1, isr: ids(1), want: 2, wantISR: ids(2)},
		{name: "unclean, nobody live", kind: UncleanElection, brokers: brokerSpec{}, leader: none, isr: ids(1), wantErr: ErrEligibleLeadersNotAvailable},
		{name: "unclean, only an ISR member shutting down", kind: UncleanElection, brokers: brokerSpec{1: "shut", 2: "up"}, leader: 1, isr: ids(1), wantErr: ErrEligibleLeadersNotAvailable},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := pstate("t", 0, r, c.leader, c.isr)
			got := Elect(snapWith(c.brokers, c.configs, s), []PartitionRef{{"t", 0}}, c.kind)
			if len(got) != 1 {
				t.Fatalf("got %v", got)
			}
			e := got[0]
			if e.Err != c.wantErr {
				t.Fatalf("err %v, want %v", e.Err, c.wantErr)
			}
			if c.wantErr != nil {
				return
			}
			n := e.Decision.New
			if n.Leader != c.want || !reflect.DeepEqual(n.ISR, c.wantISR) || n.LeaderEpoch != s.LeaderEpoch+1 || n.PartitionEpoch != s.PartitionEpoch+1 {
				t.Fatalf("got %v, want leader %d isr %v", e.Decision, c.want, c.wantISR)
			}
		})
	}
}

func TestElectPartitions(t *testing.T) {
	snap := snapWith(brokerSpec{1: "up", 2: "up"}, nil,
		pstate("b", 0, ids(1, 2), 2, ids(1, 2)),
		pstate("a", 0, ids(2, 1), 2, ids(1, 2)),
		pstate("a", 1, ids(1, 2), 2, ids(2)))
	got := Elect(snap, nil, PreferredElection)
	var refs []PartitionRef
	var errs []error
	for _, e := range got {
		refs = append(refs, e.PartitionRef)
		errs = append(errs, e.Err)
	}
	if !reflect.DeepEqual(refs, []PartitionRef{{"a", 0}, {"a", 1}, {"b", 0}}) ||
		!reflect.DeepEqual(errs, []error{ErrElectionNotNeeded, ErrPreferredLeaderNotAvailable, nil}) {
		t.Fatalf("got %v %v", refs, errs)
	}
	got = Elect(snap, []PartitionRef{{"b", 0}, {"c", 0}, {"a", 9}}, UncleanElection)
	if got[0].Err != ErrElectionNotNeeded || got[1].Err != ErrUnknownPartition || got[2].Err != ErrUnknownPartition {
		t.Fatalf("got %v", got)
	}
}

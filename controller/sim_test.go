package controller

import (
	"fmt"
	"math/rand"
	"slices"
	"testing"

	"github.com/verbatim-kafka/verbatim/clustermeta"
)

// A seeded simulation of a cluster under the controller's decisions:
// brokers die, return and shut down; leaders append, followers fetch
// (truncating to the leader's log first) and leaders shrink and expand
// their ISR as Kafka's do. The model's store is one revision counter:
// every write is a compare-and-swap that raises it. After every step the
// invariants the controller promises are checked.

type simBroker struct {
	up, shutting bool
	// epoch is the registration's revision (BrokerInfo.Epoch).
	epoch int64
	// shutSteps counts the steps since the controlled shutdown began.
	shutSteps int
	// logs holds, per partition, the leader epoch of each record.
	logs map[string][]int32
}

type simCounts struct {
	steps, kills, restarts, shutdowns, appends, leaderISRWrites, decisions, elections, unclean int
	reassignStarts, reassignCompletions                                                        int
}

type sim struct {
	t       *testing.T
	rng     *rand.Rand
	rev     int64
	brokers map[int32]*simBroker
	topics  map[string]clustermeta.TopicRecord
	parts   map[string][]clustermeta.PartitionState
	// matched is what the acting leader knows of each follower's log end
	// in its current epoch (reset on every leader epoch change).
	matched map[string]map[int32]int
	hw      map[string]int
	// committed is the acknowledged prefix of each partition's log.
	committed map[string][]int32
	// epochLeader records who led each partition in each leader epoch.
	epochLeader map[string]map[int32]int32
	// appended records who appended in each leader epoch.
	appended map[string]map[int32]int32
	counts   simCounts
}

func pkey(topic string, p int32) string { return fmt.Sprintf("%s-%d", topic, p) }

func newSim(t *testing.T, seed int64) *sim {
	s := &sim{
		t: t, rng: rand.New(rand.NewSource(seed)),
		brokers: map[int32]*simBroker{}, topics: map[string]clustermeta.TopicRecord{},
		parts: map[string][]clustermeta.PartitionState{}, matched: map[string]map[int32]int{},
		hw: map[string]int{}, committed: map[string][]int32{},
		epochLeader: map[string]map[int32]int32{}, appended: map[string]map[int32]int32{},
	}
	var infos []clustermeta.BrokerInfo
	for id := int32(1); id <= 4; id++ {
		s.rev++
		s.brokers[id] = &simBroker{up: true, epoch: s.rev, logs: map[string][]int32{}}
		infos = append(infos, clustermeta.BrokerInfo{NodeID: id, Rack: fmt.Sprintf("r%d", id%2)})
	}
	create := func(name string, count int32, rf int16, configs map[string]string) {
		assignment, err := Assign(infos, 0, count, rf, int(seed))
		if err != nil {
			t.Fatal(err)
		}
		s.topics[name] = clustermeta.TopicRecord{Name: name, Partitions: count, Configs: configs}
		for p, reps := range assignment {
			s.rev++
			st := clustermeta.PartitionState{Topic: name, Partition: int32(p), Replicas: reps,
				ISR: slices.Clone(reps), Leader: reps[0], Version: s.rev}
			s.parts[name] = append(s.parts[name], st)
			s.noteLeader(st)
		}
	}
	create("a", 3, 3, nil)
	create("b", 2, 2, map[string]string{UncleanLeaderElectionConfig: "true"})
	create("c", 2, 1, nil)
	return s
}

func (s *sim) snapshot() *clustermeta.Snapshot {
	snap := &clustermeta.Snapshot{Revision: s.rev, Brokers: map[int32]clustermeta.BrokerInfo{},
		Topics: s.topics, Partitions: map[string][]clustermeta.PartitionState{}, Controller: 0}
	for id, b := range s.brokers {
		if b.up {
			snap.Brokers[id] = clustermeta.BrokerInfo{NodeID: id, Epoch: b.epoch, ShuttingDown: b.shutting}
		}
	}
	for name, ps := range s.parts {
		cp := make([]clustermeta.PartitionState, len(ps))
		for i, p := range ps {
			p.Replicas, p.ISR = slices.Clone(p.Replicas), slices.Clone(p.ISR)
			cp[i] = p
		}
		snap.Partitions[name] = cp
	}
	return snap
}

func (s *sim) fail(format string, args ...any) {
	s.t.Helper()
	s.t.Fatalf("step %d: %s", s.counts.steps, fmt.Sprintf(format, args...))
}

// noteLeader checks that no partition has two leaders in one epoch.
func (s *sim) noteLeader(st clustermeta.PartitionState) {
	k := pkey(st.Topic, st.Partition)
	if s.epochLeader[k] == nil {
		s.epochLeader[k] = map[int32]int32{}
	}
	if prev, ok := s.epochLeader[k][st.LeaderEpoch]; ok && prev != st.Leader {
		s.fail("%s epoch %d led by %d and %d", k, st.LeaderEpoch, prev, st.Leader)
	}
	s.epochLeader[k][st.LeaderEpoch] = st.Leader
}

// write is the store's compare-and-swap: it refuses a stale version.
func (s *sim) write(st clustermeta.PartitionState) bool {
	cur := &s.parts[st.Topic][st.Partition]
	if cur.Version != st.Version {
		return false
	}
	if st.PartitionEpoch != cur.PartitionEpoch+1 || st.LeaderEpoch < cur.LeaderEpoch {
		s.fail("%s: epochs %d/%d -> %d/%d", pkey(st.Topic, st.Partition), cur.LeaderEpoch, cur.PartitionEpoch, st.LeaderEpoch, st.PartitionEpoch)
	}
	if (st.Leader != cur.Leader) && st.LeaderEpoch == cur.LeaderEpoch {
		s.fail("%s: leader %d -> %d in the same epoch", pkey(st.Topic, st.Partition), cur.Leader, st.Leader)
	}
	if st.LeaderEpoch != cur.LeaderEpoch {
		s.matched[pkey(st.Topic, st.Partition)] = map[int32]int{}
	}
	s.rev++
	st.Version = s.rev
	*cur = st
	s.noteLeader(st)
	return true
}

// acting is the broker that leads the partition now, NoLeader when none:
// registered, named leader by a state written after its registration
// (a restarted broker does not take up an older incarnation's leadership).
func (s *sim) acting(st clustermeta.PartitionState) int32 {
	if st.Leader == clustermeta.NoLeader {
		return clustermeta.NoLeader
	}
	if b := s.brokers[st.Leader]; b.up && b.epoch < st.Version {
		return st.Leader
	}
	return clustermeta.NoLeader
}

func (s *sim) eachPartition(f func(k string, st *clustermeta.PartitionState)) {
	for _, name := range []string{"a", "b", "c"} {
		for i := range s.parts[name] {
			f(pkey(name, int32(i)), &s.parts[name][i])
		}
	}
}

func (s *sim) step() {
	s.counts.steps++
	r := s.rng.Float64()
	id := int32(1 + s.rng.Intn(len(s.brokers)))
	b := s.brokers[id]
	switch {
	case r < 0.10 && b.up: // SIGKILL: the lease expires
		b.up, b.shutting = false, false
		s.counts.kills++
	case r < 0.25 && !b.up: // the broker comes back, registered anew
		s.rev++
		b.up, b.epoch = true, s.rev
		s.counts.restarts++
	case r < 0.30 && b.up && !b.shutting: // controlled shutdown begins
		b.shutting, b.shutSteps = true, 0
		s.counts.shutdowns++
	}
	// Brokers in controlled shutdown exit once they lead nothing (or
	// after a while regardless, as Kafka's shutdown gives up waiting).
	for id, b := range s.brokers {
		if !b.shutting {
			continue
		}
		b.shutSteps++
		leads := false
		s.eachPartition(func(_ string, st *clustermeta.PartitionState) { leads = leads || s.acting(*st) == id })
		if (!leads && s.rng.Intn(2) == 0) || b.shutSteps > 8 {
			b.up, b.shutting = false, false
		}
	}
	if s.rng.Float64() < 0.1 {
		s.reassign()
	}
	s.eachPartition(func(k string, st *clustermeta.PartitionState) { s.replicate(k, st) })
	s.checkCommitted()
	// The controller acts on most steps; on the others events pile up
	// (a broker may die and return before it looks).
	if s.rng.Float64() < 0.7 {
		s.decide()
	}
}

// reassign is an operator's AlterPartitionReassignments: a partition of
// topic "a" to 3 random brokers (or a cancellation), written as a
// broker writes it (a compare-and-swap of Reassign's state).
func (s *sim) reassign() {
	st := s.parts["a"][s.rng.Intn(len(s.parts["a"]))]
	var target []int32
	if !Reassigning(st) || s.rng.Intn(4) > 0 {
		target = []int32{1, 2, 3, 4}
		s.rng.Shuffle(len(target), func(i, j int) { target[i], target[j] = target[j], target[i] })
		target = target[:3]
	}
	n, err := Reassign(st, target, true, s.snapshot().Brokers)
	if err != nil {
		return // an unregistered target broker, nothing to cancel
	}
	if Reassigning(n) && !slices.Equal(Target(n), target) {
		s.fail("Reassign to %v built target %v", target, Target(n))
	}
	if n.Leader != st.Leader && !slices.Contains(st.ISR, n.Leader) && n.Leader != clustermeta.NoLeader {
		s.fail("Reassign elected %d from outside the ISR %v", n.Leader, st.ISR)
	}
	if s.write(n) {
		s.counts.reassignStarts++
	}
}

// replicate is one partition's data traffic and its leader's ISR upkeep.
func (s *sim) replicate(k string, st *clustermeta.PartitionState) {
	leader := s.acting(*st)
	if leader == clustermeta.NoLeader {
		return
	}
	lb := s.brokers[leader]
	if s.rng.Float64() < 0.4 {
		n := 1 + s.rng.Intn(3)
		for i := 0; i < n; i++ {
			lb.logs[k] = append(lb.logs[k], st.LeaderEpoch)
		}
		if s.appended[k] == nil {
			s.appended[k] = map[int32]int32{}
		}
		if prev, ok := s.appended[k][st.LeaderEpoch]; ok && prev != leader {
			s.fail("%s: %d and %d both appended in epoch %d", k, prev, leader, st.LeaderEpoch)
		}
		s.appended[k][st.LeaderEpoch] = leader
		s.counts.appends++
	}
	llog := lb.logs[k]
	if s.matched[k] == nil {
		s.matched[k] = map[int32]int{}
	}
	for _, f := range st.Replicas {
		fb := s.brokers[f]
		if f == leader || !fb.up || s.rng.Float64() < 0.3 {
			continue
		}
		// Truncate to the common prefix (OffsetForLeaderEpoch), then
		// fetch part or all of the rest.
		flog := fb.logs[k]
		c := 0
		for c < len(flog) && c < len(llog) && flog[c] == llog[c] {
			c++
		}
		upto := c + s.rng.Intn(len(llog)-c+1)
		fb.logs[k] = slices.Clone(llog[:upto])
		s.matched[k][f] = upto
	}
	// The high watermark: the minimum of the ISR's log ends, never down.
	hw := len(llog)
	for _, m := range st.ISR {
		if m != leader {
			hw = min(hw, s.matched[k][m])
		}
	}
	if hw > len(s.committed[k]) {
		s.committed[k] = slices.Clone(llog[:hw])
	}
	s.hw[k] = max(s.hw[k], hw)
	// ISR upkeep (fenced by the leader's session in the store): shrink a
	// lagging follower, expand one that reached the high watermark.
	if s.rng.Float64() < 0.5 {
		isr := slices.Clone(st.ISR)
		for _, m := range st.ISR {
			if m != leader && s.matched[k][m] < len(llog) && s.rng.Float64() < 0.4 {
				isr = slices.DeleteFunc(isr, func(x int32) bool { return x == m })
			}
		}
		for _, f := range st.Replicas {
			fb := s.brokers[f]
			if !slices.Contains(isr, f) && fb.up && !fb.shutting && s.matched[k][f] >= len(s.committed[k]) &&
				s.matched[k][f] > 0 && s.rng.Float64() < 0.5 {
				isr = append(isr, f)
			}
		}
		if !slices.Equal(isr, st.ISR) {
			n := *st
			n.ISR = isr
			n.PartitionEpoch++
			if s.write(n) {
				s.counts.leaderISRWrites++
			}
		}
	}
}

// checkCommitted: every acting leader holds every acknowledged record.
func (s *sim) checkCommitted() {
	s.eachPartition(func(k string, st *clustermeta.PartitionState) {
		if l := s.acting(*st); l != clustermeta.NoLeader {
			log := s.brokers[l].logs[k]
			c := s.committed[k]
			if len(log) < len(c) || !slices.Equal(log[:len(c)], c) {
				s.fail("%s: leader %d's log %v lost acknowledged %v", k, l, log, c)
			}
		}
	})
}

// The model's own view of a broker for a state, independent of the
// controller's: registered, not shutting down, and registered before the
// state was written (else a new incarnation the state knows nothing of).
func (s *sim) registered(id int32) bool { return s.brokers[id].up }

func (s *sim) live(id int32, st clustermeta.PartitionState) bool {
	b := s.brokers[id]
	return b.up && !b.shutting && b.epoch < st.Version
}

func (s *sim) electable(id int32) bool { b := s.brokers[id]; return b.up && !b.shutting }

func (s *sim) decide() {
	snap := s.snapshot()
	ds := DecideAll(snap, Policy{})
	seen := map[string]bool{}
	for _, d := range ds {
		k := pkey(d.New.Topic, d.New.Partition)
		if seen[k] {
			s.fail("two decisions for %s", k)
		}
		seen[k] = true
		// The ISR loses no live member by the controller's hand but the
		// replicas a completed reassignment removes.
		for _, m := range d.Old.ISR {
			if !slices.Contains(d.New.ISR, m) && s.live(m, d.Old) && !(d.Reason == ReasonReassignmentComplete && slices.Contains(d.Old.RemovingReplicas, m)) {
				s.fail("%v removed live ISR member %d", d, m)
			}
		}
		if d.Reason == ReasonReassignmentComplete {
			for _, a := range d.Old.AddingReplicas {
				if !slices.Contains(d.Old.ISR, a) {
					s.fail("%v: completed with adding replica %d out of the ISR", d, a)
				}
			}
			if !slices.Equal(d.New.Replicas, Target(d.Old)) || Reassigning(d.New) || !slices.Contains(d.New.Replicas, d.New.Leader) {
				s.fail("%v: completed to replicas %v leader %d (target %v)", d, d.New.Replicas, d.New.Leader, Target(d.Old))
			}
			s.counts.reassignCompletions++
		}
		if len(d.New.ISR) == 0 {
			s.fail("%v: empty ISR", d)
		}
		if d.Reason == ReasonUncleanElection {
			if d.New.Topic != "b" {
				s.fail("%v: unclean election on a topic without it", d)
			}
			if anyOf(d.Old.ISR, s.registered) {
				s.fail("%v: unclean election with an ISR member registered", d)
			}
			// What was acknowledged may be lost: the new leader's log
			// is the partition's from now on.
			s.committed[k] = nil
			s.counts.unclean++
		} else if d.New.Leader != clustermeta.NoLeader && !slices.Contains(d.Old.ISR, d.New.Leader) {
			s.fail("%v: leader from outside the ISR", d)
		}
		if d.LeaderChanged() {
			s.counts.elections++
		}
		if !s.write(d.New) {
			s.fail("%v: the decision's version is stale on a fresh snapshot", d)
		}
		s.counts.decisions++
	}
	// After the decisions: every leader is live and in the ISR, which
	// holds live members only, and every partition with an electable ISR
	// member (or, unclean, replica) has a leader.
	s.eachPartition(func(k string, st *clustermeta.PartitionState) {
		if st.Leader != clustermeta.NoLeader {
			if !slices.Contains(st.ISR, st.Leader) || !s.live(st.Leader, *st) || s.acting(*st) != st.Leader {
				s.fail("%s: leader %d not live or outside ISR %v after the decisions", k, st.Leader, st.ISR)
			}
			for _, m := range st.ISR {
				if !s.live(m, *st) {
					s.fail("%s: ISR %v keeps %d, not live, after the decisions", k, st.ISR, m)
				}
			}
			return
		}
		for _, m := range st.ISR {
			if s.electable(m) {
				s.fail("%s: leaderless with electable ISR member %d (ISR %v)", k, m, st.ISR)
			}
		}
		if st.Topic == "b" && !anyOf(st.ISR, s.registered) {
			for _, r := range st.Replicas {
				if s.electable(r) {
					s.fail("%s: unclean topic leaderless with live replica %d", k, r)
				}
			}
		}
	})
	// The decisions converge: on the state they leave, nothing more to do
	// but the completion of a reassignment whose partition had a failover
	// decision this time.
	for _, d := range DecideAll(s.snapshot(), Policy{}) {
		if d.Reason != ReasonReassignmentComplete || !seen[pkey(d.New.Topic, d.New.Partition)] {
			s.fail("decisions right after the decisions: %v", d)
		}
	}
}

func TestSimulation(t *testing.T) {
	var total simCounts
	for seed := int64(1); seed <= 12; seed++ {
		s := newSim(t, seed)
		for i := 0; i < 400; i++ {
			s.step()
		}
		c := s.counts
		total.steps += c.steps
		total.kills += c.kills
		total.restarts += c.restarts
		total.shutdowns += c.shutdowns
		total.appends += c.appends
		total.leaderISRWrites += c.leaderISRWrites
		total.decisions += c.decisions
		total.elections += c.elections
		total.unclean += c.unclean
		total.reassignStarts += c.reassignStarts
		total.reassignCompletions += c.reassignCompletions
	}
	t.Logf("%+v", total)
	// The simulation must have exercised what it checks.
	if total.elections < 50 || total.unclean == 0 || total.shutdowns == 0 || total.leaderISRWrites < 50 || total.reassignCompletions < 20 {
		t.Fatalf("the simulation exercised too little: %+v", total)
	}
}

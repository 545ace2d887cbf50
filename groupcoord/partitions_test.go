package groupcoord

import (
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/verbatim-kafka/verbatim/coordlog"
	"github.com/verbatim-kafka/verbatim/coordlog/coordlogtest"
)

// These tests move __consumer_offsets partitions between coordinators
// in PerPartition mode (cluster mode) over one shared log, as two
// brokers share the replicated partition.

func perPartition(l coordlog.Log, clk coordlog.Clock) *Coordinator {
	return New(Config{Log: l, Clock: clk, PerPartition: true})
}

// loadAll has c load every partition of l at epoch.
func loadAll(c *Coordinator, l *coordlogtest.MemLog, epoch int32) {
	for p := range l.Count {
		c.LoadPartition(p, epoch)()
	}
}

// groupsOnDistinctPartitions returns two group ids whose partitions differ.
func groupsOnDistinctPartitions(c *Coordinator) (string, string) {
	a := "ga"
	for i := 0; ; i++ {
		b := fmt.Sprint("gb", i)
		if c.PartitionFor(b) != c.PartitionFor(a) {
			return a, b
		}
	}
}

func commitOne(c *Coordinator, group, topic string, off int64) int16 {
	cs := []OffsetCommit{{TP: coordlog.TopicPartition{Topic: topic}, Entry: OffsetEntry{Offset: off, LeaderEpoch: 3, Metadata: "m"}}}
	c.CommitOffsets(group, "", nil, -1, cs)
	return cs[0].Code
}

// fetchAll is the group's committed offsets by topic (partition 0), or the
// top-level code.
func fetchAll(c *Coordinator, group string) (int16, map[string]int64) {
	code, offs := c.FetchOffsets(group, nil, false)
	out := map[string]int64{}
	for _, o := range offs {
		out[o.TP.Topic] = o.Offset
	}
	return code, out
}

func TestPartitionMoveKeepsCommittedState(t *testing.T) {
	clk := coordlogtest.NewClock(time.UnixMilli(1_700_000_000_000))
	l := coordlogtest.New()
	// With an initial rebalance delay a first member's join waits.
	a := New(Config{Log: l, Clock: clk, PerPartition: true, InitialRebalanceDelay: 3 * time.Second})
	t.Cleanup(a.Shutdown)
	loadAll(a, l, 0)
	g1, g2 := groupsOnDistinctPartitions(a)
	p1 := a.PartitionFor(g1)
	for i, topic := range []string{"t1", "t2"} {
		if code := commitOne(a, g1, topic, int64(10+i)); code != 0 {
			t.Fatalf("commit: %d", code)
		}
	}
	if code := commitOne(a, g2, "t1", 99); code != 0 {
		t.Fatalf("commit: %d", code)
	}
	// A transactional offset still pending, then committed by its marker.
	txc := []OffsetCommit{{TP: coordlog.TopicPartition{Topic: "t3"}, Entry: OffsetEntry{Offset: 7, LeaderEpoch: -1}}}
	a.TxnCommitOffsets(g1, "", nil, -1, 5, 0, txc)
	if txc[0].Code != 0 {
		t.Fatalf("txn commit: %d", txc[0].Code)
	}
	// A member waiting on its join is answered NOT_COORDINATOR by the
	// move.
	res, _ := a.Join(jreq(g1, "", nil, "md"))
	_, ch := a.Join(jreq(g1, res.MemberID, nil, "md"))
	if ch == nil || !pendingJoin(ch) {
		t.Fatalf("join not waiting")
	}

	b := perPartition(l, clk)
	t.Cleanup(b.Shutdown)
	if code, _ := fetchAll(b, g1); code != kerr.NotCoordinator.Code {
		t.Fatalf("b before election: %d, want NOT_COORDINATOR", code)
	}
	// p1 moves from a to b: a resigns, b is elected at the next epoch.
	a.UnloadPartition(p1)
	if r := recvJoin(t, ch); r.Code != kerr.NotCoordinator.Code {
		t.Fatalf("waiting join after unload: %+v", r)
	}
	if code, _ := fetchAll(a, g1); code != kerr.NotCoordinator.Code {
		t.Fatalf("a after unload: %d, want NOT_COORDINATOR", code)
	}
	if code := commitOne(a, g1, "t1", 1000); code != kerr.NotCoordinator.Code {
		t.Fatalf("commit to a after unload: %d", code)
	}
	if code, offs := fetchAll(a, g2); code != 0 || offs["t1"] != 99 {
		t.Fatalf("a's other partition disturbed: %d %v", code, offs)
	}
	load := b.LoadPartition(p1, 1)
	if code, _ := fetchAll(b, g1); code != kerr.CoordinatorLoadInProgress.Code {
		t.Fatalf("b while loading: %d, want COORDINATOR_LOAD_IN_PROGRESS", code)
	}
	if code := commitOne(b, g1, "t1", 1000); code != kerr.CoordinatorLoadInProgress.Code {
		t.Fatalf("commit while loading: %d", code)
	}
	if !b.LoadInProgress() || b.Owns(p1) {
		t.Fatal("b does not report the load in progress")
	}
	// The marker of pid 5 lands while b replays, past the end the
	// replay reads: applied once the groups are in.
	b.CompleteTxn(p1, 5, true)
	load()
	if err := l.AppendMarker(coordlog.TopicPartition{Topic: coordlog.OffsetsTopic, Partition: p1}, 5, true, clk.Now()); err != nil {
		t.Fatal(err)
	}
	code, offs := fetchAll(b, g1)
	if code != 0 || len(offs) != 3 || offs["t1"] != 10 || offs["t2"] != 11 || offs["t3"] != 7 {
		t.Fatalf("b after load: %d %v, want t1=10 t2=11 t3=7", code, offs)
	}
	if code, _ := fetchAll(b, g2); code != kerr.NotCoordinator.Code {
		t.Fatalf("b serves a partition it was not given: %d", code)
	}
	// b serves the group from here on; a reload at the same epoch is a
	// no-op, and the group's new commit survives a further move back.
	if code := commitOne(b, g1, "t1", 20); code != 0 {
		t.Fatalf("commit on b: %d", code)
	}
	b.LoadPartition(p1, 1)()
	if _, offs := fetchAll(b, g1); offs["t1"] != 20 {
		t.Fatalf("same-epoch load reset the state: %v", offs)
	}
	b.UnloadPartition(p1)
	a.LoadPartition(p1, 2)()
	if code, offs := fetchAll(a, g1); code != 0 || offs["t1"] != 20 || offs["t2"] != 11 || offs["t3"] != 7 {
		t.Fatalf("a after the move back: %d %v", code, offs)
	}
}

func TestPartitionLoadOvertakenByUnload(t *testing.T) {
	clk := coordlogtest.NewClock(time.UnixMilli(1_700_000_000_000))
	l := coordlogtest.New()
	a := perPartition(l, clk)
	loadAll(a, l, 0)
	g, _ := groupsOnDistinctPartitions(a)
	if code := commitOne(a, g, "t", 5); code != 0 {
		t.Fatal(code)
	}
	a.Shutdown()
	b := perPartition(l, clk)
	t.Cleanup(b.Shutdown)
	p := b.PartitionFor(g)
	stale := b.LoadPartition(p, 1)
	b.UnloadPartition(p)
	stale() // finishes after the resignation: thrown away
	if code, _ := fetchAll(b, g); code != kerr.NotCoordinator.Code {
		t.Fatalf("a load overtaken by its unload installed the groups: %d", code)
	}
	load := b.LoadPartition(p, 2)
	again := b.LoadPartition(p, 3) // elected again without a resignation
	again()
	if code, _ := fetchAll(b, g); code != kerr.CoordinatorLoadInProgress.Code {
		t.Fatalf("a re-election's load ran a second replay: %d", code)
	}
	load()
	if code, offs := fetchAll(b, g); code != 0 || offs["t"] != 5 {
		t.Fatalf("after the load: %d %v", code, offs)
	}
	// Elected again while serving: the groups stay served as they are,
	// with no reload (which would miss writes of the old epoch still in
	// flight).
	if code := commitOne(b, g, "t", 6); code != 0 {
		t.Fatal(code)
	}
	load = b.LoadPartition(p, 4)
	if code, offs := fetchAll(b, g); code != 0 || offs["t"] != 6 {
		t.Fatalf("re-election interrupted the partition: %d %v", code, offs)
	}
	load()
}

func TestSingleNodeOwnsEveryPartition(t *testing.T) {
	c := start(t, coordlogtest.New(), coordlogtest.NewClock(time.Now()))
	// Single-node mode ignores the cluster calls.
	c.UnloadPartition(c.PartitionFor("g"))
	c.LoadPartition(c.PartitionFor("g"), 7)()
	if code := commitOne(c, "g", "t", 1); code != 0 || !c.Owns(c.PartitionFor("g")) || c.LoadInProgress() {
		t.Fatalf("single node refused a group: %d", code)
	}
}

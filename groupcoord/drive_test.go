package groupcoord

import (
	"errors"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/verbatim-kafka/verbatim/coordlog"
	"github.com/verbatim-kafka/verbatim/coordlog/coordlogtest"
)

func commit(c *Coordinator, group string, offset int64) int16 {
	cs := []OffsetCommit{{TP: coordlog.TopicPartition{Topic: "t", Partition: 0}, Entry: OffsetEntry{Offset: offset, LeaderEpoch: -1}}}
	c.CommitOffsets(group, "", nil, -1, cs)
	return cs[0].Code
}

func fetched(c *Coordinator, group string) int64 {
	_, offs := c.FetchOffsets(group, []coordlog.TopicPartition{{Topic: "t", Partition: 0}}, false)
	return offs[0].Offset
}

// TestGroupNoLockHeldDuringAppend: every append the coordinator makes
// (offset commits, a leader's assignment, an empty group's metadata,
// deletion tombstones, retention) runs with the coordinator's lock
// released: the hook calls back into the coordinator, which would
// deadlock if the lock were held; the test turns that into a failure
// after a generous bound.
func TestGroupNoLockHeldDuringAppend(t *testing.T) {
	l := coordlogtest.New()
	clk := coordlogtest.NewClock(time.UnixMilli(1_700_000_000_000))
	c := start(t, l, clk)
	var calls int
	l.BeforeAppend = func(topic string, _ int32) error {
		calls++
		return coordlogtest.CallBack(t, topic, func() {
			c.List()
			describe(c, "g")
			fetched(c, "g")
			c.Heartbeat("g", "nobody", nil, 1)
		})
	}
	if code := commit(c, "solo", 5); code != 0 {
		t.Fatalf("commit: %d", code)
	}
	m1, ch := joinNew(t, c, "g")
	recvJoin(t, ch)
	syncAll(t, c, "g", 1, m1, m1)
	if _, ms := c.Leave("g", []LeaveMember{{MemberID: m1}}); ms[0].Code != 0 {
		t.Fatalf("leave: %+v", ms)
	}
	if code := c.DeleteGroup("g"); code != 0 {
		t.Fatalf("delete: %d", code)
	}
	c.Tick(clk.Advance(8 * 24 * time.Hour)) // expires "solo"
	l.BeforeAppend = nil
	if calls < 5 {
		t.Fatalf("%d appends seen", calls)
	}
	if got := fetched(c, "solo"); got != -1 {
		t.Fatalf("offsets after retention: %d", got)
	}
}

// Failed appends are answered as Kafka answers them, and what they would
// have changed is not visible.
func TestGroupFailedAppends(t *testing.T) {
	l := coordlogtest.New()
	clk := coordlogtest.NewClock(time.UnixMilli(1_700_000_000_000))
	c := start(t, l, clk)
	if code := commit(c, "g", 5); code != 0 {
		t.Fatalf("commit: %d", code)
	}
	fail := true
	l.BeforeAppend = func(string, int32) error {
		if fail {
			return &coordlog.CodedError{Code: kerr.NotCoordinator.Code, Err: errors.New("partition moved")}
		}
		return errors.New("disk full")
	}
	if code := commit(c, "g", 6); code != kerr.NotCoordinator.Code {
		t.Fatalf("commit with a failing log: %d", code)
	}
	if got := fetched(c, "g"); got != 5 {
		t.Fatalf("offset after a failed commit: %d", got)
	}
	fail = false
	if code := c.DeleteGroup("g"); code != kerr.CoordinatorNotAvailable.Code {
		t.Fatalf("delete with a failing log: %d", code)
	}
	if got := fetched(c, "g"); got != 5 || describe(c, "g").State != "Empty" {
		t.Fatalf("group after a failed delete: offset %d, %+v", got, describe(c, "g"))
	}
	// A leader's assignment that cannot be written: every waiting
	// member gets COORDINATOR_NOT_AVAILABLE and the group rebalances.
	l.BeforeAppend = nil
	m1, ch := joinNew(t, c, "s")
	recvJoin(t, ch)
	l.BeforeAppend = func(string, int32) error { return errors.New("disk full") }
	res, sch := c.Sync(SyncRequest{Group: "s", MemberID: m1, Generation: 1, Assignments: map[string][]byte{m1: []byte("a")}})
	if sch == nil {
		t.Fatalf("leader sync answered at once: %+v", res)
	}
	if r := <-sch; r.Code != kerr.CoordinatorNotAvailable.Code {
		t.Fatalf("leader sync with a failing log: %+v", r)
	}
	if d := describe(c, "s"); d.State != "PreparingRebalance" {
		t.Fatalf("after the failed assignment: %+v", d)
	}
}

package txncoord

import (
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/verbatim-kafka/verbatim/coordlog"
	"github.com/verbatim-kafka/verbatim/coordlog/coordlogtest"
)

// fakeHost is a Host over an in-memory log: every partition of topics in
// exists is there, markers go to the log, producer ids count up.
type fakeHost struct {
	*coordlogtest.MemLog
	mu     sync.Mutex
	exists map[string]bool
	nextID int64
	above  int64
}

func newHost(topics ...string) *fakeHost {
	h := &fakeHost{MemLog: coordlogtest.New(), exists: map[string]bool{}}
	for _, t := range topics {
		h.exists[t] = true
	}
	return h
}

func (h *fakeHost) PartitionExists(tp coordlog.TopicPartition) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.exists[tp.Topic] && tp.Partition < 4
}

func (h *fakeHost) CoordinatorEpoch(int32) int32 { return 0 }

func (h *fakeHost) WriteMarker(tp coordlog.TopicPartition, pid int64, epoch int16, commit bool, _ int32, now time.Time) error {
	if !h.PartitionExists(tp) {
		return coordlog.ErrPartitionGone
	}
	return h.AppendMarker(tp, pid, commit, now)
}

func (h *fakeHost) AllocateProducerID() (int64, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.nextID = max(h.nextID, h.above+1)
	h.nextID++
	return h.nextID - 1, nil
}

func (h *fakeHost) EnsureProducerIDsAbove(min int64) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.above = max(h.above, min)
	return nil
}

func (h *fakeHost) MaxLoggedProducerID() int64 { return -1 }

func startTxn(t *testing.T, h Host, clk coordlog.Clock) *Coordinator {
	t.Helper()
	return coordlogtest.Start(t, New(Config{Host: h, Clock: clk}))
}

// fixture is a started coordinator over a host with topic t (and
// extra topics) and transaction "tx" open on t-0 and t-1.
type fixture struct {
	h     *fakeHost
	clk   *coordlogtest.Clock
	c     *Coordinator
	pid   int64
	epoch int16
}

func newFixture(t *testing.T, topics ...string) *fixture {
	t.Helper()
	f := &fixture{h: newHost(append(topics, "t")...), clk: coordlogtest.NewClock(time.UnixMilli(1_700_000_000_000))}
	f.c = startTxn(t, f.h, f.clk)
	f.pid, f.epoch = open(t, f.c, "tx")
	return f
}

func describe(c *Coordinator, id string) kmsg.DescribeTransactionsResponseTransactionState {
	d := kmsg.NewDescribeTransactionsResponseTransactionState()
	c.Describe(id, &d)
	return d
}

// open inits id and adds partitions 0 and 1 of topic t.
func open(t *testing.T, c *Coordinator, id string) (int64, int16) {
	t.Helper()
	r := c.InitProducerID(id, 60000, -1, -1)
	if r.Code != 0 {
		t.Fatalf("init %s: %+v", id, r)
	}
	tps := []coordlog.TopicPartition{{Topic: "t", Partition: 0}, {Topic: "t", Partition: 1}}
	for i, code := range c.AddPartitions(id, r.PID, r.Epoch, tps, false) {
		if code != 0 {
			t.Fatalf("add %v: %d", tps[i], code)
		}
	}
	return r.PID, r.Epoch
}

func markers(h *fakeHost, p int32) (commits, aborts int) {
	for _, e := range h.Entries("t", p) {
		if e.Control && e.Commit {
			commits++
		} else if e.Control {
			aborts++
		}
	}
	return
}

func TestTxnCommitWritesMarkersAndCompletes(t *testing.T) {
	f := newFixture(t)
	h, clk, c, pid, epoch := f.h, f.clk, f.c, f.pid, f.epoch
	if code := c.EndTxn("tx", pid, epoch, true); code != 0 {
		t.Fatalf("end: %d", code)
	}
	if d := describe(c, "tx"); d.State != "CompleteCommit" || len(d.Topics) != 0 {
		t.Fatalf("after commit: %+v", d)
	}
	for p := int32(0); p < 2; p++ {
		if cm, ab := markers(h, p); cm != 1 || ab != 0 {
			t.Fatalf("partition %d: %d commit, %d abort markers", p, cm, ab)
		}
	}
	if code := c.EndTxn("tx", pid, epoch, true); code != 0 {
		t.Fatalf("retried commit: %d", code)
	}
	// A restart loads the completed transaction as it was.
	c.Shutdown()
	c = startTxn(t, h, clk)
	if d := describe(c, "tx"); d.State != "CompleteCommit" || d.ProducerID != pid || d.ProducerEpoch != epoch {
		t.Fatalf("after restart: %+v", d)
	}
}

// A failed record write is answered COORDINATOR_NOT_AVAILABLE and leaves
// the transaction as it was.
func TestTxnFailedAppendRollsBack(t *testing.T) {
	f := newFixture(t)
	h, c, pid, epoch := f.h, f.c, f.pid, f.epoch
	var fail bool
	h.BeforeAppend = func(topic string, _ int32) error {
		if fail && topic == coordlog.TxnStateTopic {
			return errors.New("disk full")
		}
		return nil
	}
	fail = true
	if code := c.EndTxn("tx", pid, epoch, true); code != kerr.CoordinatorNotAvailable.Code {
		t.Fatalf("end with a failing log: %d", code)
	}
	if codes := c.AddPartitions("tx", pid, epoch, []coordlog.TopicPartition{{Topic: "t", Partition: 2}}, false); codes[0] != kerr.CoordinatorNotAvailable.Code {
		t.Fatalf("add with a failing log: %v", codes)
	}
	if r := c.InitProducerID("new", 60000, -1, -1); r.Code != kerr.CoordinatorNotAvailable.Code {
		t.Fatalf("init with a failing log: %+v", r)
	}
	if d := describe(c, "tx"); d.State != "Ongoing" || len(d.Topics) != 1 || len(d.Topics[0].Partitions) != 2 {
		t.Fatalf("after failed writes: %+v", d)
	}
	if d := describe(c, "new"); d.ErrorCode != kerr.TransactionalIDNotFound.Code {
		t.Fatalf("id whose first record failed: %+v", d)
	}
	fail = false
	if code := c.EndTxn("tx", pid, epoch, false); code != 0 {
		t.Fatalf("abort once the log works: %d", code)
	}
}

// A marker that cannot be written keeps the transaction in Prepare*; Tick
// retries it.
func TestTxnMarkerRetriedByTick(t *testing.T) {
	f := newFixture(t)
	h, clk, c, pid, epoch := f.h, f.clk, f.c, f.pid, f.epoch
	var fail bool
	h.BeforeAppend = func(topic string, p int32) error {
		if fail && topic == "t" && p == 1 {
			return errors.New("partition offline")
		}
		return nil
	}
	fail = true
	if code := c.EndTxn("tx", pid, epoch, false); code != 0 {
		t.Fatalf("end: %d", code)
	}
	if d := describe(c, "tx"); d.State != "PrepareAbort" || len(d.Topics) != 1 || d.Topics[0].Partitions[0] != 1 {
		t.Fatalf("with one marker missing: %+v", d)
	}
	if code := c.EndTxn("tx", pid, epoch, false); code != kerr.ConcurrentTransactions.Code {
		t.Fatalf("retried abort while markers are pending: %d", code)
	}
	fail = false
	c.Tick(clk.Advance(time.Second))
	if d := describe(c, "tx"); d.State != "CompleteAbort" {
		t.Fatalf("after the tick: %+v", d)
	}
	if _, ab := markers(h, 1); ab != 1 {
		t.Fatalf("abort markers in partition 1: %d", ab)
	}
}

// A timed-out transaction is aborted with a bumped epoch; the old
// producer is fenced.
func TestTxnTimeoutFences(t *testing.T) {
	f := newFixture(t)
	clk, c, pid, epoch := f.clk, f.c, f.pid, f.epoch
	c.Tick(clk.Advance(59 * time.Second))
	if d := describe(c, "tx"); d.State != "Ongoing" {
		t.Fatalf("before the timeout: %+v", d)
	}
	c.Tick(clk.Advance(2 * time.Second))
	if d := describe(c, "tx"); d.State != "CompleteAbort" || d.ProducerEpoch != epoch+1 {
		t.Fatalf("after the timeout: %+v", d)
	}
	if code := c.EndTxn("tx", pid, epoch, true); code != kerr.ProducerFenced.Code {
		t.Fatalf("end by the timed-out producer: %d", code)
	}
}

// An offset commit in flight keeps the transaction from ending.
func TestTxnOffsetCommitHoldsEnd(t *testing.T) {
	f := newFixture(t, coordlog.OffsetsTopic)
	clk, c, pid, epoch := f.clk, f.c, f.pid, f.epoch
	otp := coordlog.TopicPartition{Topic: coordlog.OffsetsTopic, Partition: 3}
	if _, code := c.BeginOffsetCommit("tx", pid, epoch, otp); code != kerr.InvalidTxnState.Code {
		t.Fatalf("offset commit before AddOffsetsToTxn: %d", code)
	}
	if codes := c.AddPartitions("tx", pid, epoch, []coordlog.TopicPartition{otp}, false); codes[0] != 0 {
		t.Fatalf("add offsets partition: %v", codes)
	}
	done, code := c.BeginOffsetCommit("tx", pid, epoch, otp)
	if code != 0 {
		t.Fatalf("begin offset commit: %d", code)
	}
	if code := c.EndTxn("tx", pid, epoch, true); code != kerr.ConcurrentTransactions.Code {
		t.Fatalf("end during an offset commit: %d", code)
	}
	c.Tick(clk.Advance(2 * time.Minute)) // timed out, but not aborted under the commit
	if d := describe(c, "tx"); d.State != "Ongoing" {
		t.Fatalf("timeout during an offset commit: %+v", d)
	}
	done()
	if code := c.EndTxn("tx", pid, epoch, true); code != 0 {
		t.Fatalf("end after the offset commit: %d", code)
	}
}

// TestTxnNoLockHeldDuringAppend: every write the coordinator makes (its
// records, the markers) runs with the coordinator's lock released. The
// hook calls back into the coordinator (a read, and a whole transition of
// another transactional id); if the lock were held the call would
// deadlock, which the test turns into a failure after a generous bound.
func TestTxnNoLockHeldDuringAppend(t *testing.T) {
	f := newFixture(t)
	h, c, pid, epoch := f.h, f.c, f.pid, f.epoch
	other := c.InitProducerID("other", 60000, -1, -1)
	var calls, reentered int
	var busyCode int16
	h.BeforeAppend = func(topic string, _ int32) error {
		calls++
		return coordlogtest.CallBack(t, topic, func() {
			describe(c, "tx")
			c.List(nil, nil, -1, nil)
			if reentered == 0 {
				reentered++
				// A transition of another id, with its own write.
				if r := c.InitProducerID("other", 60000, other.PID, other.Epoch); r.Code != 0 {
					t.Errorf("init of another id inside an append: %+v", r)
				}
				// The transaction being written is busy.
				busyCode = c.EndTxn("tx", pid, epoch, true)
			}
		})
	}
	if code := c.EndTxn("tx", pid, epoch, true); code != 0 {
		t.Fatalf("end: %d", code)
	}
	h.BeforeAppend = nil
	if calls < 4 { // Prepare record, two markers, Complete record
		t.Fatalf("%d writes seen", calls)
	}
	if busyCode != kerr.ConcurrentTransactions.Code {
		t.Fatalf("EndTxn during the transaction's own write: %d", busyCode)
	}
	if d := describe(c, "tx"); d.State != "CompleteCommit" {
		t.Fatalf("after commit: %+v", d)
	}
}

package txncoord

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/verbatim-kafka/verbatim/coordlog"
	"github.com/verbatim-kafka/verbatim/coordlog/coordlogtest"
)

// These tests move __transaction_state partitions between coordinators
// in PerPartition mode (cluster mode) over one shared host, as two
// brokers share the replicated partition.

func perPartition(h Host, clk coordlog.Clock) *Coordinator {
	return New(Config{Host: h, Clock: clk, PerPartition: true})
}

// idOnOtherPartition returns a transactional id whose partition is not
// that of id.
func idOnOtherPartition(c *Coordinator, id string) string {
	for i := 0; ; i++ {
		o := fmt.Sprint("other-", i)
		if c.PartitionFor(o) != c.PartitionFor(id) {
			return o
		}
	}
}

func TestTxnPartitionMoveKeepsState(t *testing.T) {
	clk := coordlogtest.NewClock(time.UnixMilli(1_700_000_000_000))
	h := newHost("t")
	a := perPartition(h, clk)
	t.Cleanup(a.Shutdown)
	if r := a.InitProducerID("tx", 60000, -1, -1); r.Code != kerr.NotCoordinator.Code {
		t.Fatalf("init before any election: %+v", r)
	}
	for p := range h.Count {
		a.LoadPartition(p, 0)()
	}
	pid, epoch := open(t, a, "tx")
	other := idOnOtherPartition(a, "tx")
	opid, oepoch := open(t, a, other)
	// other's commit markers cannot be written yet: it stays in
	// PrepareCommit, for the next coordinator to finish.
	h.BeforeAppend = func(topic string, p int32) error {
		if topic == "t" {
			return errors.New("leader unreachable")
		}
		return nil
	}
	if code := a.EndTxn(other, opid, oepoch, true); code != 0 {
		t.Fatalf("end: %d", code)
	}
	if d := describe(a, other); d.State != "PrepareCommit" {
		t.Fatalf("other before the move: %s", d.State)
	}
	h.BeforeAppend = nil

	b := perPartition(h, clk)
	t.Cleanup(b.Shutdown)
	for _, id := range []string{"tx", other} {
		a.UnloadPartition(a.PartitionFor(id))
		if d := describe(a, id); d.ErrorCode != kerr.NotCoordinator.Code {
			t.Fatalf("a describes %s after unload: %+v", id, d)
		}
	}
	if code := a.EndTxn("tx", pid, epoch, true); code != kerr.NotCoordinator.Code {
		t.Fatalf("end on a after unload: %d", code)
	}
	load := b.LoadPartition(b.PartitionFor("tx"), 1)
	if code := b.EndTxn("tx", pid, epoch, true); code != kerr.CoordinatorLoadInProgress.Code {
		t.Fatalf("end while loading: %d", code)
	}
	if codes := b.AddPartitions("tx", pid, epoch, []coordlog.TopicPartition{{Topic: "t", Partition: 0}}, true); codes[0] != kerr.CoordinatorLoadInProgress.Code {
		t.Fatalf("verify while loading: %v", codes)
	}
	if b.Owns(b.PartitionFor("tx")) {
		t.Fatal("owned before its load ran")
	}
	load()
	d := describe(b, "tx")
	if d.ErrorCode != 0 || d.State != "Ongoing" || d.ProducerID != pid || d.ProducerEpoch != epoch || len(d.Topics) != 1 || len(d.Topics[0].Partitions) != 2 {
		t.Fatalf("tx on b: %+v", d)
	}
	if codes := b.AddPartitions("tx", pid, epoch, []coordlog.TopicPartition{{Topic: "t", Partition: 1}}, true); codes[0] != 0 {
		t.Fatalf("verify on b: %v", codes)
	}
	if d := describe(b, other); d.ErrorCode != kerr.NotCoordinator.Code {
		t.Fatalf("b describes an id of a partition it was not given: %+v", d)
	}
	c0, _ := markers(h, 0)
	// other's partition: its load completes the interrupted commit.
	b.LoadPartition(b.PartitionFor(other), 1)()
	if d := describe(b, other); d.State != "CompleteCommit" {
		t.Fatalf("other after its load on b: %s", d.State)
	}
	if c1, _ := markers(h, 0); c1 != c0+1 {
		t.Fatalf("commit markers on t-0: %d then %d", c0, c1)
	}
	if code := b.EndTxn("tx", pid, epoch, true); code != 0 {
		t.Fatalf("end on b: %d", code)
	}
	if c2, _ := markers(h, 1); c2 != 2 {
		t.Fatalf("commit markers on t-1: %d, want 2", c2)
	}
}

func TestTxnLoadOvertakenByUnload(t *testing.T) {
	clk := coordlogtest.NewClock(time.UnixMilli(1_700_000_000_000))
	h := newHost("t")
	a := startTxn(t, h, clk)
	open(t, a, "tx")
	b := perPartition(h, clk)
	t.Cleanup(b.Shutdown)
	p := b.PartitionFor("tx")
	stale := b.LoadPartition(p, 1)
	b.UnloadPartition(p)
	stale()
	if d := describe(b, "tx"); d.ErrorCode != kerr.NotCoordinator.Code {
		t.Fatalf("a load overtaken by its unload installed the ids: %+v", d)
	}
	b.LoadPartition(p, 2)()
	if d := describe(b, "tx"); d.State != "Ongoing" {
		t.Fatalf("after the load: %+v", d)
	}
}

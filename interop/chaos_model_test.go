package interop

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/verbatim-kafka/verbatim/kbatch"
	"github.com/verbatim-kafka/verbatim/kbatch/kbatchtest"
)

// The fault test's checkers against histories and logs made up to break
// each rule, so that a passing TestChaos means the rules held (no peers,
// no cluster).

// chaosRecorder is a testing.TB whose Errorf is recorded, not reported.
type chaosRecorder struct {
	testing.TB
	mu   sync.Mutex
	errs []string
}

func (r *chaosRecorder) Errorf(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.errs = append(r.errs, fmt.Sprintf(format, args...))
}

// expect fails t unless exactly the errors containing want were recorded
// (none when want is empty), and resets the recorder.
func (r *chaosRecorder) expect(t *testing.T, what string, want string) {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	switch {
	case want == "" && len(r.errs) > 0:
		t.Errorf("%s: unexpected errors %q", what, r.errs)
	case want != "" && (len(r.errs) == 0 || !strings.Contains(strings.Join(r.errs, "\n"), want)):
		t.Errorf("%s: errors %q, want one containing %q", what, r.errs, want)
	}
	r.errs = nil
}

func chaosOp(kind chaosOpKind, tp string, call, ret int64, end int64, recs ...chaosRec) porcupine.Operation {
	return porcupine.Operation{Input: chaosInput{kind: kind, tp: tp, recs: recs, end: end}, Call: call, Return: ret}
}

func TestChaosHistoryModel(t *testing.T) {
	rec := &chaosRecorder{TB: t}
	logs := map[string]map[int32]chaosLog{"x": {0: {0: "a", 1: "b", 2: "c"}}}
	good := []porcupine.Operation{
		chaosOp(chaosOpEnd, "x-0", 0, 10, 0),
		chaosOp(chaosOpAck, "x-0", 5, 5, 0, chaosRec{0, "a"}, chaosRec{1, "b"}),
		// Concurrent with the ack: may be linearized before it.
		chaosOp(chaosOpEnd, "x-0", 4, 8, 0),
		chaosOp(chaosOpRead, "x-0", 12, 12, 0, chaosRec{2, "c"}),
		chaosOp(chaosOpEnd, "x-0", 13, 14, 3),
	}
	if n := checkHistory(rec, time.Now(), good, logs); n != len(good) {
		t.Errorf("checked %d operations of %d", n, len(good))
	}
	rec.expect(t, "a linearizable history", "")

	// An end answered after an acknowledgement returned is behind it.
	back := append(append([]porcupine.Operation{}, good[:2]...), chaosOp(chaosOpEnd, "x-0", 6, 7, 1))
	checkHistory(rec, time.Now(), back, logs)
	rec.expect(t, "an end behind an earlier acknowledgement", "not linearizable")

	// A consumed record the log does not hold (truncated, replaced).
	checkHistory(rec, time.Now(), []porcupine.Operation{chaosOp(chaosOpRead, "x-0", 1, 1, 0, chaosRec{1, "z"})}, logs)
	rec.expect(t, "a read of a replaced record", "lost or replaced")

	// An acknowledged record beyond the log.
	checkHistory(rec, time.Now(), []porcupine.Operation{chaosOp(chaosOpAck, "x-0", 1, 1, 0, chaosRec{3, "d"})}, logs)
	rec.expect(t, "a lost acknowledged record", "lost or replaced")
}

func TestChaosTxnAndIdempotentChecks(t *testing.T) {
	rec := &chaosRecorder{TB: t}
	log := map[int32]chaosLog{0: {0: "t1-0", 1: "t2-0", 3: "t3-0"}, 1: {0: "t1-1", 1: "t2-1", 3: "t3-1"}}
	committed := map[int32]chaosLog{0: {0: "t1-0", 3: "t3-0"}, 1: {0: "t1-1", 3: "t3-1"}}
	txns := []chaosTxn{
		{values: []string{"t1-0", "t1-1"}, outcome: "commit"},
		{values: []string{"t2-0", "t2-1"}, outcome: "abort"},
		{values: []string{"t3-0", "t3-1"}, outcome: "unknown"},
	}
	if s := checkTxns(rec, txns, log, committed); s != "1 committed, 1 aborted, 1 unknown" {
		t.Errorf("summary %q", s)
	}
	rec.expect(t, "whole transactions", "")
	partial := map[int32]chaosLog{0: {0: "t1-0", 1: "t2-0"}, 1: {3: "t3-1"}}
	checkTxns(rec, txns, log, partial)
	rec.expect(t, "a committed transaction half visible", "committed transaction 0: 1 of its 2")
	checkTxns(rec, txns, log, partial)
	rec.expect(t, "an aborted transaction visible", "aborted transaction 1")
	checkTxns(rec, txns, log, partial)
	rec.expect(t, "an unknown one half visible", "want all or none")

	idem := map[int32]chaosLog{0: {0: "i0-0000001", 1: "i1-0000001", 2: "i0-0000002"}, 1: {0: "i0-0000003"}}
	if n := checkIdempotent(rec, idem, map[string]bool{"i0-0000003": true}); n != 1 {
		t.Errorf("%d unknown records counted, want 1", n)
	}
	rec.expect(t, "an idempotent log", "")
	idem[1][1] = "i0-0000001"
	checkIdempotent(rec, idem, nil)
	rec.expect(t, "a duplicate", "a duplicate from an idempotent producer")
	delete(idem[1], 1)
	idem[0][3] = "i0-0000000"
	checkIdempotent(rec, idem, nil)
	rec.expect(t, "a reordering", "reordered")
}

func TestChaosConsumerCheck(t *testing.T) {
	rec := &chaosRecorder{TB: t}
	log := map[int32]chaosLog{0: {0: "a", 1: "b", 2: "c", 3: "d"}}
	seen := func(gens []int64, offs ...int64) *chaosConsumer {
		c := &chaosConsumer{topic: "x", seen: map[int32][]chaosSeen{}}
		for i, o := range offs {
			c.seen[0] = append(c.seen[0], chaosSeen{gens[i], chaosRec{o, log[0][o]}})
		}
		return c
	}
	checkConsumer(rec, seen([]int64{1, 1, 2, 2, 2}, 0, 1, 1, 2, 3), log, nil)
	rec.expect(t, "a re-read after an assignment change", "")
	checkConsumer(rec, seen([]int64{1, 1, 1}, 0, 1, 3), log, nil)
	rec.expect(t, "a gap within an assignment", "records skipped")
	checkConsumer(rec, seen([]int64{1, 1, 1}, 0, 2, 1), log, nil)
	rec.expect(t, "going back within an assignment", "offset 1 after 2")
	c := seen([]int64{1, 1}, 0, 1)
	c.seen[0][1].val = "x"
	checkConsumer(rec, c, log, nil)
	rec.expect(t, "a value the log does not hold", "the log holds")

	committed := map[int32]chaosLog{0: {0: "a", 2: "c", 3: "d"}}
	cc := seen([]int64{1, 1, 1}, 0, 2, 3)
	cc.committed = true
	checkConsumer(rec, cc, log, committed)
	rec.expect(t, "read_committed skipping an aborted record", "")
	cc = seen([]int64{1, 1}, 0, 3)
	cc.committed = true
	checkConsumer(rec, cc, log, committed)
	rec.expect(t, "read_committed skipping a committed record", "skipped committed")
}

// writeChaosSegment writes batches (base offset, record count, leader
// epoch, value) as one segment of node's replica of dir.
func writeChaosSegment(t *testing.T, nd VNode, dir string, batches ...[3]int64) {
	t.Helper()
	var seg []byte
	for _, b := range batches {
		recs := make([]kbatch.Record, b[1])
		for i := range recs {
			recs[i] = kbatch.Record{OffsetDelta: int32(i), Value: []byte(fmt.Sprintf("v%d-%d", b[0], i))}
		}
		kb := kbatch.NewBatch(1000, recs...)
		kb.BaseOffset, kb.LeaderEpoch = b[0], int32(b[2])
		enc := kbatchtest.Encode(t, kb)
		seg = append(seg, enc...)
	}
	p := filepath.Join(nd.Dir, "data", dir)
	if err := os.MkdirAll(p, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(p, fmt.Sprintf("%020d.log", batches[0][0])), seg, 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestChaosReplicaLogCheck(t *testing.T) {
	rec := &chaosRecorder{TB: t}
	cluster := func() *VCluster {
		c := &VCluster{}
		for i := range 3 {
			nd := VNode{ID: int32(i + 1), Dir: t.TempDir()}
			if err := os.MkdirAll(filepath.Join(nd.Dir, "data"), 0o755); err != nil {
				t.Fatal(err)
			}
			c.Nodes = append(c.Nodes, nd)
		}
		return c
	}
	c := cluster()
	for _, nd := range c.Nodes {
		writeChaosSegment(t, nd, "x-0", [3]int64{0, 5, 0}, [3]int64{5, 3, 2})
	}
	// A follower that has not fetched the last batch yet.
	writeChaosSegment(t, c.Nodes[2], "x-1", [3]int64{0, 2, 1})
	writeChaosSegment(t, c.Nodes[0], "x-1", [3]int64{0, 2, 1}, [3]int64{2, 2, 1})
	if n := checkReplicaLogs(rec, c); n == 0 {
		t.Errorf("no batches compared")
	}
	rec.expect(t, "replicas holding the same batches", "")

	// Two leaders in one epoch: different batches at the same offsets.
	c = cluster()
	writeChaosSegment(t, c.Nodes[0], "x-0", [3]int64{0, 5, 0}, [3]int64{5, 3, 1})
	writeChaosSegment(t, c.Nodes[1], "x-0", [3]int64{0, 5, 0}, [3]int64{5, 2, 1})
	checkReplicaLogs(rec, c)
	rec.expect(t, "different batches at one offset", "two leaders wrote the same offsets")

	// Leader epochs going back along a log.
	c = cluster()
	writeChaosSegment(t, c.Nodes[0], "x-0", [3]int64{0, 5, 3}, [3]int64{5, 3, 2})
	checkReplicaLogs(rec, c)
	rec.expect(t, "a decreasing leader epoch", "at leader epoch 2 follows")
}

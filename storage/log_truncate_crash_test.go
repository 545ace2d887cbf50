package storage

import (
	"fmt"
	"math/rand"
	"testing"

	"github.com/verbatim-kafka/verbatim/kbatch"
	"github.com/verbatim-kafka/verbatim/kbatch/kbatchtest"
)

// Truncation is all or nothing across a crash: cut after every file
// operation of a Truncate, crashed in every mode, the reopened log is
// either the old one or the truncated one, and its epoch cache, producer
// state, last stable offset and aborted transactions are those of the
// matching reference.

var crashTruncCfg = Config{SegmentBytes: 300, IndexIntervalBytes: 64}

// truncLog writes several segments over three leader epochs with an
// aborted and an open transaction past the cut point, then syncs.
func truncLog(t testing.TB, fs *MemFS) *Log {
	t.Helper()
	l := openLog(t, fs, crashTruncCfg)
	for i := 0; i < 24; i++ {
		off := l.LogEndOffset()
		b := kvBatchSpec(off, 1000+off, fmt.Sprintf("k%d=%d", i%5, off))
		b.LeaderEpoch = int32(i / 8)
		appendAll(t, l, kbatchtest.Encode(t, b))
		if i == 14 {
			off = l.LogEndOffset()
			appendAll(t, l, txnData(t, off, 7, 0, "k1=aborted"), markerBatch(t, off+1, 7, 0, kbatch.ControlAbort))
		}
		if i == 18 {
			appendAll(t, l, txnData(t, l.LogEndOffset(), 8, 0, "k2=open"))
		}
	}
	if err := l.Flush(); err != nil {
		t.Fatal(err)
	}
	return l
}

// truncView is what must match: records, log bounds, epochs, producers,
// LSO and the aborted transactions.
func truncView(t testing.TB, l *Log) string {
	t.Helper()
	ab, err := l.AbortedTransactions(l.LogStartOffset(), l.LogEndOffset(), nil)
	if err != nil {
		t.Fatal(err)
	}
	var pids []int64
	for _, p := range l.Producers() {
		pids = append(pids, p.ProducerID, p.CurrentTxnFirstOffset)
	}
	return fmt.Sprintf("start=%d end=%d lso=%d epochs=%v producers=%v aborted=%v records=%s",
		l.LogStartOffset(), l.LogEndOffset(), l.LastStableOffset(), l.EpochCache().Entries(), pids, ab, recString(logRecords(t, l)))
}

func TestTruncateCrashAtEveryStep(t *testing.T) {
	// The references are the logs as reopened: a reopen expires the
	// idle producers of 1970's timestamps, as Kafka's load does.
	reopened := func(fs *MemFS) string {
		l := openLog(t, fs, crashTruncCfg)
		defer l.Close()
		return truncView(t, l)
	}
	ref := NewMemFS()
	l := truncLog(t, ref)
	end := l.LogEndOffset()
	l.Close()
	before := reopened(ref)
	l = openLog(t, ref, crashTruncCfg)
	to := end - 12 // inside a segment, below both transactions, in the last epoch
	start := ref.Ops()
	if err := l.Truncate(to); err != nil {
		t.Fatal(err)
	}
	ops := ref.Ops() - start
	l.Close()
	after := reopened(ref)
	if before == after || ops < 4 {
		t.Fatalf("the truncation must change the log over several operations (%d)", ops)
	}
	rng := rand.New(rand.NewSource(3))
	sawPartial := false
	for cut := 1; cut <= ops+1; cut++ {
		for _, mode := range CrashModes {
			fs := NewMemFS()
			l := truncLog(t, fs)
			fs.CutAfter(cut)
			terr := l.Truncate(to)
			crashed := fs.Crash(mode, rng)
			l.Close()
			l2, err := Open(crashed, "data/t-0", crashTruncCfg)
			if err != nil {
				t.Fatalf("cut %d/%d %v: open: %v", cut, ops, mode, err)
			}
			got := truncView(t, l2)
			if got != before && got != after {
				t.Fatalf("cut %d/%d %v: a state truncation cannot leave:\n got %s\nbefore %s\n after %s", cut, ops, mode, got, before, after)
			}
			sawPartial = sawPartial || (terr != nil && got == after)
			// The record is gone: appending and reopening keeps the
			// appended batch.
			off := l2.LogEndOffset()
			appendAll(t, l2, kvBatch(t, off, 5000, "z=1"))
			if err := l2.Flush(); err != nil {
				t.Fatal(err)
			}
			l2.Close()
			l3, err := Open(crashed, "data/t-0", crashTruncCfg)
			if err != nil {
				t.Fatal(err)
			}
			if l3.LogEndOffset() != off+1 {
				t.Fatalf("cut %d %v: reopened log end %d, want %d (a completed truncation ran again)", cut, mode, l3.LogEndOffset(), off+1)
			}
			l3.Close()
		}
	}
	if !sawPartial {
		t.Fatal("no interrupted truncation was completed by Open: the test does not exercise recovery")
	}
}

package storage

import (
	"errors"
	"slices"
	"testing"

	"github.com/verbatim-kafka/verbatim/kbatch"
	"github.com/verbatim-kafka/verbatim/kbatch/kbatchtest"
)

func pidBatch(t testing.TB, base int64, pid int64, epoch int16, seq int32, n int, txn bool) []byte {
	t.Helper()
	recs := make([]kbatch.Record, n)
	for i := range recs {
		recs[i] = kbatch.Record{OffsetDelta: int32(i), Value: []byte("v")}
	}
	b := kbatch.NewBatch(1000, recs...)
	b.BaseOffset = base
	b.LeaderEpoch = 1
	b.ProducerID, b.ProducerEpoch, b.BaseSequence = pid, epoch, seq
	if txn {
		b.Attributes = kbatch.TransactionalBit
	}
	return kbatchtest.Encode(t, b)
}

func markerBatch(t testing.TB, base int64, pid int64, epoch int16, typ int16) []byte {
	t.Helper()
	var value []byte
	if typ == kbatch.ControlMirrorPidReset {
		value = kbatch.MirrorPidResetValue("src")
	} else {
		value = kbatch.EndTxnMarkerValue(3)
	}
	b := kbatch.NewBatch(1000, kbatch.Record{Key: kbatch.ControlKey(typ), Value: value})
	b.BaseOffset = base
	b.LeaderEpoch = 1
	b.ProducerID, b.ProducerEpoch = pid, epoch
	b.Attributes = kbatch.ControlBit | kbatch.TransactionalBit
	return kbatchtest.Encode(t, b)
}

func TestLogLeaderProducerChecks(t *testing.T) {
	fs := NewMemFS()
	l := openLog(t, fs, Config{})
	defer l.Close()
	if _, err := l.AppendLeader(pidBatch(t, 0, 5, 0, 0, 3, false), 1, 1); err != nil {
		t.Fatal(err)
	}
	if _, err := l.AppendLeader(pidBatch(t, 0, 5, 0, 3, 2, false), 1, 1); err != nil {
		t.Fatal(err)
	}
	// A retry of the first batch is a duplicate with its original offsets.
	res, err := l.AppendLeader(pidBatch(t, 0, 5, 0, 0, 3, false), 1, 1)
	if err != nil || !res.Duplicate || res.FirstOffset != 0 || res.LastOffset != 2 {
		t.Fatalf("duplicate: %+v %v", res, err)
	}
	if l.LogEndOffset() != 5 {
		t.Fatalf("duplicate was written: LEO %d", l.LogEndOffset())
	}
	// A gap in sequences.
	b := pidBatch(t, 0, 5, 0, 9, 1, false)
	before := string(b)
	if _, err := l.AppendLeader(b, 1, 1); !errors.Is(err, ErrOutOfOrderSequence) {
		t.Fatalf("out of order: %v", err)
	}
	if string(b) != before {
		t.Fatal("refused batch was modified")
	}
	// An older epoch is fenced.
	if _, err := l.AppendLeader(pidBatch(t, 0, 5, 0, 5, 1, false), 1, 1); err != nil {
		t.Fatal(err)
	}
	if _, err := l.AppendLeader(pidBatch(t, 0, 5, 1, 0, 1, false), 1, 1); err != nil {
		t.Fatal(err)
	}
	if _, err := l.AppendLeader(pidBatch(t, 0, 5, 0, 6, 1, false), 1, 1); !errors.Is(err, ErrInvalidProducerEpoch) {
		t.Fatalf("old epoch: %v", err)
	}
	if l.LogEndOffset() != 7 {
		t.Fatalf("LEO %d", l.LogEndOffset())
	}
}

func TestLogVerbatimNeverDropsProducerDuplicates(t *testing.T) {
	fs := NewMemFS()
	l := openLog(t, fs, Config{})
	defer l.Close()
	// Same producer, same sequences twice (a source that had a duplicate,
	// or sequence gaps from compaction): both stored.
	if _, err := l.AppendVerbatim(pidBatch(t, 0, 5, 0, 0, 3, false)); err != nil {
		t.Fatal(err)
	}
	res, err := l.AppendVerbatim(pidBatch(t, 10, 5, 0, 0, 3, false))
	if err != nil || res.Duplicate || res.AlreadyPresent {
		t.Fatalf("%+v %v", res, err)
	}
	if _, err := l.AppendVerbatim(pidBatch(t, 20, 5, 0, 50, 1, false)); err != nil {
		t.Fatalf("sequence gap refused: %v", err)
	}
	if _, err := l.AppendVerbatim(pidBatch(t, 21, 5, 0, 51, 1, false)); err != nil {
		t.Fatal(err)
	}
	if got := readAllBatches(t, l); len(got) != 4 {
		t.Fatalf("%d batches", len(got))
	}
}

func TestLogTransactionsLSOAndAbortedIndex(t *testing.T) {
	fs := NewMemFS()
	l := openLog(t, fs, Config{SegmentBytes: 400})
	set := slices.Concat(
		pidBatch(t, 0, 7, 0, 0, 3, true), // txn of 7: 0..2
		pidBatch(t, 3, 8, 0, 0, 2, true), // txn of 8: 3..4
	)
	if _, err := l.AppendVerbatim(set); err != nil {
		t.Fatal(err)
	}
	if lso := l.LastStableOffset(); lso != 0 {
		t.Fatalf("LSO %d with open transactions", lso)
	}
	if _, err := l.AppendVerbatim(markerBatch(t, 5, 7, 0, kbatch.ControlAbort)); err != nil {
		t.Fatal(err)
	}
	if lso := l.LastStableOffset(); lso != 3 {
		t.Fatalf("LSO %d after abort of 7", lso)
	}
	if _, err := l.AppendVerbatim(markerBatch(t, 6, 8, 0, kbatch.ControlCommit)); err != nil {
		t.Fatal(err)
	}
	if lso := l.LastStableOffset(); lso != 7 || l.HighWatermark() != 7 {
		t.Fatalf("LSO %d HW %d after commit of 8", lso, l.HighWatermark())
	}
	check := func(l *Log) {
		t.Helper()
		got, err := l.AbortedTransactions(0, 7, nil)
		if err != nil {
			t.Fatal(err)
		}
		want := AbortedTxn{ProducerID: 7, FirstOffset: 0, LastOffset: 5, LastStableOffset: 3}
		if len(got) != 1 || got[0] != want {
			t.Fatalf("aborted: %+v", got)
		}
		if got, _ := l.AbortedTransactions(6, 7, nil); len(got) != 0 {
			t.Fatalf("aborted after the marker: %+v", got)
		}
	}
	check(l)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l = openLog(t, fs, Config{SegmentBytes: 400})
	check(l)
	// Unclean restart: the transaction index is rebuilt by replay.
	l.Close()
	if err := fs.Remove("data/t-0/" + cleanShutdownFile); err != nil {
		t.Fatal(err)
	}
	l = openLog(t, fs, Config{SegmentBytes: 400})
	defer l.Close()
	check(l)
	if lso := l.LastStableOffset(); lso != 7 {
		t.Fatalf("LSO %d after recovery", lso)
	}
}

func TestLogMirrorPidResetClearsProducerState(t *testing.T) {
	for _, clean := range []bool{true, false} {
		fs := NewMemFS()
		l := openLog(t, fs, Config{})
		// A mirrored idempotent producer 9 and an open transaction of 11.
		if _, err := l.AppendVerbatim(slices.Concat(pidBatch(t, 0, 9, 0, 0, 2, false), pidBatch(t, 2, 11, 0, 0, 1, true))); err != nil {
			t.Fatal(err)
		}
		if _, err := l.AppendVerbatim(markerBatch(t, 3, 11, 0, kbatch.ControlAbort)); err != nil {
			t.Fatal(err)
		}
		if _, err := l.AppendVerbatim(markerBatch(t, 4, -1, -1, kbatch.ControlMirrorPidReset)); err != nil {
			t.Fatal(err)
		}
		if n := len(l.Producers()); n != 0 {
			t.Fatalf("%d producers after the barrier", n)
		}
		l.Close()
		if !clean {
			fs.Remove("data/t-0/" + cleanShutdownFile)
			// Drop snapshots so recovery replays the barrier itself.
			names, _ := fs.ReadDir("data/t-0")
			for _, n := range names {
				if _, ok := parseSegmentFileName(n, ".snapshot"); ok {
					fs.Remove("data/t-0/" + n)
				}
			}
		}
		l = openLog(t, fs, Config{})
		if n := len(l.Producers()); n != 0 {
			t.Fatalf("clean=%v: %d producers after recovery", clean, n)
		}
		// A new local producer reusing id 9 from sequence 0 is appended,
		// not acknowledged as a duplicate of the mirrored batch.
		res, err := l.AppendLeader(pidBatch(t, 0, 9, 0, 0, 2, false), 2, 1)
		if err != nil || res.Duplicate || res.FirstOffset != 5 {
			t.Fatalf("clean=%v: local producer after barrier: %+v %v", clean, res, err)
		}
		l.Close()
	}
}

// A marker whose transaction start was trimmed by DeleteRecords still
// completes it and feeds the transaction index.
func TestLogAbortMarkerAfterTransactionStartTrimmed(t *testing.T) {
	fs := NewMemFS()
	l := openLog(t, fs, Config{SegmentBytes: 200})
	defer l.Close()
	if _, err := l.AppendVerbatim(pidBatch(t, 0, 7, 0, 0, 2, true)); err != nil {
		t.Fatal(err)
	}
	for i := int64(2); i < 8; i++ {
		if _, err := l.AppendVerbatim(testBatch(t, i, 1, 1, 1, 10)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := l.DeleteRecords(5); err != nil {
		t.Fatal(err)
	}
	if l.LastStableOffset() != 0 {
		t.Fatalf("LSO %d with the transaction open", l.LastStableOffset())
	}
	if _, err := l.AppendVerbatim(markerBatch(t, 8, 7, 0, kbatch.ControlAbort)); err != nil {
		t.Fatal(err)
	}
	got, err := l.AbortedTransactions(5, 9, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].FirstOffset != 0 || got[0].LastOffset != 8 {
		t.Fatalf("aborted %+v", got)
	}
	if l.LastStableOffset() != 9 {
		t.Fatalf("LSO %d", l.LastStableOffset())
	}
}

package storage

import (
	"slices"
	"strings"
	"testing"

	"github.com/verbatim-kafka/verbatim/kbatch"
	"github.com/verbatim-kafka/verbatim/kbatch/kbatchtest"
)

// The cleaner's transaction rules: aborted data, markers and their delete
// horizons, the producers' last batches.

func txnData(t testing.TB, base, pid int64, seq int32, kvs ...string) []byte {
	b := kvBatchSpec(base, 100, kvs...)
	b.ProducerID, b.ProducerEpoch, b.BaseSequence = pid, 0, seq
	b.Attributes = kbatch.TransactionalBit
	return kbatchtest.Encode(t, b)
}

func TestCleanerTransactions(t *testing.T) {
	txn := [][]byte{
		txnData(t, 0, 7, 0, "a=aborted", "b=aborted"),
		kvBatch(t, 2, 100, "a=plain"),
		markerBatch(t, 3, 7, 0, kbatch.ControlAbort),
		txnData(t, 4, 8, 0, "c=committed"),
		markerBatch(t, 5, 8, 0, kbatch.ControlCommit),
		txnData(t, 6, 7, 2, "d=aborted2"), // pid 7's last data batch
		markerBatch(t, 7, 7, 0, kbatch.ControlAbort),
	}
	// One segment (and so one cleaning group) holds the transactions.
	l := openLog(t, NewMemFS(), Config{SegmentBytes: int64(len(slices.Concat(txn...))), IndexIntervalBytes: 1})
	defer l.Close()
	appendAll(t, l, txn...)
	appendAll(t, l,
		kvBatch(t, 8, 100, "e=1", "f=1", "g=1"),
		kvBatch(t, 11, 100, "h=1", "i=1", "j=1"),
	)
	c := NewCleaner(CleanerConfig{})
	cc := CompactConfig{DeleteRetentionMs: 1000}
	mustClean(t, c, l, cc, 5000)
	s := recString(logRecords(t, l))
	// Aborted data goes; both markers of aborted transactions with data
	// seen stay; the commit marker stays (its data was seen).
	for _, want := range []string{"2:a=plain", "3:ctl0", "4:c=committed", "5:ctl1", "7:ctl0"} {
		if !strings.Contains(s, want) {
			t.Fatalf("first clean lost %s: %s", want, s)
		}
	}
	if strings.Contains(s, "aborted") {
		t.Fatalf("aborted data kept: %s", s)
	}
	// pid 7's last data batch survives, empty, with its offsets.
	var empty []byte
	for _, b := range readAllBatches(t, l) {
		if kbatch.BaseOffset(b) == 6 {
			empty = b
		}
	}
	if empty == nil {
		t.Fatal("the producer's last batch was removed")
	}
	if h, _ := kbatch.ParseHeader(empty); h.RecordCount != 0 || h.ProducerID != 7 || h.LastOffset() != 6 {
		t.Fatalf("retained batch: %+v", h)
	}
	// The aborted transactions whose markers stay are still indexed.
	ab, err := l.AbortedTransactions(0, 8, nil)
	if err != nil || len(ab) != 2 {
		t.Fatalf("aborted transactions after clean: %+v %v", ab, err)
	}
	// Second clean: no data left of the transactions: the markers get a
	// horizon; the commit marker's data (c) is still there, so it stays.
	appendAll(t, l, kvBatch(t, 14, 100, "k=1", "l=1", "m=1"), kvBatch(t, 17, 100, "n=1", "o=1", "p=1"))
	rollDirty(t, l)
	mustClean(t, c, l, cc, 5000)
	for _, b := range readAllBatches(t, l) {
		if kbatch.BaseOffset(b) == 3 {
			if h, _ := kbatch.ParseHeader(b); !h.HasDeleteHorizon() || h.BaseTimestamp != 6000 {
				t.Fatalf("abort marker without data: horizon %v %d", h.HasDeleteHorizon(), h.BaseTimestamp)
			}
		}
	}
	// Third clean past the horizon: the first abort marker goes; the last
	// marker of pid 7 is not its last batch (6 is), so it goes too; the
	// commit marker stays.
	rollDirty(t, l)
	mustClean(t, c, l, cc, 6000)
	s = recString(logRecords(t, l))
	if strings.Contains(s, "3:ctl0") || !strings.Contains(s, "5:ctl1") || !strings.Contains(s, "4:c=committed") {
		t.Fatalf("third clean: %s", s)
	}
	if p, ok := l.producer.ps.Producer(7); !ok || p.Epoch != 0 {
		t.Fatalf("producer state lost: %+v %v", p, ok)
	}
}

// TestCleanerKeepsCommitMarkerOfDataInEarlierGroup: a transaction's data
// in one segment group and its COMMIT marker in the next. Kafka's
// per-group rule would let the marker go once its horizon passed (no batch
// of the transaction in the marker's group) while the data stays; the
// cleaner keeps it as long as the data remains, so a replay of the log
// (producer snapshots lost) finds the transaction closed and the last
// stable offset at the log end.
func TestCleanerKeepsCommitMarkerOfDataInEarlierGroup(t *testing.T) {
	fs := NewMemFS()
	segA := slices.Concat(txnData(t, 0, 9, 0, "c=committed"), kvBatch(t, 1, 100, "x=1"))
	cfg := Config{SegmentBytes: int64(len(segA)), IndexIntervalBytes: 1}
	l := openLog(t, fs, cfg)
	appendAll(t, l, txnData(t, 0, 9, 0, "c=committed"), kvBatch(t, 1, 100, "x=1"))
	appendAll(t, l, markerBatch(t, 2, 9, 0, kbatch.ControlCommit)) // rolls: the marker opens segment 2
	if l.NumSegments() != 2 {
		t.Fatalf("%d segments, want the marker in a second one", l.NumSegments())
	}
	rollDirty(t, l)
	c := NewCleaner(CleanerConfig{})
	cc := CompactConfig{DeleteRetentionMs: 10}
	for i, now := range []int64{1000, 2000, 3000} {
		st := mustClean(t, c, l, cc, now)
		if st.Groups < 2 {
			t.Fatalf("clean %d: %d groups, want the data and the marker apart", i, st.Groups)
		}
		s := recString(logRecords(t, l))
		if !strings.Contains(s, "0:c=committed") || !strings.Contains(s, "2:ctl1") {
			t.Fatalf("clean %d at %d: %s", i, now, s)
		}
		rollDirty(t, l)
	}
	hw := l.LogEndOffset()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	names, err := fs.ReadDir("data/t-0")
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range names {
		if strings.HasSuffix(n, SnapshotSuffix) {
			if err := fs.Remove("data/t-0/" + n); err != nil {
				t.Fatal(err)
			}
		}
	}
	l = openLog(t, fs, cfg)
	defer l.Close()
	if lso := l.LastStableOffset(); lso != hw {
		t.Fatalf("after a replay without snapshots the LSO is %d, want the log end %d", lso, hw)
	}
}

package storage

import (
	"context"
	"encoding/binary"
	"slices"
	"testing"

	"github.com/verbatim-kafka/verbatim/kbatch"
)

// expectedIndexes recomputes Kafka's index entries for a list of batches
// written into one segment at base, following LogSegment.recover: an offset
// entry (batch last offset, batch position) before a batch once more than
// interval bytes were written since the last entry, a time entry at the same
// time when the max timestamp so far grew, and a final time entry.
func expectedIndexes(base int64, batches [][]byte, interval int) (idx, tidx []byte) {
	pos, lastEntry := 0, 0
	maxTs, maxTsOff := int64(-1), base
	lastTs := int64(-1)
	addTime := func() {
		if maxTs > lastTs {
			var e [12]byte
			binary.BigEndian.PutUint64(e[:], uint64(maxTs))
			binary.BigEndian.PutUint32(e[8:], uint32(maxTsOff-base))
			tidx = append(tidx, e[:]...)
			lastTs = maxTs
		}
	}
	for _, b := range batches {
		last := kbatch.BaseOffset(b) + int64(kbatch.LastOffsetDelta(b))
		if ts := kbatch.MaxTimestamp(b); ts > maxTs {
			maxTs, maxTsOff = ts, last
		}
		if pos-lastEntry > interval {
			var e [8]byte
			binary.BigEndian.PutUint32(e[:], uint32(last-base))
			binary.BigEndian.PutUint32(e[4:], uint32(pos))
			idx = append(idx, e[:]...)
			addTime()
			lastEntry = pos
		}
		pos += len(b)
	}
	addTime()
	return idx, tidx
}

func TestSegmentIndexFilesMatchKafkaRules(t *testing.T) {
	fs := NewMemFS()
	l := openLog(t, fs, Config{IndexIntervalBytes: 4096})
	var batches [][]byte
	ts := []int64{100, 90, 150, 150, 120, 300, 200, 310}
	for i := 0; i < 40; i++ {
		b := testBatch(t, 0, 1, ts[i%len(ts)]+int64(i/len(ts))*1000, 1+i%5, 300+i*37)
		if _, err := l.AppendLeader(b, 1, 1); err != nil {
			t.Fatal(err)
		}
		batches = append(batches, b)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	wantIdx, wantTidx := expectedIndexes(0, batches, 4096)
	gotIdx, err := readAll(fs, "data/t-0/"+SegmentFileName(0, ".index"))
	if err != nil {
		t.Fatal(err)
	}
	gotTidx, err := readAll(fs, "data/t-0/"+SegmentFileName(0, ".timeindex"))
	if err != nil {
		t.Fatal(err)
	}
	if string(gotIdx) != string(wantIdx) {
		t.Fatalf(".index: got %x\nwant %x", gotIdx, wantIdx)
	}
	if string(gotTidx) != string(wantTidx) {
		t.Fatalf(".timeindex: got %x\nwant %x", gotTidx, wantTidx)
	}
	if len(wantIdx) < 3*8 {
		t.Fatalf("test too small: %d index entries", len(wantIdx)/8)
	}
	// Every offset index entry points at a batch whose last offset is the
	// entry's offset (what DumpLogSegments verifies).
	logb, _ := readAll(fs, "data/t-0/"+SegmentFileName(0, ".log"))
	for i := 0; i < len(gotIdx); i += 8 {
		rel := int64(binary.BigEndian.Uint32(gotIdx[i:]))
		pos := binary.BigEndian.Uint32(gotIdx[i+4:])
		b := logb[pos:]
		if last := kbatch.BaseOffset(b) + int64(kbatch.LastOffsetDelta(b)); last != rel {
			t.Fatalf("entry %d: offset %d but batch at %d ends at %d", i/8, rel, pos, last)
		}
	}
	// After an unclean restart the rebuilt indexes are identical.
	if err := fs.Remove("data/t-0/" + cleanShutdownFile); err != nil {
		t.Fatal(err)
	}
	l2 := openLog(t, fs, Config{IndexIntervalBytes: 4096})
	if err := l2.Close(); err != nil {
		t.Fatal(err)
	}
	gotIdx2, _ := readAll(fs, "data/t-0/"+SegmentFileName(0, ".index"))
	gotTidx2, _ := readAll(fs, "data/t-0/"+SegmentFileName(0, ".timeindex"))
	if string(gotIdx2) != string(wantIdx) || string(gotTidx2) != string(wantTidx) {
		t.Fatalf("rebuilt indexes differ")
	}
}

func TestSegmentRollBySize(t *testing.T) {
	fs := NewMemFS()
	l := openLog(t, fs, Config{SegmentBytes: 3000})
	defer l.Close()
	var bases []int64
	for i := 0; i < 10; i++ {
		b := testBatch(t, 0, 1, 100, 2, 400)
		res, err := l.AppendLeader(b, 1, 1)
		if err != nil {
			t.Fatal(err)
		}
		bases = append(bases, res.FirstOffset)
	}
	names, _ := fs.ReadDir("data/t-0")
	var logs []string
	for _, n := range names {
		if _, ok := parseSegmentFileName(n, ".log"); ok {
			logs = append(logs, n)
		}
	}
	if len(logs) != l.NumSegments() || len(logs) < 3 {
		t.Fatalf("segments %v", logs)
	}
	// Each segment is named by the base offset of its first batch and
	// stays within the size limit.
	for _, n := range logs {
		base, _ := parseSegmentFileName(n, ".log")
		b, _ := readAll(fs, "data/t-0/"+n)
		if len(b) > 3000 {
			t.Fatalf("%s has %d bytes", n, len(b))
		}
		if kbatch.BaseOffset(b) != base {
			t.Fatalf("%s starts with offset %d", n, kbatch.BaseOffset(b))
		}
	}
	// A producer snapshot was taken at each roll (named by the new base).
	snaps := 0
	for _, n := range names {
		if _, ok := parseSegmentFileName(n, ".snapshot"); ok {
			snaps++
		}
	}
	if snaps != len(logs)-1 {
		t.Fatalf("%d snapshots for %d segments", snaps, len(logs))
	}
}

func TestSegmentRollByTime(t *testing.T) {
	fs := NewMemFS()
	l := openLog(t, fs, Config{SegmentMs: 1000})
	defer l.Close()
	for _, ts := range []int64{10_000, 10_500, 11_000, 11_001, 11_500, 12_002} {
		if _, err := l.AppendLeader(testBatch(t, 0, 1, ts, 1, 10), 1, 1); err != nil {
			t.Fatal(err)
		}
	}
	// Rolls when the batch timestamp is more than 1000 after the first
	// batch of the segment: at 11_001 and at 12_002.
	if n := l.NumSegments(); n != 3 {
		t.Fatalf("%d segments", n)
	}
}

func TestSegmentRollOnRelativeOffsetOverflow(t *testing.T) {
	fs := NewMemFS()
	l := openLog(t, fs, Config{})
	defer l.Close()
	b1 := testBatch(t, 5, 1, 1, 1, 10)
	b2 := testBatch(t, 5+1<<31+10, 1, 2, 1, 10)
	b3 := testBatch(t, 5+1<<31+20, 1, 3, 1, 10)
	if _, err := l.AppendVerbatim(slices.Concat(b1, b2, b3)); err != nil {
		t.Fatal(err)
	}
	if l.NumSegments() != 2 {
		t.Fatalf("%d segments", l.NumSegments())
	}
	got := readAllBatches(t, l)
	if len(got) != 3 || kbatch.BaseOffset(got[1]) != 5+1<<31+10 {
		t.Fatalf("read back %d batches", len(got))
	}
	if _, err := fs.Stat("data/t-0/" + SegmentFileName(5+1<<31+10, ".log")); err != nil {
		t.Fatal(err)
	}
}

func TestSegmentIndexesLoadLazily(t *testing.T) {
	fs := NewMemFS()
	cfg := Config{SegmentBytes: 1000, IndexIntervalBytes: 100}
	l := openLog(t, fs, cfg)
	for i := 0; i < 30; i++ {
		if _, err := l.AppendLeader(testBatch(t, 0, 1, int64(i), 2, 100), 1, 1); err != nil {
			t.Fatal(err)
		}
	}
	want := readAllBatches(t, l)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l = openLog(t, fs, cfg)
	defer l.Close()
	if l.NumSegments() < 4 {
		t.Fatalf("%d segments", l.NumSegments())
	}
	for i, s := range l.segs[:len(l.segs)-1] {
		if s.indexesLoaded {
			t.Fatalf("rolled segment %d loaded its indexes at Open", i)
		}
	}
	if !l.active().indexesLoaded {
		t.Fatal("active segment indexes not loaded")
	}
	// A read in segment 1 loads that segment's indexes only.
	off := l.segs[1].base + 1
	if _, err := l.Read(off, 10); err != nil {
		t.Fatal(err)
	}
	if !l.segs[1].indexesLoaded || l.segs[0].indexesLoaded {
		t.Fatal("lookup did not load exactly the segment it used")
	}
	got := readAllBatches(t, l)
	checkBatches(t, got, want)
	// Timestamps of lazily loaded segments are known without loading.
	mt, ok, err := l.MaxTimestamp(context.Background())
	if err != nil || !ok || mt.Timestamp != 30 {
		t.Fatalf("%+v %v %v", mt, ok, err)
	}
}

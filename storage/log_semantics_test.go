package storage

import (
	"context"
	"encoding/binary"
	"errors"
	"slices"
	"testing"

	"github.com/verbatim-kafka/verbatim/kbatch"
	"github.com/verbatim-kafka/verbatim/kbatch/kbatchtest"
)

func TestLogOffsetForTimestampAllCodecs(t *testing.T) {
	for _, codec := range []kbatch.Codec{kbatch.CodecNone, kbatch.CodecGzip, kbatch.CodecSnappy, kbatch.CodecLZ4, kbatch.CodecZstd} {
		t.Run(codec.String(), func(t *testing.T) {
			fs := NewMemFS()
			l := openLog(t, fs, Config{IndexIntervalBytes: 64, SegmentBytes: 1500})
			defer l.Close()
			// Batch i has records with timestamps 1000*i + {0, 10, 5, 20}.
			for i := int64(1); i <= 20; i++ {
				recs := []kbatch.Record{
					{OffsetDelta: 0, TimestampDelta: 0, Value: []byte("a")},
					{OffsetDelta: 1, TimestampDelta: 10, Value: []byte("b")},
					{OffsetDelta: 2, TimestampDelta: 5, Value: []byte("c")},
					{OffsetDelta: 3, TimestampDelta: 20, Value: []byte("d")},
				}
				b := kbatch.NewBatch(1000*i, recs...)
				b.Attributes = int16(codec)
				if _, err := l.AppendLeader(kbatchtest.Encode(t, b), 1, 1); err != nil {
					t.Fatal(err)
				}
			}
			if l.NumSegments() < 2 {
				t.Fatalf("want several segments, got %d", l.NumSegments())
			}
			cases := []struct{ ts, off, gotTs int64 }{
				{0, 0, 1000},
				{1000, 0, 1000},
				{1001, 1, 1010},
				{1006, 1, 1010}, // the first record with ts >= 1006 is offset 1 (1010), not 2 (1005)
				{1011, 3, 1020},
				{7_015, 6*4 + 3, 7020},
				{20_020, 19*4 + 3, 20_020},
			}
			for _, c := range cases {
				r, err := l.OffsetForTimestamp(context.Background(), c.ts)
				if err != nil {
					t.Fatalf("ts %d: %v", c.ts, err)
				}
				if r.Offset != c.off || r.Timestamp != c.gotTs || r.LeaderEpoch != 1 {
					t.Fatalf("ts %d: got %+v, want offset %d ts %d", c.ts, r, c.off, c.gotTs)
				}
			}
			if _, err := l.OffsetForTimestamp(context.Background(), 20_021); !errors.Is(err, ErrNoTimestampMatch) {
				t.Fatalf("beyond max: %v", err)
			}
			mt, ok, err := l.MaxTimestamp(context.Background())
			if err != nil || !ok || mt.Timestamp != 20_020 || mt.Offset != 19*4+3 {
				t.Fatalf("max timestamp: %+v %v %v", mt, ok, err)
			}
			// After DeleteRecords, earlier offsets are skipped.
			if _, err := l.DeleteRecords(6); err != nil {
				t.Fatal(err)
			}
			r, err := l.OffsetForTimestamp(context.Background(), 0)
			if err != nil || r.Offset != 6 {
				t.Fatalf("after DeleteRecords: %+v %v", r, err)
			}
		})
	}
}

func TestLogMaxTimestampFirstMaxWins(t *testing.T) {
	fs := NewMemFS()
	l := openLog(t, fs, Config{})
	defer l.Close()
	for _, ts := range []int64{100, 500, 300, 500} {
		if _, err := l.AppendLeader(testBatch(t, 0, 2, ts, 2, 5), 2, 1); err != nil {
			t.Fatal(err)
		}
	}
	// Batch 1 holds ts 500 (base) and 501 (record 1): max 501 at offset 3.
	mt, ok, err := l.MaxTimestamp(context.Background())
	if err != nil || !ok || mt.Timestamp != 501 || mt.Offset != 3 || mt.LeaderEpoch != 2 {
		t.Fatalf("%+v %v %v", mt, ok, err)
	}
}

func TestLogRefusesOldMagicAndMalformedSets(t *testing.T) {
	fs := NewMemFS()
	l := openLog(t, fs, Config{})
	defer l.Close()
	b := testBatch(t, 0, 1, 1, 1, 1)
	for _, magic := range []byte{0, 1} {
		old := append([]byte(nil), b...)
		old[kbatch.MagicOffset] = magic
		if _, err := l.AppendLeader(old, 1, 1); !errors.Is(err, ErrUnsupportedMagic) {
			t.Fatalf("magic %d leader: %v", magic, err)
		}
		if _, err := l.AppendVerbatim(old); !errors.Is(err, ErrUnsupportedMagic) {
			t.Fatalf("magic %d verbatim: %v", magic, err)
		}
	}
	if _, err := l.AppendLeader(b[:len(b)-1], 1, 1); !errors.Is(err, ErrCorruptBatch) {
		t.Fatalf("truncated: %v", err)
	}
	if _, err := l.AppendVerbatim(nil); !errors.Is(err, ErrCorruptBatch) {
		t.Fatalf("empty: %v", err)
	}
	// Verbatim offsets must increase inside a set.
	b1 := testBatch(t, 10, 1, 1, 3, 1)
	b2 := testBatch(t, 11, 1, 1, 1, 1)
	if _, err := l.AppendVerbatim(slices.Concat(b1, b2)); !errors.Is(err, ErrCorruptBatch) {
		t.Fatalf("overlapping set: %v", err)
	}
	if l.LogEndOffset() != 0 {
		t.Fatalf("refused sets changed LEO to %d", l.LogEndOffset())
	}
}

func TestLogStoresEmptyAndDeleteHorizonBatchesUnchanged(t *testing.T) {
	fs := NewMemFS()
	l := openLog(t, fs, Config{})
	defer l.Close()
	empty := kbatch.NewBatch(500)
	empty.BaseOffset = 3
	empty.LastOffsetDelta = 4 // compaction left offsets 3..7 with no record
	empty.LeaderEpoch = 1
	eb := kbatchtest.Encode(t, empty)
	dh := kbatch.NewBatch(900, kbatch.Record{OffsetDelta: 0, Value: nil, Key: []byte("k")})
	dh.BaseOffset = 8
	dh.Attributes = kbatch.DeleteHorizonBit
	dh.LeaderEpoch = 1
	db := kbatchtest.Encode(t, dh)
	if _, err := l.AppendVerbatim(slices.Concat(eb, db)); err != nil {
		t.Fatal(err)
	}
	got := readAllBatches(t, l)
	if len(got) != 2 || string(got[0]) != string(eb) || string(got[1]) != string(db) {
		t.Fatalf("stored batches differ")
	}
	if l.LogEndOffset() != 9 {
		t.Fatalf("LEO %d", l.LogEndOffset())
	}
	// Offset 5 is inside the empty batch: Read returns it.
	sl, err := l.Read(5, 1)
	if err != nil || sl.BaseOffset != 3 {
		t.Fatalf("%+v %v", sl, err)
	}
}

// A LogAppendTime batch (stamped by the hot path before the append) keeps
// its bytes through AppendLeader, and a timestamp lookup answers with the
// batch's max timestamp for its records.
func TestLogLogAppendTimeBatch(t *testing.T) {
	fs := NewMemFS()
	l := openLog(t, fs, Config{})
	defer l.Close()
	b := testBatch(t, 0, 1, 100, 3, 5)
	attrs := uint16(kbatch.Attributes(b)) | kbatch.TimestampTypeBit
	binary.BigEndian.PutUint16(b[kbatch.AttributesOffset:], attrs)
	kbatch.SetMaxTimestamp(b, 777_000)
	kbatch.SetCRC(b)
	if _, err := l.AppendLeader(b, 1, 900_000); err != nil {
		t.Fatal(err)
	}
	if kbatch.MaxTimestamp(b) != 777_000 || kbatch.Attributes(b)&kbatch.TimestampTypeBit == 0 || kbatch.CRC(b) != kbatch.StoredCRC(b) {
		t.Fatal("AppendLeader changed the timestamp fields or broke the CRC")
	}
	r, err := l.OffsetForTimestamp(context.Background(), 500_000)
	if err != nil || r.Offset != 0 || r.Timestamp != 777_000 {
		t.Fatalf("%+v %v", r, err)
	}
}

func TestLogDeleteRecordsAndRetention(t *testing.T) {
	fs := NewMemFS()
	now := int64(1_000_000)
	cfg := Config{SegmentBytes: 1000, RetentionMs: 10_000, NowMs: func() int64 { return now }}
	l := openLog(t, fs, cfg)
	for i := int64(0); i < 30; i++ {
		if _, err := l.AppendLeader(testBatch(t, 0, int32(i/10), 900_000+i*1000, 1, 200), int32(i/10), now); err != nil {
			t.Fatal(err)
		}
	}
	segs := l.NumSegments()
	if segs < 5 {
		t.Fatalf("%d segments", segs)
	}
	if _, err := l.DeleteRecords(31); !errors.Is(err, ErrOffsetOutOfRange) {
		t.Fatalf("beyond HW: %v", err)
	}
	if start, err := l.DeleteRecords(7); err != nil || start != 7 {
		t.Fatalf("DeleteRecords(7) = %d, %v; want the new log start 7", start, err)
	}
	if l.LogStartOffset() != 7 {
		t.Fatalf("start %d", l.LogStartOffset())
	}
	if _, err := l.Read(6, 10); !errors.Is(err, ErrOffsetOutOfRange) {
		t.Fatalf("read below start: %v", err)
	}
	if sl, err := l.Read(7, 10); err != nil || sl.BaseOffset != 7 {
		t.Fatalf("read at start: %+v %v", sl, err)
	}
	if l.NumSegments() >= segs {
		t.Fatalf("no segment deleted")
	}
	// Retention: records have timestamps 900_000..929_000; now is 1_000_000,
	// retention 10s: everything expired; all but a new empty active go.
	n, err := l.ApplyRetention(now)
	if err != nil || n == 0 {
		t.Fatalf("retention: %d %v", n, err)
	}
	if l.LogStartOffset() != 30 || l.LogEndOffset() != 30 || l.NumSegments() != 1 {
		t.Fatalf("after retention: start %d end %d segs %d", l.LogStartOffset(), l.LogEndOffset(), l.NumSegments())
	}
	// The epoch cache keeps the latest epoch from the new start.
	if e, off, err := l.EndOffsetForEpoch(2); err != nil || e != 2 || off != 30 {
		t.Fatalf("end offset for epoch 2: %d %d %v", e, off, err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l2 := openLog(t, fs, cfg)
	defer l2.Close()
	if l2.LogStartOffset() != 30 || l2.LogEndOffset() != 30 {
		t.Fatalf("reopen: start %d end %d", l2.LogStartOffset(), l2.LogEndOffset())
	}
}

func TestLogRetentionBySize(t *testing.T) {
	fs := NewMemFS()
	l := openLog(t, fs, Config{SegmentBytes: 1000, RetentionBytes: 2500, RetentionMs: -1})
	defer l.Close()
	for i := 0; i < 30; i++ {
		if _, err := l.AppendLeader(testBatch(t, 0, 1, 1, 1, 200), 1, 1); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := l.ApplyRetention(1); err != nil {
		t.Fatal(err)
	}
	// Kafka deletes whole segments while the rest stays >= retention.bytes.
	if s := l.Size(); s < 2500 || s >= 2500+1000 {
		t.Fatalf("size %d after retention", s)
	}
	got := readAllBatches(t, l)
	if len(got) == 0 || kbatch.BaseOffset(got[0]) != l.LogStartOffset() {
		t.Fatalf("log start %d does not match first batch", l.LogStartOffset())
	}
}

func TestLogTruncate(t *testing.T) {
	fs := NewMemFS()
	l := openLog(t, fs, Config{SegmentBytes: 1000})
	for i := 0; i < 20; i++ {
		if _, err := l.AppendLeader(testBatch(t, 0, int32(i/5), 1, 2, 100), int32(i/5), 1); err != nil {
			t.Fatal(err)
		}
	}
	// Offsets 0..39, epochs 0..3 starting at 0,10,20,30.
	if err := l.Truncate(25); err != nil { // inside batch [24,25]: it goes whole
		t.Fatal(err)
	}
	if l.LogEndOffset() != 24 {
		t.Fatalf("LEO %d", l.LogEndOffset())
	}
	if e, ok := l.EpochCache().LatestEpoch(); !ok || e != 2 {
		t.Fatalf("latest epoch %d", e)
	}
	if e, off, _ := l.EndOffsetForEpoch(1); e != 1 || off != 20 {
		t.Fatalf("end offset for epoch 1: %d %d", e, off)
	}
	res, err := l.AppendLeader(testBatch(t, 0, 5, 1, 1, 100), 5, 1)
	if err != nil || res.FirstOffset != 24 {
		t.Fatalf("%+v %v", res, err)
	}
	got := readAllBatches(t, l)
	if len(got) != 13 {
		t.Fatalf("%d batches", len(got))
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l = openLog(t, fs, Config{SegmentBytes: 1000})
	defer l.Close()
	if l.LogEndOffset() != 25 || len(readAllBatches(t, l)) != 13 {
		t.Fatalf("reopen: LEO %d", l.LogEndOffset())
	}
	if err := l.TruncateFullyAndStartAt(1000); err != nil {
		t.Fatal(err)
	}
	if l.LogStartOffset() != 1000 || l.LogEndOffset() != 1000 || l.NumSegments() != 1 {
		t.Fatalf("truncate fully: %d %d %d", l.LogStartOffset(), l.LogEndOffset(), l.NumSegments())
	}
	if _, ok := l.EpochCache().LatestEpoch(); ok {
		t.Fatal("epoch cache not cleared")
	}
	res, err = l.AppendVerbatim(testBatch(t, 1005, 9, 1, 1, 1))
	if err != nil || res.FirstOffset != 1005 {
		t.Fatalf("%+v %v", res, err)
	}
}

func TestLogReadBounded(t *testing.T) {
	fs := NewMemFS()
	l := openLog(t, fs, Config{})
	defer l.Close()
	for i := 0; i < 4; i++ {
		if _, err := l.AppendLeader(testBatch(t, 0, 1, 1, 3, 10), 1, 1); err != nil {
			t.Fatal(err)
		}
	}
	// Batches [0,2] [3,5] [6,8] [9,11].
	for _, c := range []struct {
		from, bound int64
		batches     int
	}{{0, 12, 4}, {0, 9, 3}, {0, 8, 2}, {4, 6, 1}, {4, 5, 0}, {0, 0, 0}, {7, 100, 2}} {
		sl, err := l.ReadBounded(c.from, 1<<20, c.bound)
		if err != nil {
			t.Fatal(err)
		}
		b, err := sl.Bytes(nil)
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for len(b) > 0 {
			_, b, _ = kbatch.Next(b)
			n++
		}
		if n != c.batches {
			t.Fatalf("ReadBounded(%d, bound %d): %d batches, want %d", c.from, c.bound, n, c.batches)
		}
	}
}

// A fetch holding a Slice of a segment that retention deletes can still
// read it (the file stays open for FileDeleteDelay).
func TestLogSliceSurvivesSegmentDeletion(t *testing.T) {
	fs := NewMemFS()
	l := openLog(t, fs, Config{SegmentBytes: 500, RetentionBytes: 600, RetentionMs: -1})
	defer l.Close()
	for i := 0; i < 10; i++ {
		if _, err := l.AppendLeader(testBatch(t, 0, 1, 1, 1, 200), 1, 1); err != nil {
			t.Fatal(err)
		}
	}
	sl, err := l.Read(0, 1000)
	if err != nil {
		t.Fatal(err)
	}
	if n, err := l.ApplyRetention(1); err != nil || n == 0 {
		t.Fatalf("retention: %d %v", n, err)
	}
	if _, err := fs.Stat("data/t-0/" + SegmentFileName(0, ".log")); err == nil {
		t.Fatal("segment 0 still has a name")
	}
	b, err := sl.Bytes(nil)
	if err != nil || len(b) == 0 || kbatch.BaseOffset(b) != 0 {
		t.Fatalf("read after deletion: %d bytes, %v", len(b), err)
	}
}

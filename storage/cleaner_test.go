package storage

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/verbatim-kafka/verbatim/kbatch"
	"github.com/verbatim-kafka/verbatim/kbatch/kbatchtest"
)

// kvBatch builds a batch at base of records "k=v" (a value), "k" (a
// tombstone: null value) or "=v" (no key), timestamps ts+i.
func kvBatch(t testing.TB, base, ts int64, kvs ...string) []byte {
	t.Helper()
	return kbatchtest.Encode(t, kvBatchSpec(base, ts, kvs...))
}

func kvBatchSpec(base, ts int64, kvs ...string) kbatch.Batch {
	recs := make([]kbatch.Record, len(kvs))
	for i, kv := range kvs {
		r := kbatch.Record{OffsetDelta: int32(i), TimestampDelta: int64(i)}
		k, v, hasV := strings.Cut(kv, "=")
		if k != "" {
			r.Key = []byte(k)
		}
		if hasV {
			r.Value = []byte(v)
		}
		recs[i] = r
	}
	b := kbatch.NewBatch(ts, recs...)
	b.BaseOffset, b.LeaderEpoch = base, 1
	return b
}

// rec is one stored record as a consumer sees it.
type rec struct {
	off  int64
	kv   string
	ts   int64
	epoc int32
}

func (r rec) String() string { return fmt.Sprintf("%d:%s@%d", r.off, r.kv, r.ts) }

func recordsOf(t testing.TB, batches [][]byte) []rec {
	t.Helper()
	var out []rec
	for _, b := range batches {
		h, _ := kbatch.ParseHeader(b)
		if kbatch.CRC(b) != h.CRC {
			t.Fatalf("batch at %d: bad CRC", h.BaseOffset)
		}
		rs, err := kbatch.Records(b)
		if err != nil {
			t.Fatalf("batch at %d: %v", h.BaseOffset, err)
		}
		for _, r := range rs {
			kv := string(r.Key)
			if r.Value != nil {
				kv += "=" + string(r.Value)
			}
			if h.IsControl() {
				kv = fmt.Sprintf("ctl%d", int16(r.Key[3]))
			}
			ts := h.BaseTimestamp + r.TimestampDelta
			if h.LogAppendTime() {
				ts = h.MaxTimestamp
			}
			out = append(out, rec{off: h.BaseOffset + int64(r.OffsetDelta), kv: kv, ts: ts, epoc: h.LeaderEpoch})
		}
	}
	return out
}

func logRecords(t testing.TB, l *Log) []rec { return recordsOf(t, readAllBatches(t, l)) }

func appendAll(t testing.TB, l *Log, batches ...[]byte) {
	t.Helper()
	for _, b := range batches {
		if _, err := l.AppendVerbatim(b); err != nil {
			t.Fatalf("append at %d: %v", kbatch.BaseOffset(b), err)
		}
	}
}

func cleanerTestLog(t testing.TB, fs FS) *Log {
	t.Helper()
	return openLog(t, fs, Config{SegmentBytes: 150, IndexIntervalBytes: 1})
}

func mustClean(t testing.TB, c *Cleaner, l *Log, cc CompactConfig, now int64) CleanStats {
	t.Helper()
	if err := l.Flush(); err != nil {
		t.Fatal(err)
	}
	st, err := c.Clean(l, cc, now)
	if err != nil {
		t.Fatalf("clean: %v", err)
	}
	return st
}

func recString(rs []rec) string {
	var b strings.Builder
	for _, r := range rs {
		fmt.Fprintf(&b, "%d:%s ", r.off, r.kv)
	}
	return strings.TrimSpace(b.String())
}

func TestCleanerKeepsLatestPerKey(t *testing.T) {
	l := cleanerTestLog(t, NewMemFS())
	defer l.Close()
	appendAll(t, l,
		kvBatch(t, 0, 100, "a=1", "b=1", "c=1"),
		kvBatch(t, 3, 200, "a=2", "b=2"),
		kvBatch(t, 5, 300, "a=3", "d=1"),
		kvBatch(t, 7, 400, "c=2", "=nokey"),
		kvBatch(t, 9, 500, "a=4", "b=3"), // ends in the active segment
	)
	if l.NumSegments() < 3 {
		t.Fatalf("want several segments, have %d", l.NumSegments())
	}
	before := logRecords(t, l)
	c := NewCleaner(CleanerConfig{DedupeBufferBytes: 1 << 16})
	st := mustClean(t, c, l, CompactConfig{}, 1000)
	got := logRecords(t, l)
	// The active segment (the last batch) is never cleaned; so its keys
	// are not in the map and the older a and b stay at their latest in
	// the cleaned range.
	activeBase := l.segs[len(l.segs)-1].base
	var want []rec
	latest := map[string]int64{}
	for _, r := range before {
		if r.off < activeBase {
			k, _, _ := strings.Cut(r.kv, "=")
			latest[k] = r.off
		}
	}
	for _, r := range before {
		k, _, _ := strings.Cut(r.kv, "=")
		if r.off >= activeBase || (k != "" && latest[k] == r.off) {
			want = append(want, r)
		}
	}
	if recString(got) != recString(want) {
		t.Fatalf("after clean:\n got %s\nwant %s", recString(got), recString(want))
	}
	for i := range got { // timestamps and epochs of kept records unchanged
		if got[i] != want[i] {
			t.Fatalf("record %d: got %+v want %+v", i, got[i], want[i])
		}
	}
	if st.Groups == 0 || st.EndOffset != activeBase || l.LogEndOffset() != 11 {
		t.Fatalf("stats %+v, LEO %d", st, l.LogEndOffset())
	}
	// The cleaned log reopens (recovery trusts it) with the same content,
	// and the checkpoint records the first dirty offset.
	fs := l.fs
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l2 := openLog(t, fs, Config{SegmentBytes: 150, IndexIntervalBytes: 1})
	defer l2.Close()
	if recString(logRecords(t, l2)) != recString(want) {
		t.Fatalf("after reopen: %s", recString(logRecords(t, l2)))
	}
	cs, err := l2.CleanableState(CompactConfig{}, 1000)
	if err != nil || cs.FirstDirty != activeBase || cs.CleanableBytes != 0 {
		t.Fatalf("cleanable after clean: %+v %v", cs, err)
	}
	// Offsets are still found by lookup (indexes rebuilt).
	for _, r := range want {
		sl, err := l2.Read(r.off, 1)
		if err != nil || sl.Size == 0 {
			t.Fatalf("read %d: %v", r.off, err)
		}
	}
}

func TestCleanerTombstoneHorizon(t *testing.T) {
	l := cleanerTestLog(t, NewMemFS())
	defer l.Close()
	appendAll(t, l,
		kvBatch(t, 0, 100, "a=1", "b=1"),
		kvBatch(t, 2, 200, "a", "c=1"), // tombstone for a
		kvBatch(t, 4, 300, "d=1", "e=1", "f=1"),
		kvBatch(t, 7, 400, "g=1", "h=1", "i=1"),
	)
	c := NewCleaner(CleanerConfig{})
	cc := CompactConfig{DeleteRetentionMs: 1000}
	mustClean(t, c, l, cc, 5000)
	got := logRecords(t, l)
	if !strings.Contains(recString(got), "2:a ") || strings.Contains(recString(got), "0:a=1") {
		t.Fatalf("first clean: tombstone must stay, old a go: %s", recString(got))
	}
	// The batch with the tombstone now carries the delete horizon.
	var tomb []byte
	for _, b := range readAllBatches(t, l) {
		if kbatch.BaseOffset(b) == 2 {
			tomb = b
		}
	}
	h, _ := kbatch.ParseHeader(tomb)
	if !h.HasDeleteHorizon() || h.BaseTimestamp != 6000 {
		t.Fatalf("tombstone batch: horizon bit %v base timestamp %d, want 6000", h.HasDeleteHorizon(), h.BaseTimestamp)
	}
	for _, r := range got {
		if r.off == 2 && r.ts != 200 || r.off == 3 && r.ts != 201 {
			t.Fatalf("timestamps changed: %+v", r)
		}
	}
	// Before the horizon a clean keeps it; after, it goes.
	appendAll(t, l, kvBatch(t, 10, 500, "x=1", "y=1", "z=1"), kvBatch(t, 13, 600, "w=1", "v=1", "u=1"))
	mustClean(t, c, l, cc, 5999)
	if !strings.Contains(recString(logRecords(t, l)), "2:a ") {
		t.Fatal("tombstone removed before its horizon")
	}
	appendAll(t, l, kvBatch(t, 16, 700, "x=2", "y=2", "z=2"), kvBatch(t, 19, 800, "w=2", "v=2", "u=2"))
	mustClean(t, c, l, cc, 6000)
	if s := recString(logRecords(t, l)); strings.Contains(s, "2:a ") || !strings.Contains(s, "3:c=1") {
		t.Fatalf("after the horizon the tombstone goes, c stays: %s", s)
	}
}

// rollDirty appends batches of new keys until the active segment rolled
// twice, so that there is a dirty rolled segment.
func rollDirty(t testing.TB, l *Log) {
	t.Helper()
	n := l.NumSegments()
	for l.NumSegments() < n+2 {
		off := l.LogEndOffset()
		appendAll(t, l, kvBatch(t, off, 100, fmt.Sprintf("fill%d=1", off), fmt.Sprintf("fill%d=2", off+1)))
	}
}

func TestCleanerMapFullContinuesNextTime(t *testing.T) {
	l := openLog(t, NewMemFS(), Config{SegmentBytes: 4000, IndexIntervalBytes: 4096})
	defer l.Close()
	var batches [][]byte
	off := int64(0)
	for i := 0; i < 150; i++ {
		kvs := make([]string, 10)
		for j := range kvs {
			kvs[j] = fmt.Sprintf("k%d=%d", (i*10+j)%1200, i)
		}
		batches = append(batches, kvBatch(t, off, 100, kvs...))
		off += 10
	}
	appendAll(t, l, batches...)
	c := NewCleaner(CleanerConfig{DedupeBufferBytes: 1}) // the minimum: 1024 slots, 921 keys
	st := mustClean(t, c, l, CompactConfig{}, 1000)
	if !st.MapFull || st.EndOffset >= l.segs[len(l.segs)-1].base {
		t.Fatalf("want a full map before the dirty end: %+v", st)
	}
	if c.MemoryBytes() > 1024*offsetMapSlotSize+int64(cap(c.readBuf))+int64(cap(c.writeBuf)) {
		t.Fatalf("map over its bound: %d", c.m.bytes())
	}
	st2 := mustClean(t, c, l, CompactConfig{}, 1000)
	if st2.FirstDirty != st.EndOffset {
		t.Fatalf("second clean starts at %d, want %d", st2.FirstDirty, st.EndOffset)
	}
	// Each key appears at most once below the active segment... once the
	// whole dirty section was mapped.
	for i := 0; i < 5 && st2.MapFull; i++ {
		st2 = mustClean(t, c, l, CompactConfig{}, 1000)
	}
	seen := map[string]int64{}
	for _, r := range logRecords(t, l) {
		k, _, _ := strings.Cut(r.kv, "=")
		if r.off < l.segs[len(l.segs)-1].base {
			if prev, ok := seen[k]; ok {
				t.Fatalf("key %s at %d and %d", k, prev, r.off)
			}
			seen[k] = r.off
		}
	}
}

func TestCleanerMinCompactionLagAndRatio(t *testing.T) {
	l := cleanerTestLog(t, NewMemFS())
	defer l.Close()
	appendAll(t, l,
		kvBatch(t, 0, 1000, "a=1", "b=1", "c=1"),
		kvBatch(t, 3, 5000, "a=2", "b=2", "c=2"),
		kvBatch(t, 6, 9000, "a=3", "b=3", "c=3"),
	)
	l.Flush()
	cs, err := l.CleanableState(CompactConfig{MinCompactionLagMs: 3000}, 7000)
	if err != nil {
		t.Fatal(err)
	}
	// Only the first segment (timestamps up to 1002) is older than
	// 7000 - 3000; the second (up to 5002) is not, so it stops the range.
	if cs.FirstUncleanable != 3 || cs.FirstDirty != 0 || !cs.ShouldClean(CompactConfig{}) {
		t.Fatalf("cleanable: %+v", cs)
	}
	c := NewCleaner(CleanerConfig{})
	st := mustClean(t, c, l, CompactConfig{MinCompactionLagMs: 3000}, 7000)
	if st.EndOffset != 3 || recString(logRecords(t, l))[:5] != "0:a=1" {
		t.Fatalf("lag: %+v %s", st, recString(logRecords(t, l)))
	}
	cs, _ = l.CleanableState(CompactConfig{MaxCompactionLagMs: 100}, 20000)
	if !cs.NeedCompactionNow {
		t.Fatalf("max compaction lag: %+v", cs)
	}
}

func TestCleanerUncleanable(t *testing.T) {
	l := cleanerTestLog(t, NewMemFS())
	defer l.Close()
	bad := kvBatchSpec(0, 100, "a=1", "b=2")
	bad.Attributes = int16(kbatch.CodecGzip)
	raw := kbatchtest.Encode(t, bad)
	copy(raw[kbatch.HeaderSize:], []byte("not gzip at all"))
	kbatch.SetCRC(raw) // a valid CRC over an undecodable payload
	appendAll(t, l, raw, kvBatch(t, 2, 100, "a=2", "b=3", "c=1"), kvBatch(t, 5, 100, "a=3", "b=4", "c=2"))
	c := NewCleaner(CleanerConfig{})
	l.Flush()
	_, err := c.Clean(l, CompactConfig{}, 1000)
	if !errors.Is(err, ErrUncleanable) || !strings.Contains(err.Error(), "offset 0") {
		t.Fatalf("want uncleanable at offset 0: %v", err)
	}
	if l.Uncleanable() == nil {
		t.Fatal("log not marked uncleanable")
	}
	cs, _ := l.CleanableState(CompactConfig{}, 1000)
	if cs.Uncleanable == nil || cs.ShouldClean(CompactConfig{}) {
		t.Fatalf("an uncleanable log is not offered: %+v", cs)
	}
	if _, err := c.Clean(l, CompactConfig{}, 1000); !errors.Is(err, ErrUncleanable) {
		t.Fatalf("second clean: %v", err)
	}
	names, _ := l.fs.ReadDir(l.dir)
	for _, n := range names {
		if strings.HasSuffix(n, cleanedSuffix) {
			t.Fatalf("leftover %s", n)
		}
	}
	if got := readAllBatches(t, l); len(got) != 3 || string(got[0]) != string(raw) {
		t.Fatalf("the log changed: %d batches", len(got))
	}
}

func TestCleanerKeepsOriginalBytesAndCodec(t *testing.T) {
	l := cleanerTestLog(t, NewMemFS())
	defer l.Close()
	z := kvBatchSpec(0, 100, "a=1", "b=1", "c=1")
	z.Attributes = int16(kbatch.CodecZstd)
	zb := kbatchtest.Encode(t, z)
	untouched := kvBatch(t, 3, 100, "d=1", "e=1")
	appendAll(t, l, zb, untouched, kvBatch(t, 5, 100, "a=2", "x=1", "y=1"), kvBatch(t, 8, 100, "q=1", "r=1", "s=1"))
	mustClean(t, NewCleaner(CleanerConfig{}), l, CompactConfig{}, 1000)
	for _, b := range readAllBatches(t, l) {
		switch kbatch.BaseOffset(b) {
		case 3:
			if string(b) != string(untouched) {
				t.Fatal("a batch with nothing dropped was rewritten")
			}
		case 0:
			h, _ := kbatch.ParseHeader(b)
			if h.Codec() != kbatch.CodecZstd || h.LastOffsetDelta != 2 || h.RecordCount != 2 || h.LeaderEpoch != 1 {
				t.Fatalf("re-encoded batch: %+v", h)
			}
		}
	}
}

func TestThrottler(t *testing.T) {
	now := time.Unix(0, 0)
	var slept time.Duration
	th := NewThrottler(1000, func() time.Time { return now }, func(d time.Duration) { slept += d; now = now.Add(d) })
	th.Done(500) // before the period: no check
	if slept != 0 {
		t.Fatal("slept before the period")
	}
	now = now.Add(300 * time.Millisecond)
	th.Done(500) // 1000 bytes in 0.3 s at 1000 B/s: 0.7 s ahead
	if slept != 700*time.Millisecond {
		t.Fatalf("slept %v, want 700ms", slept)
	}
	now = now.Add(time.Second)
	th.Done(100) // under the rate
	if slept != 700*time.Millisecond || th.Slept() != slept {
		t.Fatalf("slept %v under the rate", slept)
	}
	var none *Throttler
	none.Done(1 << 30)
}

func TestOffsetMap(t *testing.T) {
	m := newOffsetMap(1 << 20)
	for i := 0; i < 5000; i++ {
		m.put([]byte(fmt.Sprint("k", i%3000)), int64(i))
	}
	if m.entries != 3000 || m.full() {
		t.Fatalf("entries %d full %v", m.entries, m.full())
	}
	for i := 0; i < 3000; i++ {
		want := int64(i)
		if i < 2000 {
			want = int64(3000 + i)
		}
		if got := m.get([]byte(fmt.Sprint("k", i))); got != want {
			t.Fatalf("k%d: %d want %d", i, got, want)
		}
	}
	if m.get([]byte("absent")) != -1 {
		t.Fatal("absent key found")
	}
	small := newOffsetMap(0)
	n := 0
	for !small.full() {
		small.put([]byte(fmt.Sprint(n)), int64(n))
		n++
	}
	if small.bytes() != offsetMapMinSlots*offsetMapSlotSize || n != 921 {
		t.Fatalf("bounded map: %d bytes, %d keys", small.bytes(), n)
	}
	m.reset()
	if m.entries != 0 || m.get([]byte("k1")) != -1 {
		t.Fatal("reset")
	}
}

// TestCleanerBesideAppendsAndReads runs cleans while another goroutine
// appends and reads (the race detector checks the locking); every offset
// a clean keeps stays readable and the log end only grows.
func TestCleanerBesideAppendsAndReads(t *testing.T) {
	l := openLog(t, NewMemFS(), Config{SegmentBytes: 300, IndexIntervalBytes: 64})
	defer l.Close()
	done := make(chan error)
	go func() {
		defer close(done)
		for i := 0; i < 300; i++ {
			off := l.LogEndOffset()
			if _, err := l.AppendVerbatim(kvBatch(t, off, 100, fmt.Sprintf("k%d=%d", i%7, i), fmt.Sprintf("k%d=%d", (i+3)%7, i))); err != nil {
				done <- err
				return
			}
			if _, err := l.Read(l.LogStartOffset(), 1<<10); err != nil {
				done <- err
				return
			}
		}
	}()
	c := NewCleaner(CleanerConfig{})
	for i := 0; i < 30; i++ {
		l.Flush()
		if _, err := c.Clean(l, CompactConfig{}, 1000); err != nil {
			t.Fatal(err)
		}
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	l.Flush()
	mustClean(t, c, l, CompactConfig{}, 1000)
	rs := logRecords(t, l)
	for i := 1; i < len(rs); i++ {
		if rs[i].off <= rs[i-1].off {
			t.Fatalf("offsets out of order at %d: %v %v", i, rs[i-1], rs[i])
		}
	}
	if l.LogEndOffset() != 600 {
		t.Fatalf("LEO %d", l.LogEndOffset())
	}
}

// TestCleanerRecoversKafkaSwapWithoutRecord: a .swap left without
// Verbatim's swap record (Kafka's layout) is completed by Kafka's rule,
// the old segments up to the swap's end replaced.
func TestCleanerRecoversKafkaSwapWithoutRecord(t *testing.T) {
	fs := NewMemFS()
	l := cleanerTestLog(t, fs)
	appendAll(t, l, kvBatch(t, 0, 100, "a=1", "b=1"), kvBatch(t, 2, 100, "a=2", "c=1"), kvBatch(t, 4, 100, "d=1"))
	l.Close()
	dir := "data/t-0"
	cleaned := kbatchtest.Encode(t, kbatch.Batch{BaseOffset: 1, LeaderEpoch: 1, LastOffsetDelta: 0, BaseTimestamp: 101, MaxTimestamp: -1,
		ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1, Records: []kbatch.Record{{Key: []byte("b"), Value: []byte("1")}}})
	if err := writeSynced(fs, dir+"/"+SegmentFileName(0, logSuffix+swapSuffix), cleaned); err != nil {
		t.Fatal(err)
	}
	l2 := openLog(t, fs, Config{SegmentBytes: 150, IndexIntervalBytes: 1})
	defer l2.Close()
	if got := recString(logRecords(t, l2)); got != "1:b=1 2:a=2 3:c=1 4:d=1" {
		t.Fatalf("after recovery: %s", got)
	}
}

func TestCleanerStop(t *testing.T) {
	l := cleanerTestLog(t, NewMemFS())
	defer l.Close()
	appendAll(t, l, kvBatch(t, 0, 100, "a=1"), kvBatch(t, 1, 100, "a=2"), kvBatch(t, 2, 100, "a=3"))
	before := recString(logRecords(t, l))
	c := NewCleaner(CleanerConfig{})
	c.Stop()
	l.Flush()
	if _, err := c.Clean(l, CompactConfig{}, 1000); !errors.Is(err, ErrCleanerStopped) {
		t.Fatalf("stopped cleaner: %v", err)
	}
	if got := recString(logRecords(t, l)); got != before {
		t.Fatalf("a stopped clean changed the log: %s", got)
	}
	if _, err := NewCleaner(CleanerConfig{}).Clean(l, CompactConfig{}, 1000); err != nil {
		t.Fatalf("the next clean: %v", err)
	}
}

// TestCleanerLogAppendTimeAndBarrier: a re-encoded LogAppendTime batch
// keeps its timestamp type and max timestamp (its records' timestamp);
// a MIRROR_PID_RESET barrier is never removed.
func TestCleanerLogAppendTimeAndBarrier(t *testing.T) {
	l := cleanerTestLog(t, NewMemFS())
	defer l.Close()
	lat := kvBatchSpec(0, 100, "a=1", "b=1")
	lat.Attributes = kbatch.TimestampTypeBit
	lat.MaxTimestamp = 777
	appendAll(t, l, kbatchtest.Encode(t, lat), markerBatch(t, 2, 5, 0, kbatch.ControlMirrorPidReset), kvBatch(t, 3, 100, "a=2"))
	rollDirty(t, l)
	c := NewCleaner(CleanerConfig{})
	mustClean(t, c, l, CompactConfig{DeleteRetentionMs: 1}, 1000)
	rollDirty(t, l)
	mustClean(t, c, l, CompactConfig{DeleteRetentionMs: 1}, 100000)
	s := recString(logRecords(t, l))
	if !strings.HasPrefix(s, "1:b=1 2:ctl7 3:a=2") {
		t.Fatalf("got %s", s)
	}
	b := readAllBatches(t, l)[0]
	h, _ := kbatch.ParseHeader(b)
	if !h.LogAppendTime() || h.MaxTimestamp != 777 || h.LastOffsetDelta != 1 || h.RecordCount != 1 {
		t.Fatalf("re-encoded LogAppendTime batch: %+v", h)
	}
}

func TestCleanableShouldClean(t *testing.T) {
	cc := CompactConfig{MinCleanableRatio: 0.5}
	for _, c := range []struct {
		in   Cleanable
		want bool
	}{
		{Cleanable{CleanableBytes: 10, CleanBytes: 10, Ratio: 0.5}, false}, // Kafka: strictly above
		{Cleanable{CleanableBytes: 11, CleanBytes: 9, Ratio: 0.55}, true},
		{Cleanable{CleanableBytes: 4, CleanBytes: 6, Ratio: 0.4}, false},
		{Cleanable{CleanableBytes: 4, CleanBytes: 6, Ratio: 0.4, NeedCompactionNow: true}, true},
		{Cleanable{CleanableBytes: 0, CleanBytes: 6, NeedCompactionNow: true}, false},
		{Cleanable{CleanableBytes: 10, Ratio: 1, Uncleanable: ErrUncleanable}, false},
	} {
		if got := c.in.ShouldClean(cc); got != c.want {
			t.Errorf("%+v: %v, want %v", c.in, got, c.want)
		}
	}
	// The default ratio is Kafka's 0.5; 0 cleans any dirty log.
	if (Cleanable{CleanableBytes: 4, CleanBytes: 6, Ratio: 0.4}).ShouldClean(DefaultCompactConfig()) {
		t.Error("default ratio")
	}
	if !(Cleanable{CleanableBytes: 1, CleanBytes: 99, Ratio: 0.01}).ShouldClean(CompactConfig{}) {
		t.Error("ratio 0")
	}
}

// TestCleanerEmptyGroupReopens: a group whose every record goes leaves an
// empty segment (as Kafka does); reads skip it and the log reopens, after
// a clean shutdown and after a crash.
func TestCleanerEmptyGroupReopens(t *testing.T) {
	fs := NewMemFS()
	l := cleanerTestLog(t, fs)
	appendAll(t, l, kvBatch(t, 0, 100, "a=1"), kvBatch(t, 1, 100, "a=2"), kvBatch(t, 2, 100, "a=3"), kvBatch(t, 3, 100, "b=1"))
	rollDirty(t, l)
	mustClean(t, NewCleaner(CleanerConfig{}), l, CompactConfig{}, 1000)
	want := recString(logRecords(t, l))
	if !strings.HasPrefix(want, "2:a=3 3:b=1") || l.segs[0].size != 0 {
		t.Fatalf("got %s, first segment %d bytes", want, l.segs[0].size)
	}
	for _, crash := range []bool{false, true} {
		var fs2 *MemFS
		if crash {
			fs2 = fs.Crash(CrashDropUnsynced, nil)
		} else {
			if err := l.Close(); err != nil {
				t.Fatal(err)
			}
			fs2 = fs
		}
		l2 := cleanerTestLog(t, fs2)
		if got := recString(logRecords(t, l2)); got != want {
			t.Fatalf("crash %v: reopened %s, want %s", crash, got, want)
		}
		if crash {
			l2.Close()
			break
		}
		fs, l = fs2, l2
	}
}

// TestCleanerEmptySegmentExpires: under compact,delete an empty segment
// a clean left does not stop time retention behind it.
func TestCleanerEmptySegmentExpires(t *testing.T) {
	now := int64(1000)
	l := openLog(t, NewMemFS(), Config{SegmentBytes: 150, IndexIntervalBytes: 1, RetentionMs: 10_000, NowMs: func() int64 { return now }})
	defer l.Close()
	appendAll(t, l, kvBatch(t, 0, 100, "a=1"), kvBatch(t, 1, 100, "a=2"), kvBatch(t, 2, 100, "a=3"), kvBatch(t, 3, 100, "b=1"))
	rollDirty(t, l)
	mustClean(t, NewCleaner(CleanerConfig{}), l, CompactConfig{}, now)
	if l.segs[0].size != 0 {
		t.Fatalf("want an empty first segment, %d bytes", l.segs[0].size)
	}
	n, err := l.ApplyRetention(now + 20_000)
	if err != nil || n < 2 || l.LogStartOffset() <= 2 {
		t.Fatalf("retention deleted %d segments (%v), log start %d", n, err, l.LogStartOffset())
	}
}

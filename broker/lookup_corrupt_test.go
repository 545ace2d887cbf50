package broker

import (
	"runtime"
	"strconv"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/verbatim-kafka/verbatim/kbatch"
	"github.com/verbatim-kafka/verbatim/kbatch/kbatchtest"
)

// mirrorBatch encodes recs as a batch at base compressed with codec, as a
// source would have stored it.
func mirrorBatch(t *testing.T, base, ts int64, codec kbatch.Codec, recs ...kbatch.Record) []byte {
	t.Helper()
	bt := kbatch.NewBatch(ts, recs...)
	bt.BaseOffset, bt.LeaderEpoch, bt.Attributes = base, 0, int16(codec)
	return kbatchtest.Encode(t, bt)
}

// Hole 3, read side: a mirror writer is trusted and its batches are stored
// untouched, so a batch whose gzip payload does not decode can be in the
// log; a timestamp lookup that must look into it answers INVALID_RECORD
// and logs the batch's offset, and the partition stays readable.
func TestTimestampLookupOverUndecodableBatch(t *testing.T) {
	fb := startFaultBroker(t)
	b := fb.testBroker
	createTopic(t, b, "m", 1, map[string]*string{"mirror.mode": sp("push")})
	const ts0 = 1_700_000_000_000
	good := mirrorBatch(t, 0, ts0, kbatch.CodecGzip, kbatch.Record{Value: []byte("a")}, kbatch.Record{OffsetDelta: 1, TimestampDelta: 1, Value: []byte("b")})
	bad := mirrorBatch(t, 2, ts0+10, kbatch.CodecGzip, kbatch.Record{Value: []byte(strings.Repeat("x", 200))})
	for i := kbatch.HeaderSize + 12; i < len(bad); i++ { // past the gzip header: the deflate stream
		bad[i] ^= 0x5a
	}
	kbatch.SetCRC(bad)
	if r := mirrorOne(t, b, "m", append(append([]byte(nil), good...), bad...), 0, -1); r.ErrorCode != 0 {
		t.Fatalf("mirror produce: code %d %v", r.ErrorCode, r.ErrorMessage)
	}
	// The good batch still answers.
	if p := listOffsetsPart(t, b, 9, "m", 0, ts0+1, 0); p.ErrorCode != 0 || p.Offset != 1 {
		t.Fatalf("lookup in the good batch: %+v", p)
	}
	p := listOffsetsPart(t, b, 9, "m", 0, ts0+5, 0)
	if p.ErrorCode != kerr.InvalidRecord.Code || p.Offset != -1 {
		t.Fatalf("lookup into the undecodable batch: code %d offset %d, want INVALID_RECORD", p.ErrorCode, p.Offset)
	}
	line := fb.oneLine(t, "level=ERROR", "cannot be decoded")
	for _, want := range []string{"topic=m", "partition=0", "offset=2", "client_id=raw"} {
		if !strings.Contains(line, want) {
			t.Errorf("the error line lacks %q: %s", want, line)
		}
	}
	if p := listOffsetsPart(t, b, 9, "m", 0, -3, 0); p.ErrorCode != kerr.InvalidRecord.Code {
		t.Fatalf("MAX_TIMESTAMP over the undecodable batch: code %d, want INVALID_RECORD", p.ErrorCode)
	}
	// The stored bytes are served as stored: consumers decide.
	if got := fetchAll(t, b, "m", 0, 0); got.ErrorCode != 0 || len(got.RecordBatches) != len(good)+len(bad) {
		t.Fatalf("fetch: code %d, %d bytes", got.ErrorCode, len(got.RecordBatches))
	}
	if n := fb.srv.decode.InUse(); n != 0 {
		t.Fatalf("%d decode budget bytes still held after the lookups", n)
	}
}

// A gzip bomb stored by a mirror writer: the lookup streams through it
// (the record it wants follows 64 MiB of zeros) without materialising the
// decompressed records.
func TestTimestampLookupStreamsThroughBomb(t *testing.T) {
	b := startBroker(t, t.TempDir(), nil)
	createTopic(t, b, "m", 1, map[string]*string{"mirror.mode": sp("push")})
	const ts0 = 1_700_000_000_000
	const inflated = 64 << 20
	bomb := mirrorBatch(t, 0, ts0, kbatch.CodecGzip,
		kbatch.Record{Value: make([]byte, inflated)},
		kbatch.Record{OffsetDelta: 1, TimestampDelta: 7, Value: []byte("after")})
	if len(bomb) > inflated/100 {
		t.Fatalf("the bomb is %d bytes compressed", len(bomb))
	}
	if r := mirrorOne(t, b, "m", bomb, 0, -1); r.ErrorCode != 0 {
		t.Fatalf("mirror produce: code %d %v", r.ErrorCode, r.ErrorMessage)
	}
	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	p := listOffsetsPart(t, b, 9, "m", 0, ts0+7, 0)
	runtime.ReadMemStats(&after)
	if p.ErrorCode != 0 || p.Offset != 1 || p.Timestamp != ts0+7 {
		t.Fatalf("lookup past the bomb's first record: %+v", p)
	}
	// Everything the process allocated during the lookup, the request
	// and response included: far below the 64 MiB the records inflate to.
	if grew := after.TotalAlloc - before.TotalAlloc; grew > inflated/8 {
		t.Fatalf("the lookup allocated %s bytes for a batch inflating to %d", strconv.FormatUint(grew, 10), inflated)
	}
}

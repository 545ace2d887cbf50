package kbatch

import (
	"bytes"
	"encoding/binary"
	"io"
	"runtime"
	"testing"
)

// rawBatch wraps a records section (payload) of codec c in a v2 header
// declaring count records, with a valid CRC.
func rawBatch(c Codec, payload []byte, count int32) []byte {
	b := make([]byte, HeaderSize, HeaderSize+len(payload))
	be := binary.BigEndian
	be.PutUint32(b[LengthOffset:], uint32(HeaderSize-LogOverhead+len(payload)))
	be.PutUint32(b[LeaderEpochOffset:], 0xffffffff)
	b[MagicOffset] = 2
	be.PutUint16(b[AttributesOffset:], uint16(c))
	be.PutUint32(b[LastOffsetDeltaOffset:], uint32(count-1))
	be.PutUint64(b[ProducerIDOffset:], ^uint64(0))
	be.PutUint16(b[ProducerEpochOffset:], 0xffff)
	be.PutUint32(b[BaseSequenceOffset:], 0xffffffff)
	be.PutUint32(b[RecordCountOffset:], uint32(count))
	b = append(b, payload...)
	SetCRC(b)
	return b
}

// allocatedDuring returns the heap bytes allocated while f ran
// (runtime.MemStats.TotalAlloc, exact: ReadMemStats stops the world and
// flushes every P's counters; runtime/metrics' cumulative counter was seen
// to attribute allocations made just before f to f): an upper bound of the
// heap growth f caused, its peak included, since what f frees it allocated.
func allocatedDuring(f func()) int64 {
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	before := m.TotalAlloc
	f()
	runtime.ReadMemStats(&m)
	return int64(m.TotalAlloc - before)
}

// walkAll reads every record (and, with Keep, its bytes).
func walkAll(b []byte, lim Limits) (int, error) {
	rr, err := NewRecordReader(b, lim)
	if err != nil {
		return 0, err
	}
	defer rr.Close()
	for n := 0; ; n++ {
		if _, err := rr.Next(); err != nil {
			if err == io.EOF {
				return n, nil
			}
			return n, err
		}
		if lim.Keep {
			if _, err := rr.Record(); err != nil {
				return n, err
			}
		}
	}
}

// fuzzSlack covers what a walk allocates beyond the decoder's working set:
// error values and their messages, record headers handed out by Record,
// runtime bookkeeping.
const fuzzSlack = 96 << 10

// fuzzLimits keep fuzzed bombs quick to refuse.
var fuzzLimits = Limits{MaxRecordBytes: 64 << 10, MaxBatchBytes: 512 << 10}

type fuzzInput struct {
	payload []byte
	count   uint16
	keep    bool
}

// fuzzSeeds are valid streams of c (small and window-crossing records),
// truncations, and bombs (highly compressible payloads far over the
// limits), as checked in under testdata/fuzz.
func fuzzSeeds(tb testing.TB, c Codec) []fuzzInput {
	var out []fuzzInput
	add := func(bomb bool, recs []Record) {
		p := encodeWith(tb, c, recs)[HeaderSize:]
		n := uint16(len(recs))
		out = append(out, fuzzInput{p, n, false}, fuzzInput{p[:len(p)/2], n, true})
		if !bomb {
			out = append(out, fuzzInput{p, n, true}, fuzzInput{p[:len(p)-1], n, false})
		}
	}
	phrase := bytes.Repeat([]byte("the leader epoch of partition 7 moved to 12; "), 1500) // over the window
	add(false, []Record{{Key: []byte("k"), Value: []byte("v"), Headers: []RecordHeader{{Key: "h", Value: []byte("x")}}}})
	add(false, []Record{{Value: phrase}, {OffsetDelta: 1, Key: textValue(300, 6), Value: textValue(2000, 7)}})
	add(true, []Record{{Value: make([]byte, 100<<10)}})                                                                                               // a record over MaxRecordBytes
	add(true, []Record{{Value: make([]byte, 60<<10)}, {OffsetDelta: 1, Value: make([]byte, 60<<10)}, {OffsetDelta: 2, Value: make([]byte, 500<<10)}}) // over MaxBatchBytes
	return out
}

// fuzzStream: whatever the payload, the reader never panics, fails on
// what WorkingSet refuses, and allocates no more than WorkingSet (plus a
// kept record and small change) while it walks the batch: the memory bound
// that makes decompression safe to run on hostile input.
func fuzzStream(f *testing.F, c Codec) {
	for _, in := range fuzzSeeds(f, c) {
		f.Add(in.payload, in.count, in.keep)
	}
	f.Fuzz(func(t *testing.T, payload []byte, count uint16, keep bool) {
		b := rawBatch(c, payload, int32(count))
		ws, wsErr := WorkingSet(b)
		lim := fuzzLimits
		lim.Keep = keep
		bound := ws + fuzzSlack
		if keep {
			bound += lim.MaxRecordBytes
		}
		var n int
		var err error
		walk := func() { n, err = walkAll(b, lim) }
		grown := allocatedDuring(walk)
		if wsErr != nil {
			if err == nil {
				t.Fatalf("WorkingSet refused the stream (%v) but the reader read %d records", wsErr, n)
			}
			return
		}
		if grown > bound {
			// Another goroutine of the fuzz worker may have allocated in
			// the window; an excess of the walk's own repeats, from
			// empty pools (the worst case) as before.
			runtime.GC()
			runtime.GC()
			grown = allocatedDuring(walk)
		}
		if grown > bound {
			t.Fatalf("%s: allocated %d bytes walking %d records (err %v), bound %d (working set %d)", c, grown, n, err, bound, ws)
		}
		if err == nil && n != int(count) {
			t.Fatalf("read %d records of %d without error", n, count)
		}
	})
}

func FuzzRecordReaderGzip(f *testing.F)   { fuzzStream(f, CodecGzip) }
func FuzzRecordReaderSnappy(f *testing.F) { fuzzStream(f, CodecSnappy) }
func FuzzRecordReaderLZ4(f *testing.F)    { fuzzStream(f, CodecLZ4) }
func FuzzRecordReaderZstd(f *testing.F)   { fuzzStream(f, CodecZstd) }

// A bomb per codec (16 MiB of zeros in 1 MiB records) walks within its
// working set, first with empty pools (decoders allocated) and again with
// warm ones, and the per-batch cap stops it once it is exceeded.
func TestWorkingSetBoundsHeap(t *testing.T) {
	var recs []Record
	for i := 0; i < 16; i++ {
		recs = append(recs, Record{OffsetDelta: int32(i), Value: make([]byte, 1<<20)})
	}
	for _, c := range compressedCodecs {
		raw := encodeWith(t, c, recs)
		ws, err := WorkingSet(raw)
		if err != nil {
			t.Fatal(err)
		}
		for round := 0; round < 2; round++ {
			var n int
			walk := func() { n, err = walkAll(raw, Limits{MaxBatchBytes: 64 << 20}) }
			grown := allocatedDuring(walk)
			if grown > ws+fuzzSlack { // another goroutine's allocation landed in the window?
				runtime.GC()
				runtime.GC()
				grown = allocatedDuring(walk)
			}
			if err != nil || n != len(recs) {
				t.Fatalf("%s: %d records, %v", c, n, err)
			}
			if grown > ws+fuzzSlack {
				t.Errorf("%s round %d: %d bytes allocated for a %d-byte compressed batch inflating to 16 MiB, working set %d", c, round, grown, len(raw), ws)
			}
		}
		if _, err := walkAll(raw, Limits{MaxBatchBytes: 8 << 20}); err == nil || !bytes.Contains([]byte(err.Error()), []byte("8388608")) {
			t.Errorf("%s: cap of 8 MiB: %v", c, err)
		}
	}
}

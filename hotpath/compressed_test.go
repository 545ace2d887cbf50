package hotpath

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/klauspost/compress/s2"
	"github.com/klauspost/compress/zstd"
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/verbatim-kafka/verbatim/budget"
	"github.com/verbatim-kafka/verbatim/internal/hostile"
	"github.com/verbatim-kafka/verbatim/kbatch"
	"github.com/verbatim-kafka/verbatim/kbatch/kbatchtest"
)

func codecBatch(t testing.TB, c kbatch.Codec, recs []kbatch.Record) []byte {
	b := kbatch.NewBatch(corpusNowMs, recs...)
	b.Attributes = int16(c)
	return kbatchtest.Encode(t, b)
}

// Poisoned batches of every codec (a valid header and CRC, a payload that
// is not valid for the codec; a valid stream of malformed records;
// records inflating past the per-batch cap; a record over
// max.decompressed.message.bytes) get the codes of docs/compat.md.
func TestCompressedPoisoned(t *testing.T) {
	recs := testRecords(5, 100, true)
	badRecords := append(kbatch.AppendRecord(nil, &recs[0]), 0x7e, 0x01) // a second record of 63 bytes that is not there
	var bomb []kbatch.Record
	for i := 0; i < 8; i++ {
		bomb = append(bomb, kbatch.Record{OffsetDelta: int32(i), TimestampDelta: int64(i), Value: make([]byte, 1<<20)})
	}
	big := []kbatch.Record{{Key: []byte("key"), Value: make([]byte, 4096)}}
	capped := withOpts(func(o *Options) { o.Topic.MaxDecompressedBatchBytes = 4 << 20 })
	perRecord := withOpts(func(o *Options) { o.Topic.MaxDecompressedRecordBytes = 512 })
	var cases []rejectCase
	for _, c := range hostile.Codecs {
		good := codecBatch(t, c, recs)
		z, err := kbatch.Compress(c, badRecords)
		if err != nil {
			t.Fatal(err)
		}
		cases = append(cases,
			rejectCase{name: c.String() + "-poisoned", set: hostile.WithRecords(good, hostile.Poison(c)), opts: normalOpts(), code: kerr.InvalidRecord, msg: "cannot decompress the " + c.String()},
			rejectCase{name: c.String() + "-truncated", set: hostile.WithRecords(good, good[kbatch.HeaderSize:len(good)-9]), opts: normalOpts(), code: kerr.InvalidRecord},
			rejectCase{name: c.String() + "-malformed-records", set: hostile.WithRecords(setCount(good, 2), z), opts: normalOpts(), code: kerr.InvalidRecord, msg: "record 1"},
			rejectCase{name: c.String() + "-bomb", set: codecBatch(t, c, bomb), opts: capped, code: kerr.MessageTooLarge, msg: "max.decompressed.batch.bytes"},
			rejectCase{name: c.String() + "-record-over-max-decompressed", set: codecBatch(t, c, big), opts: perRecord, code: kerr.InvalidRecord,
				msg: "Invalid record size: 4106 exceeds the configured maximum record size of 512."},
		)
	}
	// The bomb: about 1 MB of gzip inflating to 950 MiB, one record;
	// refused from its declared record size, before it is inflated.
	cases = append(cases, rejectCase{name: "gzip-bomb-950MiB", set: hostile.Batch(kbatch.CodecGzip, hostile.GzipBomb(950<<20), 1, corpusNowMs),
		opts: normalOpts(), code: kerr.MessageTooLarge, msg: "67108864"})
	checkRejects(t, cases)
	// As in Kafka, an uncompressed record is bounded by max.message.bytes
	// alone.
	var res Result
	if err := Validate(codecBatch(t, kbatch.CodecNone, big), perRecord, &res); err != nil {
		t.Fatalf("uncompressed record: %v", err)
	}
}

func withOpts(f func(o *Options)) *Options { o := normalOpts(); f(o); return o }

// setCount rewrites the record count and LastOffsetDelta (CRC fixed).
func setCount(b []byte, n int32) []byte {
	b = bytes.Clone(b)
	binary.BigEndian.PutUint32(b[kbatch.RecordCountOffset:], uint32(n))
	binary.BigEndian.PutUint32(b[kbatch.LastOffsetDeltaOffset:], uint32(n-1))
	kbatch.SetCRC(b)
	return b
}

// realEncoders compress a records section the way producers do: Java's
// xerial-framed snappy (32 KiB chunks), gzip, LZ4 frames and zstd-jni's
// frames (a declared 2 MiB window at level 3, not a single segment);
// librdkafka's raw snappy block; franz-go's zstd (64 KiB window, content
// size known) and pierrec LZ4 frames (4 MiB blocks).
func realEncoders(t *testing.T) map[string]func([]byte) []byte {
	comp := func(c kbatch.Codec) func([]byte) []byte {
		return func(p []byte) []byte {
			z, err := kbatch.Compress(c, p)
			if err != nil {
				t.Fatal(err)
			}
			return z
		}
	}
	// zstd-jni streams declare a window (2 MiB at level 3, whatever the
	// content) instead of making the frame one segment of its content
	// size: a frame with a window descriptor, declared as 2 MiB (a larger
	// window than the distances used is always valid).
	jniZstd, err := zstd.NewWriter(nil, zstd.WithSingleSegment(false), zstd.WithEncoderConcurrency(1))
	if err != nil {
		t.Fatal(err)
	}
	jni := func(p []byte) []byte {
		out := jniZstd.EncodeAll(p, nil)
		if out[4]&0x20 != 0 {
			t.Fatal("zstd frame without a window descriptor")
		}
		out[5] = (21 - 10) << 3 // Window_Descriptor: 2^21
		return out
	}
	franzZstd, err := zstd.NewWriter(nil, zstd.WithWindowSize(64<<10), zstd.WithEncoderConcurrency(1), zstd.WithZeroFrames(true))
	if err != nil {
		t.Fatal(err)
	}
	return map[string]func([]byte) []byte{
		"gzip":             comp(kbatch.CodecGzip),
		"snappy-xerial":    comp(kbatch.CodecSnappy),
		"snappy-raw":       func(p []byte) []byte { return s2.EncodeSnappy(nil, p) },
		"lz4":              comp(kbatch.CodecLZ4),
		"zstd-one-shot":    comp(kbatch.CodecZstd),
		"zstd-window-2MiB": jni,
		"zstd-franz-go":    func(p []byte) []byte { return franzZstd.EncodeAll(p, nil) },
	}
}

var encoderCodec = map[string]kbatch.Codec{
	"gzip": kbatch.CodecGzip, "snappy-xerial": kbatch.CodecSnappy, "snappy-raw": kbatch.CodecSnappy, "lz4": kbatch.CodecLZ4,
	"zstd-one-shot": kbatch.CodecZstd, "zstd-window-2MiB": kbatch.CodecZstd, "zstd-franz-go": kbatch.CodecZstd,
}

// Valid compressed batches from the encoders real producers use are
// accepted byte for byte (their MaxTimestamp is right, so nothing is
// patched), on ordinary and compacted topics, and the decode budget is
// back to zero afterwards.
func TestCompressedRealEncodersAccepted(t *testing.T) {
	recs := testRecords(300, 200, true)
	var section []byte
	for i := range recs {
		section = kbatch.AppendRecord(section, &recs[i])
	}
	plain := codecBatch(t, kbatch.CodecNone, recs)
	dec := budget.New(64 << 20)
	for name, enc := range realEncoders(t) {
		b := hostile.WithRecords(plain, enc(section))
		binary.BigEndian.PutUint16(b[kbatch.AttributesOffset:], uint16(encoderCodec[name]))
		kbatch.SetCRC(b)
		for _, compacted := range []bool{false, true} {
			o := withOpts(func(o *Options) { o.Topic.Compacted = compacted; o.Decode = dec })
			orig := bytes.Clone(b)
			var res Result
			if err := Validate(b, o, &res); err != nil {
				t.Fatalf("%s (compacted %v): %v", name, compacted, err)
			}
			if !bytes.Equal(b, orig) || res.Patched || res.Records != 300 || res.MaxTimestamp != corpusNowMs+299 || res.OffsetOfMaxTimestamp != 299 {
				t.Fatalf("%s: changed %v, result %+v", name, !bytes.Equal(b, orig), res)
			}
			if dec.InUse() != 0 {
				t.Fatalf("%s: %d decode bytes still charged", name, dec.InUse())
			}
		}
	}
}

// The decoder's working set is charged to the decode budget: a batch
// whose working set is over the whole budget is MESSAGE_TOO_LARGE; with
// the budget held by others the validation waits (the budget counts the
// wait) and its request context ends it with REQUEST_TIMED_OUT.
func TestCompressedChargesDecodeBudget(t *testing.T) {
	b := codecBatch(t, kbatch.CodecGzip, testRecords(10, 100, true))
	ws, err := kbatch.WorkingSet(b)
	if err != nil || ws <= 0 {
		t.Fatal(ws, err)
	}
	small := budget.New(ws - 1)
	var res Result
	err = Validate(bytes.Clone(b), withOpts(func(o *Options) { o.Decode = small }), &res)
	if !errors.Is(err, kerr.MessageTooLarge) || !strings.Contains(err.Error(), "decode budget") {
		t.Fatalf("working set over the budget: %v", err)
	}
	full := budget.New(ws)
	if err := full.Acquire(context.Background(), ws); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	err = Validate(bytes.Clone(b), withOpts(func(o *Options) { o.Decode, o.Ctx = full, ctx }), &res)
	if !errors.Is(err, kerr.RequestTimedOut) || full.Waits() != 1 {
		t.Fatalf("budget held by others: %v, %d waits", err, full.Waits())
	}
	full.Release(ws)
	if err := Validate(bytes.Clone(b), withOpts(func(o *Options) { o.Decode = full }), &res); err != nil || full.InUse() != 0 {
		t.Fatalf("with the budget free: %v, %d in use", err, full.InUse())
	}
	// Uncompressed batches charge nothing: they are read in place.
	if err := full.Acquire(context.Background(), ws); err != nil {
		t.Fatal(err)
	}
	if err := Validate(codecBatch(t, kbatch.CodecNone, testRecords(3, 10, true)), withOpts(func(o *Options) { o.Decode = full }), &res); err != nil || full.Waits() != 1 {
		t.Fatalf("uncompressed: %v, %d waits", err, full.Waits())
	}
}

// BenchmarkValidateCompressed is normal-mode validation of compressed
// batches (decompressing and walking every record, the decode budget
// charged) per codec and size, in bytes of the records decompressed
// (SetBytes), for comparison with BenchmarkValidate's uncompressed rows.
func BenchmarkValidateCompressed(b *testing.B) {
	for _, c := range []kbatch.Codec{kbatch.CodecGzip, kbatch.CodecSnappy, kbatch.CodecLZ4, kbatch.CodecZstd} {
		for _, n := range []int{16, 256, 1024} { // records of about 1 KiB
			recs := make([]kbatch.Record, n)
			raw := 0
			for i := range recs {
				v := bytes.Repeat([]byte(fmt.Sprintf("offset=%d epoch=%d leader=%d ", i*7919%1000, i%13, i%3)), 60)[:1000]
				recs[i] = kbatch.Record{OffsetDelta: int32(i), TimestampDelta: int64(i), Key: []byte(fmt.Sprintf("k%d", i)), Value: v}
				raw += len(v) + 8
			}
			batch := codecBatch(b, c, recs)
			b.Run(fmt.Sprintf("%s/records=%d", c, n), func(b *testing.B) {
				o := withOpts(func(o *Options) { o.Decode = budget.New(64 << 20) })
				var res Result
				b.SetBytes(int64(raw))
				b.ReportAllocs()
				for i := 0; i < b.N; i++ {
					if err := Validate(batch, o, &res); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

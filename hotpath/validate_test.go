package hotpath

import (
	"bytes"
	"encoding/binary"
	"errors"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/verbatim-kafka/verbatim/kbatch"
	"github.com/verbatim-kafka/verbatim/kbatch/kbatchtest"
)

func verbatimOpts() *Options { return &Options{Mode: Verbatim, NowMs: corpusNowMs} }

func normalOpts() *Options {
	return &Options{Mode: Normal, Topic: DefaultTopicConfig(), ProduceVersion: 11, NowMs: corpusNowMs}
}

func TestVerbatimAcceptsCorpusUnchanged(t *testing.T) {
	for _, e := range buildCorpus(t) {
		t.Run(e.name, func(t *testing.T) {
			b := withBase(e.b, 1000, 7)
			orig := append([]byte(nil), b...)
			var res Result
			if err := Validate(b, verbatimOpts(), &res); err != nil {
				t.Fatalf("rejected: %v", err)
			}
			if !bytes.Equal(b, orig) {
				t.Fatal("verbatim mode changed the batch bytes")
			}
			h, _ := kbatch.ParseHeader(b)
			if res.Batches != 1 || res.FirstOffset != 1000 || res.LastOffset != h.LastOffset() ||
				res.Records != int64(h.RecordCount) || res.Bytes != len(b) || res.MaxTimestamp != h.MaxTimestamp {
				t.Fatalf("result %+v for header %+v", res, h)
			}
		})
	}
}

func TestVerbatimWholeCorpusAsOneSet(t *testing.T) {
	entries := buildCorpus(t)
	set := verbatimSet(entries, 5)
	orig := append([]byte(nil), set...)
	var res Result
	if err := Validate(set, verbatimOpts(), &res); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(set, orig) {
		t.Fatal("set changed")
	}
	if res.Batches != len(entries) || res.FirstOffset != 5 || res.Bytes != len(set) {
		t.Fatalf("result %+v, want %d batches", res, len(entries))
	}
	// The summary's offsets and largest epoch are the batches' (verbatimSet
	// gives batch i the epoch i/4).
	last, maxEpoch := int64(-1), int32(-1)
	for it := kbatch.Batches(set); it.Next(); {
		b := it.Batch()
		last = kbatch.BaseOffset(b) + int64(kbatch.LastOffsetDelta(b))
		maxEpoch = max(maxEpoch, kbatch.LeaderEpoch(b))
	}
	if res.LastOffset != last || res.MaxLeaderEpoch != maxEpoch || maxEpoch != int32((len(entries)-1)/4) {
		t.Fatalf("last offset %d, max epoch %d; batches say %d, %d", res.LastOffset, res.MaxLeaderEpoch, last, maxEpoch)
	}
	if err := Validate(entries[0].b, &Options{Mode: Normal, Topic: DefaultTopicConfig(), NowMs: corpusNowMs}, &res); err == nil && res.MaxLeaderEpoch != -1 {
		t.Fatalf("normal mode max epoch %d, want -1", res.MaxLeaderEpoch)
	}
}

func TestNormalAcceptsClientShapes(t *testing.T) {
	for _, e := range buildCorpus(t) {
		if !e.client {
			continue
		}
		t.Run(e.name, func(t *testing.T) {
			b := append([]byte(nil), e.b...)
			var res Result
			if err := Validate(b, normalOpts(), &res); err != nil {
				t.Fatalf("rejected: %v", err)
			}
			h, _ := kbatch.ParseHeader(b)
			if res.Patched {
				t.Fatal("an honest CreateTime batch must not be patched")
			}
			if res.Records != int64(h.RecordCount) || res.LastOffset != int64(h.LastOffsetDelta) || res.LogAppendTimeMs != -1 {
				t.Fatalf("result %+v", res)
			}
			if !bytes.Equal(b, e.b) {
				t.Fatal("an accepted, unpatched batch was modified")
			}
		})
	}
}

func TestNormalLogAppendTimePatchesMaxTimestampAndCRC(t *testing.T) {
	for _, e := range buildCorpus(t) {
		if !e.client {
			continue
		}
		b := append([]byte(nil), e.b...)
		o := normalOpts()
		o.Topic.LogAppendTime = true
		o.NowMs = corpusNowMs + 777
		var res Result
		if err := Validate(b, o, &res); err != nil {
			t.Fatalf("%s: %v", e.name, err)
		}
		if !res.Patched || res.LogAppendTimeMs != o.NowMs || kbatch.MaxTimestamp(b) != o.NowMs {
			t.Fatalf("%s: result %+v, max %d", e.name, res, kbatch.MaxTimestamp(b))
		}
		if kbatch.Attributes(b)&kbatch.TimestampTypeBit == 0 {
			t.Fatalf("%s: LogAppendTime bit not set", e.name)
		}
		if kbatch.CRC(b) != kbatch.StoredCRC(b) {
			t.Fatalf("%s: CRC not recomputed", e.name)
		}
		if !bytes.Equal(b[kbatch.HeaderSize:], e.b[kbatch.HeaderSize:]) {
			t.Fatalf("%s: records changed", e.name)
		}
	}
}

func TestNormalFixesLyingMaxTimestamp(t *testing.T) {
	bt := kbatch.NewBatch(corpusNowMs, testRecords(4, 10, true)...)
	bt.MaxTimestamp = corpusNowMs + 100 // records say corpusNowMs+3
	b := kbatchtest.Encode(t, bt)
	var res Result
	if err := Validate(b, normalOpts(), &res); err != nil {
		t.Fatal(err)
	}
	if !res.Patched || kbatch.MaxTimestamp(b) != corpusNowMs+3 || res.MaxTimestamp != corpusNowMs+3 || res.OffsetOfMaxTimestamp != 3 {
		t.Fatalf("res %+v max %d", res, kbatch.MaxTimestamp(b))
	}
	if kbatch.CRC(b) != kbatch.StoredCRC(b) {
		t.Fatal("CRC not recomputed")
	}
}

// corrupt returns a copy of b after f, with the CRC recomputed when fixCRC.
func corrupt(b []byte, fixCRC bool, f func(b []byte) []byte) []byte {
	c := f(append([]byte(nil), b...))
	if fixCRC {
		kbatch.SetCRC(c)
	}
	return c
}

func setU32(off int, v uint32) func([]byte) []byte {
	return func(b []byte) []byte { binary.BigEndian.PutUint32(b[off:], v); return b }
}

func setU16(off int, v uint16) func([]byte) []byte {
	return func(b []byte) []byte { binary.BigEndian.PutUint16(b[off:], v); return b }
}

func setU64(off int, v uint64) func([]byte) []byte {
	return func(b []byte) []byte { binary.BigEndian.PutUint64(b[off:], v); return b }
}

type rejectCase struct {
	name string
	set  []byte
	opts *Options
	code *kerr.Error
	// records, when set, is the per-record error indices Kafka reports.
	records []int32
	msg     string
}

func checkRejects(t *testing.T, cases []rejectCase) {
	t.Helper()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var res Result
			err := Validate(c.set, c.opts, &res)
			if err == nil {
				t.Fatalf("accepted, want %s", c.code.Message)
			}
			if !errors.Is(err, c.code) {
				t.Fatalf("got %v, want %s", err, c.code.Message)
			}
			var he *Error
			if !errors.As(err, &he) || he.Code != c.code.Code {
				t.Fatalf("not a *hotpath.Error with code %d: %#v", c.code.Code, err)
			}
			if c.msg != "" && !strings.Contains(err.Error(), c.msg) {
				t.Fatalf("message %q does not mention %q", err.Error(), c.msg)
			}
			var idx []int32
			for _, r := range he.Records {
				idx = append(idx, r.Index)
			}
			if len(idx) != len(c.records) {
				t.Fatalf("record errors %v, want %v", idx, c.records)
			}
			for i := range idx {
				if idx[i] != c.records[i] {
					t.Fatalf("record errors %v, want %v", idx, c.records)
				}
			}
		})
	}
}

func TestVerbatimRejections(t *testing.T) {
	corpus := buildCorpus(t)
	byName := map[string][]byte{}
	for _, e := range corpus {
		byName[e.name] = withBase(e.b, 100, 1)
	}
	plain := byName["plain-none"]
	commit := byName["marker-commit"]
	v := verbatimOpts()
	marker := func(typ int16, value []byte, attrs int16, pid int64) []byte {
		b := kbatch.NewBatch(corpusNowMs, controlRecord(typ, value))
		b.Attributes = attrs
		b.ProducerID, b.ProducerEpoch = pid, 0
		return withBase(kbatchtest.Encode(t, b), 100, 1)
	}
	keyVersion1 := func() []byte {
		b := kbatch.NewBatch(corpusNowMs, kbatch.Record{Key: []byte{0, 1, 0, 1}, Value: kbatch.EndTxnMarkerValue(1)})
		b.Attributes = kbatch.ControlBit | kbatch.TransactionalBit
		b.ProducerID = 5
		return withBase(kbatchtest.Encode(t, b), 100, 1)
	}()
	twoRecordControl := func() []byte {
		b := kbatch.NewBatch(corpusNowMs, controlRecord(1, kbatch.EndTxnMarkerValue(1)), controlRecord(1, kbatch.EndTxnMarkerValue(1)))
		b.Attributes = kbatch.ControlBit | kbatch.TransactionalBit
		b.ProducerID = 5
		return withBase(kbatchtest.Encode(t, b), 100, 1)
	}()
	cases := []rejectCase{
		{name: "empty-set", set: nil, opts: v, code: kerr.InvalidRecord},
		{name: "crc", set: corrupt(plain, false, func(b []byte) []byte { b[len(b)-1] ^= 1; return b }), opts: v, code: kerr.CorruptMessage, msg: "crc"},
		{name: "crc-attributes", set: corrupt(plain, false, setU16(kbatch.AttributesOffset, 1)), opts: v, code: kerr.CorruptMessage},
		{name: "magic-1", set: corrupt(plain, false, func(b []byte) []byte { b[kbatch.MagicOffset] = 1; return b }), opts: v, code: kerr.UnsupportedForMessageFormat},
		{name: "magic-0", set: corrupt(plain, false, func(b []byte) []byte { b[kbatch.MagicOffset] = 0; return b }), opts: v, code: kerr.UnsupportedForMessageFormat},
		{name: "magic-3", set: corrupt(plain, false, func(b []byte) []byte { b[kbatch.MagicOffset] = 3; return b }), opts: v, code: kerr.CorruptMessage},
		{name: "magic-negative", set: corrupt(plain, false, func(b []byte) []byte { b[kbatch.MagicOffset] = 0xff; return b }), opts: v, code: kerr.CorruptMessage},
		{name: "length-13", set: corrupt(plain, false, setU32(kbatch.LengthOffset, 13)), opts: v, code: kerr.CorruptMessage},
		{name: "length-under-header", set: corrupt(plain, false, func(b []byte) []byte { binary.BigEndian.PutUint32(b[8:], 40); return b[:52] }), opts: v, code: kerr.CorruptMessage},
		{name: "truncated", set: plain[:len(plain)-1], opts: v, code: kerr.CorruptMessage},
		{name: "trailing-bytes", set: append(append([]byte(nil), plain...), 0, 0, 0), opts: v, code: kerr.CorruptMessage},
		{name: "codec-5", set: corrupt(plain, true, setU16(kbatch.AttributesOffset, 5)), opts: v, code: kerr.InvalidRecord},
		{name: "negative-base", set: corrupt(plain, false, setU64(0, ^uint64(0))), opts: v, code: kerr.InvalidRecord},
		{name: "negative-lod", set: corrupt(plain, true, setU32(kbatch.LastOffsetDeltaOffset, 0xffffffff)), opts: v, code: kerr.InvalidRecord},
		{name: "offset-overflow", set: corrupt(plain, false, setU64(0, 1<<63-2)), opts: v, code: kerr.InvalidRecord},
		{name: "count-above-range", set: corrupt(plain, true, setU32(kbatch.RecordCountOffset, 6)), opts: v, code: kerr.InvalidRecord},
		{name: "count-negative", set: corrupt(plain, true, setU32(kbatch.RecordCountOffset, 0xffffffff)), opts: v, code: kerr.InvalidRecord},
		{name: "out-of-order", set: append(append([]byte(nil), plain...), plain...), opts: v, code: kerr.InvalidRecord, msg: "previous batch"},
		{name: "transactional-no-pid", set: corrupt(plain, true, setU16(kbatch.AttributesOffset, uint16(kbatch.TransactionalBit))), opts: v, code: kerr.InvalidRecord},
		{name: "control-compressed", set: corrupt(commit, true, setU16(kbatch.AttributesOffset, uint16(kbatch.ControlBit|kbatch.TransactionalBit|1))), opts: v, code: kerr.InvalidRecord},
		{name: "control-two-records", set: twoRecordControl, opts: v, code: kerr.InvalidRecord},
		{name: "control-lod-1", set: corrupt(commit, true, setU32(kbatch.LastOffsetDeltaOffset, 1)), opts: v, code: kerr.InvalidRecord},
		{name: "control-type-3", set: marker(3, kbatch.EndTxnMarkerValue(1), kbatch.ControlBit|kbatch.TransactionalBit, 5), opts: v, code: kerr.InvalidRecord, msg: "type 3"},
		{name: "control-type-99", set: marker(99, kbatch.EndTxnMarkerValue(1), kbatch.ControlBit|kbatch.TransactionalBit, 5), opts: v, code: kerr.InvalidRecord},
		{name: "control-key-version-1", set: keyVersion1, opts: v, code: kerr.InvalidRecord, msg: "key version"},
		{name: "control-short-key", set: func() []byte {
			b := kbatch.NewBatch(corpusNowMs, kbatch.Record{Key: []byte{0, 0, 0}, Value: kbatch.EndTxnMarkerValue(1)})
			b.Attributes = kbatch.ControlBit | kbatch.TransactionalBit
			b.ProducerID = 5
			return withBase(kbatchtest.Encode(t, b), 100, 1)
		}(), opts: v, code: kerr.InvalidRecord},
		{name: "marker-short-value", set: marker(1, []byte{0, 0, 0}, kbatch.ControlBit|kbatch.TransactionalBit, 5), opts: v, code: kerr.InvalidRecord},
		{name: "marker-null-value", set: marker(0, nil, kbatch.ControlBit|kbatch.TransactionalBit, 5), opts: v, code: kerr.InvalidRecord},
		{name: "marker-not-transactional", set: marker(1, kbatch.EndTxnMarkerValue(1), kbatch.ControlBit, 5), opts: v, code: kerr.InvalidRecord},
		{name: "marker-no-producer", set: marker(1, kbatch.EndTxnMarkerValue(1), kbatch.ControlBit|kbatch.TransactionalBit, -1), opts: v, code: kerr.InvalidRecord},
		{name: "pid-reset-bad-value", set: marker(7, []byte{0, 0, 9, 'a'}, kbatch.ControlBit, -1), opts: v, code: kerr.InvalidRecord, msg: "MIRROR_PID_RESET"},
		{name: "pid-reset-trailing", set: marker(7, append(kbatch.MirrorPidResetValue("x"), 1), kbatch.ControlBit, -1), opts: v, code: kerr.InvalidRecord},
	}
	checkRejects(t, cases)
}

func TestNormalRejections(t *testing.T) {
	plainB := kbatch.NewBatch(corpusNowMs, testRecords(3, 10, true)...)
	plain := kbatchtest.Encode(t, plainB)
	n := normalOpts()
	withOpts := func(f func(o *Options)) *Options { o := normalOpts(); f(o); return o }
	enc := func(f func(b *kbatch.Batch)) []byte {
		b := kbatch.NewBatch(corpusNowMs, testRecords(3, 10, true)...)
		f(&b)
		return kbatchtest.Encode(t, b)
	}
	unkeyed := enc(func(b *kbatch.Batch) { b.Records[1].Key = nil })
	zstd := enc(func(b *kbatch.Batch) { b.Attributes = int16(kbatch.CodecZstd) })
	gzipUnkeyed := enc(func(b *kbatch.Batch) {
		b.Attributes = int16(kbatch.CodecGzip)
		b.Records[0].Key = nil
		b.Records[2].Key = nil
	})
	future := enc(func(b *kbatch.Batch) { b.Records[2].TimestampDelta = 3600001 })
	past := enc(func(b *kbatch.Batch) { b.Records[0].TimestampDelta = -10_000 })
	lz4Future := enc(func(b *kbatch.Batch) { b.Attributes = int16(kbatch.CodecLZ4); b.Records[2].TimestampDelta = 3600001 })
	lat := enc(func(b *kbatch.Batch) { b.Attributes = kbatch.TimestampTypeBit; b.MaxTimestamp = corpusNowMs })
	latNoTS := corrupt(enc(func(b *kbatch.Batch) { b.Attributes = kbatch.TimestampTypeBit | int16(kbatch.CodecSnappy) }), true,
		setU64(kbatch.MaxTimestampOffset, ^uint64(0)))
	control := enc(func(b *kbatch.Batch) {
		b.Attributes = kbatch.ControlBit | kbatch.TransactionalBit
		b.ProducerID = 3
		b.BaseSequence = 0
		b.Records = []kbatch.Record{controlRecord(1, kbatch.EndTxnMarkerValue(0))}
	})
	// A record whose header count points past its end: structure error.
	badRecord := corrupt(plain, true, func(b []byte) []byte {
		// The last record has no headers; its header count is its last byte.
		b[len(b)-1] = 0x7e
		return b
	})
	gapped := enc(func(b *kbatch.Batch) { b.Attributes = int16(kbatch.CodecGzip); b.Records[1].OffsetDelta = 2 })

	cases := []rejectCase{
		{name: "empty-set", set: []byte{}, opts: n, code: kerr.InvalidRecord, msg: "at least one record batch"},
		{name: "partial", set: plain[:len(plain)-3], opts: n, code: kerr.InvalidRecord},
		{name: "two-batches", set: append(append([]byte(nil), plain...), plain...), opts: n, code: kerr.InvalidRecord, msg: "exactly one"},
		{name: "magic-1", set: corrupt(plain, false, func(b []byte) []byte { b[kbatch.MagicOffset] = 1; return b }), opts: n, code: kerr.InvalidRecord, msg: "magic"},
		{name: "magic-5", set: corrupt(plain, false, func(b []byte) []byte { b[kbatch.MagicOffset] = 5; return b }), opts: n, code: kerr.CorruptMessage},
		{name: "length-small", set: corrupt(plain, false, setU32(kbatch.LengthOffset, 2)), opts: n, code: kerr.CorruptMessage},
		{name: "base-offset", set: withBase(plain, 10, -1), opts: n, code: kerr.InvalidRecord, msg: "baseOffset"},
		{name: "crc", set: corrupt(plain, false, setU64(kbatch.MaxTimestampOffset, 1)), opts: n, code: kerr.CorruptMessage},
		{name: "too-large", set: plain, opts: withOpts(func(o *Options) { o.Topic.MaxMessageBytes = int32(len(plain) - 1) }), code: kerr.MessageTooLarge},
		{name: "zstd-v6", set: zstd, opts: withOpts(func(o *Options) { o.ProduceVersion = 6 }), code: kerr.UnsupportedCompressionType},
		{name: "codec-6", set: corrupt(plain, true, setU16(kbatch.AttributesOffset, 6)), opts: n, code: kerr.InvalidRecord},
		{name: "lod-negative", set: corrupt(plain, true, setU32(kbatch.LastOffsetDeltaOffset, 0xffffffff)), opts: n, code: kerr.InvalidRecord, msg: "offset range"},
		{name: "count-zero", set: corrupt(plain, true, setU32(kbatch.RecordCountOffset, 0)), opts: n, code: kerr.InvalidRecord, msg: "reported count"},
		{name: "count-mismatch", set: corrupt(plain, true, setU32(kbatch.LastOffsetDeltaOffset, 5)), opts: n, code: kerr.InvalidRecord, msg: "inconsistent"},
		{name: "count-more-than-records", set: corrupt(plain, true, func(b []byte) []byte {
			binary.BigEndian.PutUint32(b[kbatch.LastOffsetDeltaOffset:], 3)
			binary.BigEndian.PutUint32(b[kbatch.RecordCountOffset:], 4)
			return b
		}), opts: n, code: kerr.InvalidRecord},
		{name: "count-fewer-than-records", set: corrupt(plain, true, func(b []byte) []byte {
			binary.BigEndian.PutUint32(b[kbatch.LastOffsetDeltaOffset:], 1)
			binary.BigEndian.PutUint32(b[kbatch.RecordCountOffset:], 2)
			return b
		}), opts: n, code: kerr.InvalidRecord, msg: "remain"},
		{name: "control", set: control, opts: n, code: kerr.InvalidRecord, msg: "control"},
		{name: "sequence", set: corrupt(plain, true, setU64(kbatch.ProducerIDOffset, 7)), opts: n, code: kerr.InvalidRecord, msg: "sequence"},
		{name: "transactional-no-pid", set: corrupt(plain, true, setU16(kbatch.AttributesOffset, uint16(kbatch.TransactionalBit))), opts: n, code: kerr.InvalidRecord},
		{name: "record-structure", set: badRecord, opts: n, code: kerr.InvalidRecord, msg: "record 2"},
		{name: "compacted-no-key", set: unkeyed, opts: withOpts(func(o *Options) { o.Topic.Compacted = true }), code: kerr.InvalidRecord, records: []int32{1}},
		{name: "compacted-no-key-gzip", set: gzipUnkeyed, opts: withOpts(func(o *Options) { o.Topic.Compacted = true }), code: kerr.InvalidRecord, records: []int32{0, 2}},
		{name: "timestamp-future", set: future, opts: n, code: kerr.InvalidTimestamp, records: []int32{2}},
		{name: "timestamp-past", set: past, opts: withOpts(func(o *Options) { o.Topic.TimestampBeforeMaxMs = 5000 }), code: kerr.InvalidTimestamp, records: []int32{0}},
		// Compressed batches are walked record by record, as Kafka does.
		{name: "timestamp-future-lz4", set: lz4Future, opts: n, code: kerr.InvalidTimestamp, records: []int32{2}},
		{name: "lat-from-client-on-lat-topic", set: lat, opts: withOpts(func(o *Options) { o.Topic.LogAppendTime = true }), code: kerr.InvalidTimestamp, records: []int32{0, 1, 2}},
		{name: "lat-without-timestamp", set: latNoTS, opts: n, code: kerr.InvalidTimestamp, records: []int32{0, 1, 2}},
		{name: "compressed-offset-gap", set: gapped, opts: n, code: kerr.InvalidRecord, msg: "offset delta"},
		{name: "compressed-offset-gap-compacted", set: gapped, opts: withOpts(func(o *Options) { o.Topic.Compacted = true }), code: kerr.InvalidRecord, msg: "offset delta"},
	}
	checkRejects(t, cases)
}

// A LogAppendTime-stamped client batch on a CreateTime topic is accepted by
// Kafka when its MaxTimestamp is in range, and rewritten as CreateTime.
func TestNormalClientLogAppendTimeOnCreateTimeTopic(t *testing.T) {
	bt := kbatch.NewBatch(corpusNowMs, testRecords(2, 10, true)...)
	bt.Attributes = kbatch.TimestampTypeBit | int16(kbatch.CodecGzip)
	bt.MaxTimestamp = corpusNowMs + 50
	b := kbatchtest.Encode(t, bt)
	var res Result
	if err := Validate(b, normalOpts(), &res); err != nil {
		t.Fatal(err)
	}
	if !res.Patched || kbatch.Attributes(b)&kbatch.TimestampTypeBit != 0 || kbatch.MaxTimestamp(b) != corpusNowMs+50 {
		t.Fatalf("res %+v attrs %x", res, kbatch.Attributes(b))
	}
	if kbatch.CRC(b) != kbatch.StoredCRC(b) {
		t.Fatal("CRC")
	}
}

func TestErrorUnwrapsToKerr(t *testing.T) {
	err := error(rejectf(codeCorruptMessage, 3, "x"))
	if !errors.Is(err, kerr.CorruptMessage) || errors.Is(err, kerr.InvalidRecord) {
		t.Fatal("errors.Is mapping")
	}
	if !strings.Contains(err.Error(), "CORRUPT_MESSAGE") || !strings.Contains(err.Error(), "batch 3") {
		t.Fatal(err.Error())
	}
	for code, want := range map[int16]*kerr.Error{
		codeCorruptMessage: kerr.CorruptMessage, codeMessageTooLarge: kerr.MessageTooLarge,
		codeInvalidTimestamp: kerr.InvalidTimestamp, codeUnsupportedForMessageFormat: kerr.UnsupportedForMessageFormat,
		codeUnsupportedCompressionType: kerr.UnsupportedCompressionType, codeInvalidRecord: kerr.InvalidRecord,
	} {
		if want.Code != code {
			t.Fatalf("code %d is %s (%d) in kerr", code, want.Message, want.Code)
		}
	}
}

func TestVarints(t *testing.T) {
	for _, v := range []int64{0, 1, -1, 63, -64, 64, 1 << 20, -(1 << 30), 1<<31 - 1, -1 << 31} {
		b := binary.AppendVarint(nil, v)
		got, n := readVarint(b)
		if n != len(b) || int64(got) != v {
			t.Fatalf("varint %d: got %d (%d bytes of %d)", v, got, n, len(b))
		}
		got64, n := readVarlong(b)
		if n != len(b) || got64 != v {
			t.Fatalf("varlong %d: got %d", v, got64)
		}
	}
	for _, v := range []int64{1 << 40, -1 << 62, 1<<63 - 1, -1 << 63} {
		b := binary.AppendVarint(nil, v)
		if got, n := readVarlong(b); n != len(b) || got != v {
			t.Fatalf("varlong %d: got %d", v, got)
		}
	}
	if _, n := readVarint([]byte{0x80, 0x80, 0x80, 0x80, 0x10}); n != 0 {
		t.Fatal("5-byte varint with bits past 32 accepted")
	}
	if _, n := readVarint([]byte{0x80, 0x80, 0x80, 0x80, 0x80, 0x01}); n != 0 {
		t.Fatal("6-byte varint accepted")
	}
	if _, n := readVarint([]byte{0x80}); n != 0 {
		t.Fatal("truncated varint accepted")
	}
}

package main

import (
	"bytes"
	"encoding/binary"
	"math"
	"reflect"
	"testing"

	"github.com/verbatim-kafka/verbatim/kbatch"
	"github.com/verbatim-kafka/verbatim/kbatch/kbatchtest"
	"github.com/verbatim-kafka/verbatim/policies/internal/wasmjudge"
	"github.com/verbatim-kafka/verbatim/policies/sdk"
)

// judgeBoth runs the Go reference implementation natively and the built-in
// module (policy.wat, as committed in policies/builtin) in the host, and
// fails unless both give the same verdicts with the same reasons; it
// returns them. Every vector below therefore checks both.
func judgeBoth(t testing.TB, c *sdk.Context, set []byte) ([]sdk.Rejection, error) {
	t.Helper()
	goRs, goErr := sdk.Judge(&policy, c, "t", nil, set)
	wasmRs, wasmErr := wasmjudge.Judge(t, "control-records", c, set)
	if (goErr == nil) != (wasmErr == nil) {
		t.Fatalf("Go reference error %v, module error %v", goErr, wasmErr)
	}
	if !reflect.DeepEqual(goRs, wasmRs) {
		t.Fatalf("Go reference and module disagree:\n  Go:     %+v\n  module: %+v", goRs, wasmRs)
	}
	return goRs, goErr
}

func ctl(t testing.TB, mod func(*kbatch.Batch)) []byte {
	b := kbatch.NewBatch(1, kbatch.Record{Key: kbatch.ControlKey(kbatch.ControlCommit), Value: kbatch.EndTxnMarkerValue(2)})
	b.Attributes = kbatch.ControlBit | kbatch.TransactionalBit
	b.ProducerID, b.ProducerEpoch = 12, 1
	mod(&b)
	return kbatchtest.Encode(t, b)
}

func TestControlRecordsAccepts(t *testing.T) {
	mirror := &sdk.Context{Mode: sdk.ModePush, State: sdk.StateMirroring, LastBatchEpoch: -1}
	cases := map[string]func(*kbatch.Batch){
		"commit without open txn (start compacted away)": func(*kbatch.Batch) {},
		"abort":                   func(b *kbatch.Batch) { b.Records[0].Key = kbatch.ControlKey(kbatch.ControlAbort) },
		"tv2 marker bumped epoch": func(b *kbatch.Batch) { b.ProducerEpoch = 32000 },
		"emptied by compaction": func(b *kbatch.Batch) {
			b.Records, b.LastOffsetDelta, b.Attributes = nil, 0, b.Attributes|kbatch.DeleteHorizonBit
		},
		"log append time":          func(b *kbatch.Batch) { b.Attributes |= kbatch.TimestampTypeBit },
		"longer marker value (v1)": func(b *kbatch.Batch) { b.Records[0].Value = []byte{0, 1, 0, 0, 0, 2, 9, 9} },
		"key version 1":            func(b *kbatch.Batch) { b.Records[0].Key = []byte{0, 1, 0, 1} },
		"mirror pid reset barrier": func(b *kbatch.Batch) {
			b.Records[0] = kbatch.Record{Key: kbatch.ControlKey(kbatch.ControlMirrorPidReset), Value: kbatch.MirrorPidResetValue("src-cluster")}
			b.Attributes, b.ProducerID, b.ProducerEpoch = kbatch.ControlBit, -1, -1
		},
	}
	for name, mod := range cases {
		if rs, err := judgeBoth(t, mirror, ctl(t, mod)); err != nil || rs != nil {
			t.Errorf("%s: rejected %+v %v", name, rs, err)
		}
	}
}

func TestControlRecordsRejects(t *testing.T) {
	mirror := &sdk.Context{Mode: sdk.ModePush, State: sdk.StateMirroring, LastBatchEpoch: -1}
	cases := map[string]func(*kbatch.Batch){
		"unknown type":        func(b *kbatch.Batch) { b.Records[0].Key = kbatch.ControlKey(42) },
		"kraft leader change": func(b *kbatch.Batch) { b.Records[0].Key = kbatch.ControlKey(2) },
		"negative key ver":    func(b *kbatch.Batch) { b.Records[0].Key = []byte{0xff, 0xff, 0, 1} },
		"short key":           func(b *kbatch.Batch) { b.Records[0].Key = []byte{0, 0, 1} },
		"null key":            func(b *kbatch.Batch) { b.Records[0].Key = nil },
		"short value":         func(b *kbatch.Batch) { b.Records[0].Value = []byte{0, 0, 0} },
		"negative value ver":  func(b *kbatch.Batch) { b.Records[0].Value = []byte{0x80, 0, 0, 0, 0, 1} },
		"two records": func(b *kbatch.Batch) {
			b.Records = append(b.Records, kbatch.Record{OffsetDelta: 1, Key: kbatch.ControlKey(1), Value: kbatch.EndTxnMarkerValue(2)})
		},
		"compressed":         func(b *kbatch.Batch) { b.Attributes |= int16(kbatch.CodecGzip) },
		"non-transactional":  func(b *kbatch.Batch) { b.Attributes = kbatch.ControlBit },
		"no producer":        func(b *kbatch.Batch) { b.ProducerID = -1 },
		"undefined attr bit": func(b *kbatch.Batch) { b.Attributes |= 0x100 },
		"spans offsets":      func(b *kbatch.Batch) { b.LastOffsetDelta = 3 },
		"bad barrier": func(b *kbatch.Batch) {
			b.Records[0] = kbatch.Record{Key: kbatch.ControlKey(7), Value: []byte{0, 0, 9, 'a'}}
		},
		"barrier trailing bytes": func(b *kbatch.Batch) {
			b.Records[0] = kbatch.Record{Key: kbatch.ControlKey(7), Value: append(kbatch.MirrorPidResetValue("x"), 1)}
		},
	}
	for name, mod := range cases {
		rs, err := judgeBoth(t, mirror, ctl(t, mod))
		if err != nil || len(rs) != 1 || rs[0].Code != sdk.InvalidRecord {
			t.Errorf("%s: got %+v %v", name, rs, err)
		}
	}
	// Corrupt the record length inside an otherwise valid batch.
	b := ctl(t, func(*kbatch.Batch) {})
	b[61] = 0x7f
	if rs, _ := judgeBoth(t, mirror, b); len(rs) != 1 {
		t.Errorf("corrupt record length accepted")
	}
}

func TestControlRecordsNormalTopic(t *testing.T) {
	normal := &sdk.Context{Mode: sdk.ModeNone, LastBatchEpoch: -1}
	data := kbatch.NewBatch(1, kbatch.Record{Value: []byte("v")})
	d, _ := kbatch.Encode(data)
	set := append(d, ctl(t, func(b *kbatch.Batch) { b.BaseOffset = 1 })...)
	rs, err := judgeBoth(t, normal, set)
	if err != nil || len(rs) != 1 || rs[0].Batch != 1 {
		t.Fatalf("normal topic: %+v %v", rs, err)
	}
}

// FuzzControlRecord: any bytes in a control batch's data section either
// pass or get a reason; never a panic.
func FuzzControlRecord(f *testing.F) {
	f.Add(ctl(f, func(*kbatch.Batch) {})[61:])
	f.Add(ctl(f, func(b *kbatch.Batch) {
		b.Records[0] = kbatch.Record{Key: kbatch.ControlKey(7), Value: kbatch.MirrorPidResetValue("c")}
	})[61:])
	mirror := &sdk.Context{Mode: sdk.ModePush, LastBatchEpoch: -1}
	f.Fuzz(func(t *testing.T, data []byte) {
		b := ctl(t, func(*kbatch.Batch) {})[:61]
		b = append(b, data...)
		binary.BigEndian.PutUint32(b[8:], uint32(len(b)-12))
		rs, err := judgeBoth(t, mirror, b)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range rs {
			if r.Reason == "" {
				t.Fatal("rejection without a reason")
			}
		}
	})
}

// FuzzControlBatch: the module and the Go reference agree on any control
// batch: arbitrary data section, attributes, last offset delta, record
// count, producer id, and mirror mode, with an ordinary data batch around
// it (judgeBoth fails on any difference in verdict, code or reason).
func FuzzControlBatch(f *testing.F) {
	f.Add(ctl(f, func(*kbatch.Batch) {})[61:], uint16(0x30), int32(0), int32(1), int64(12), uint8(1))
	f.Add(ctl(f, func(b *kbatch.Batch) {
		b.Records[0] = kbatch.Record{Key: kbatch.ControlKey(7), Value: kbatch.MirrorPidResetValue("c")}
	})[61:], uint16(0x20), int32(0), int32(1), int64(-1), uint8(1))
	f.Add([]byte{0x7f}, uint16(0x1a0), int32(-7), int32(-3), int64(-5), uint8(0))
	data := kbatchtest.Encode(f, kbatch.NewBatch(0, kbatch.Record{Value: []byte("v")}))
	f.Fuzz(func(t *testing.T, body []byte, attrs uint16, lod, rc int32, pid int64, mode uint8) {
		b := ctl(t, func(*kbatch.Batch) {})[:61]
		b = append(b, body...)
		binary.BigEndian.PutUint32(b[8:], uint32(len(b)-12))
		binary.BigEndian.PutUint16(b[21:], attrs|kbatch.ControlBit)
		binary.BigEndian.PutUint32(b[23:], uint32(lod))
		binary.BigEndian.PutUint64(b[43:], uint64(pid))
		binary.BigEndian.PutUint32(b[57:], uint32(rc))
		set := append(append(append([]byte(nil), data...), b...), data...)
		c := &sdk.Context{Mode: sdk.MirrorMode(mode % 3), LastBatchEpoch: -1}
		rs, err := judgeBoth(t, c, set)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range rs {
			if r.Reason == "" || r.Batch != 1 || r.Code != sdk.InvalidRecord {
				t.Fatalf("rejection %+v", r)
			}
		}
	})
}

// rec encodes one record body by hand (so that fields kbatch would not
// write, such as a negative header count, can be tested); a nil key or
// value is null. extra is appended inside the record after the headers.
func rec(offsetDelta int64, key, value []byte, headers int64, hdrs, extra []byte) []byte {
	var body []byte
	body = append(body, 0)              // attributes
	body = binary.AppendVarint(body, 0) // timestamp delta
	body = binary.AppendVarint(body, offsetDelta)
	for _, f := range [][]byte{key, value} {
		if f == nil {
			body = binary.AppendVarint(body, -1)
			continue
		}
		body = binary.AppendVarint(body, int64(len(f)))
		body = append(body, f...)
	}
	body = binary.AppendVarint(body, headers)
	body = append(append(body, hdrs...), extra...)
	return append(binary.AppendVarint(nil, int64(len(body))), body...)
}

// TestControlRecordsEveryReason covers each refusal the policy can give
// (and the accepted edge cases next to them) with the exact reason, in
// both the module and the Go reference.
func TestControlRecordsEveryReason(t *testing.T) {
	mirror := &sdk.Context{Mode: sdk.ModePush, State: sdk.StateMirroring, LastBatchEpoch: -1}
	commitKey, commitVal := kbatch.ControlKey(kbatch.ControlCommit), kbatch.EndTxnMarkerValue(2)
	barrierKey := kbatch.ControlKey(kbatch.ControlMirrorPidReset)
	withBody := func(body []byte, mod func([]byte)) []byte {
		b := append(ctl(t, func(*kbatch.Batch) {})[:61], body...)
		binary.BigEndian.PutUint32(b[8:], uint32(len(b)-12))
		if mod != nil {
			mod(b)
		}
		return b
	}
	attrs := func(a uint16) func([]byte) { return func(b []byte) { binary.BigEndian.PutUint16(b[21:], a) } }
	good := rec(0, commitKey, commitVal, 0, nil, nil)
	cases := []struct {
		name string
		set  []byte
		want string // "" accepted
	}{
		{"well formed", withBody(good, nil), ""},
		{"undefined attribute bits", withBody(good, attrs(0x8130)), "attribute bits 0x8100 are not defined"},
		{"snappy", withBody(good, attrs(0x32)), "control batch is compressed"},
		{"negative last offset delta", withBody(good, func(b []byte) { binary.BigEndian.PutUint32(b[23:], 0x80000000) }),
			"control batch spans -2147483647 offsets, Kafka writes 1"},
		{"header record count 3", withBody(good, func(b []byte) { binary.BigEndian.PutUint32(b[57:], 3) }),
			"control batch holds 3 records, Kafka writes 1"},
		{"header record count -1", withBody(good, func(b []byte) { binary.BigEndian.PutUint32(b[57:], 0xffffffff) }),
			"control batch holds -1 records, Kafka writes 1"},
		{"no record data", withBody(nil, nil), "control batch data holds 0 records, its header says 1"},
		{"two records in the data", withBody(append(good, good...), nil), "control batch data holds 2 records, its header says 1"},
		{"second record malformed", withBody(append(good, 0x02, 0), nil), "malformed control record: malformed record"},
		{"record length zero", withBody([]byte{0}, nil), "malformed control record: record length past the end of the batch"},
		{"record length varint overflow", withBody(bytes.Repeat([]byte{0xff}, 11), nil), "malformed control record: record length past the end of the batch"},
		{"offset delta", withBody(rec(5, commitKey, commitVal, 0, nil, nil), nil), "control record offset delta 5, want 0"},
		{"min offset delta", withBody(rec(math.MinInt64, commitKey, commitVal, 0, nil, nil), nil), "control record offset delta -9223372036854775808, want 0"},
		{"null key", withBody(rec(0, nil, commitVal, 0, nil, nil), nil), "control record key has 0 bytes, want at least 4"},
		{"key past the record", withBody([]byte{8, 0, 0, 0, 40}, nil), "malformed control record: malformed record"},
		{"negative header count", withBody(rec(0, commitKey, commitVal, -1, nil, nil), nil), "malformed control record: bad header count"},
		{"header count past the record", withBody(rec(0, commitKey, commitVal, 9, nil, nil), nil), "malformed control record: bad header count"},
		{"null header key", withBody(rec(0, commitKey, commitVal, 1, []byte{1, 0}, nil), nil), "malformed control record: null header key"},
		{"header value past the record", withBody(rec(0, commitKey, commitVal, 1, []byte{0, 40}, nil), nil), "malformed control record: malformed record"},
		{"headers are allowed", withBody(rec(0, commitKey, commitVal, 1, []byte{2, 'k', 1}, nil), nil), ""},
		{"trailing byte in the record", withBody(rec(0, commitKey, commitVal, 0, nil, []byte{9}), nil), "malformed control record: trailing bytes inside a record"},
		{"key version -2", withBody(rec(0, []byte{0xff, 0xfe, 0, 1}, commitVal, 0, nil, nil), nil), "control record key version -2 is negative"},
		{"null marker value", withBody(rec(0, commitKey, nil, 0, nil, nil), nil), "transaction marker value has 0 bytes, want at least 6"},
		{"kraft type 3", withBody(rec(0, kbatch.ControlKey(3), commitVal, 0, nil, nil), nil),
			"control type 3 belongs to the KRaft metadata log, not to a topic partition"},
		{"type -2", withBody(rec(0, []byte{0, 0, 0xff, 0xfe}, commitVal, 0, nil, nil), nil), "unknown control type -2"},
		{"type 8", withBody(rec(0, kbatch.ControlKey(8), commitVal, 0, nil, nil), nil), "unknown control type 8"},
		{"barrier null value", withBody(rec(0, barrierKey, nil, 0, nil, nil), attrs(0x20)), "MIRROR_PID_RESET record has a null value"},
		{"barrier 1-byte value", withBody(rec(0, barrierKey, []byte{0}, 0, nil, nil), attrs(0x20)), "MIRROR_PID_RESET value shorter than its version"},
		{"barrier negative version", withBody(rec(0, barrierKey, []byte{0x80, 0}, 0, nil, nil), attrs(0x20)), "MIRROR_PID_RESET value version is negative"},
		{"barrier version 1 not decoded", withBody(rec(0, barrierKey, []byte{0, 1, 0xff}, 0, nil, nil), attrs(0x20)), ""},
		{"barrier null cluster id", withBody(rec(0, barrierKey, []byte{0, 0, 0, 0}, 0, nil, nil), attrs(0x20)), "MIRROR_PID_RESET SourceClusterId is malformed"},
		{"barrier no cluster id", withBody(rec(0, barrierKey, []byte{0, 0}, 0, nil, nil), attrs(0x20)), "MIRROR_PID_RESET SourceClusterId is malformed"},
		{"barrier empty cluster id", withBody(rec(0, barrierKey, []byte{0, 0, 1, 0}, 0, nil, nil), attrs(0x20)), ""},
		{"barrier no tag count", withBody(rec(0, barrierKey, []byte{0, 0, 2, 'a'}, 0, nil, nil), attrs(0x20)), "MIRROR_PID_RESET tagged fields are malformed"},
		{"barrier too many tags", withBody(rec(0, barrierKey, []byte{0, 0, 2, 'a', 5}, 0, nil, nil), attrs(0x20)), "MIRROR_PID_RESET tagged fields are malformed"},
		{"barrier tag", withBody(rec(0, barrierKey, []byte{0, 0, 2, 'a', 1, 0, 1, 'x'}, 0, nil, nil), attrs(0x20)), ""},
		{"barrier tag without size", withBody(rec(0, barrierKey, []byte{0, 0, 2, 'a', 1, 0}, 0, nil, nil), attrs(0x20)), "MIRROR_PID_RESET tag size is malformed"},
		{"barrier tag past the end", withBody(rec(0, barrierKey, []byte{0, 0, 2, 'a', 1, 0, 2, 'x'}, 0, nil, nil), attrs(0x20)), "MIRROR_PID_RESET tag size is malformed"},
		{"barrier tag id cut", withBody(rec(0, barrierKey, []byte{0, 0, 2, 'a', 1, 0x80}, 0, nil, nil), attrs(0x20)), "MIRROR_PID_RESET tag is malformed"},
		{"barrier trailing", withBody(rec(0, barrierKey, []byte{0, 0, 2, 'a', 0, 7}, 0, nil, nil), attrs(0x20)), "MIRROR_PID_RESET value has trailing bytes"},
	}
	for _, c := range cases {
		rs, err := judgeBoth(t, mirror, c.set)
		switch {
		case err != nil:
			t.Errorf("%s: %v", c.name, err)
		case c.want == "" && rs != nil:
			t.Errorf("%s: rejected %+v", c.name, rs)
		case c.want != "" && (len(rs) != 1 || rs[0].Reason != c.want || rs[0].Code != sdk.InvalidRecord):
			t.Errorf("%s: got %+v, want %q", c.name, rs, c.want)
		}
	}
	// Ordinary topic: every control batch, whatever its shape.
	normal := &sdk.Context{Mode: sdk.ModeNone, LastBatchEpoch: -1}
	rs, err := judgeBoth(t, normal, withBody(good, nil))
	if err != nil || len(rs) != 1 || rs[0].Reason != "control batches are written by the broker, not by clients (topic is not a mirror)" {
		t.Fatalf("normal topic: %+v %v", rs, err)
	}
}

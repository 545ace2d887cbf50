package main

import (
	"encoding/binary"
	"reflect"
	"testing"

	"github.com/verbatim-kafka/verbatim/internal/kbatch"
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
	out, err := kbatch.Encode(b)
	if err != nil {
		t.Fatal(err)
	}
	return out
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
	data, err := kbatch.Encode(kbatch.NewBatch(0, kbatch.Record{Value: []byte("v")}))
	if err != nil {
		f.Fatal(err)
	}
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

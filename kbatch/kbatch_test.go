package kbatch

import (
	"bytes"
	"encoding/binary"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

func TestEncodeDecodeAllCodecs(t *testing.T) {
	for _, c := range []Codec{CodecNone, CodecGzip, CodecSnappy, CodecLZ4, CodecZstd} {
		t.Run(c.String(), func(t *testing.T) {
			b := NewBatch(1000,
				Record{Key: []byte("k1"), Value: []byte("v1"), Headers: []RecordHeader{{Key: "h", Value: []byte("x")}}},
				Record{OffsetDelta: 1, TimestampDelta: 5, Value: bytes.Repeat([]byte("z"), 3000)},
				Record{OffsetDelta: 2, TimestampDelta: 2, Key: []byte{}, Value: nil},
			)
			b.Attributes = int16(c)
			b.BaseOffset = 42
			raw, err := Encode(b)
			if err != nil {
				t.Fatal(err)
			}
			h, err := ParseHeader(raw)
			if err != nil {
				t.Fatal(err)
			}
			if h.Size() != len(raw) || h.LastOffsetDelta != 2 || h.MaxTimestamp != 1005 || h.RecordCount != 3 || h.Codec() != c {
				t.Fatalf("header %+v", h)
			}
			if CRC(raw) != h.CRC {
				t.Fatal("crc")
			}
			recs, err := Records(raw)
			if err != nil {
				t.Fatal(err)
			}
			if len(recs) != 3 || string(recs[0].Key) != "k1" || recs[0].Headers[0].Key != "h" || len(recs[1].Value) != 3000 || recs[2].Value != nil || recs[2].Key == nil {
				t.Fatalf("records %+v", recs)
			}
			// kmsg, an independent decoder, agrees on the header and CRC.
			var kb kmsg.RecordBatch
			if err := kb.ReadFrom(raw); err != nil {
				t.Fatal(err)
			}
			if kb.FirstOffset != 42 || kb.NumRecords != 3 || uint32(kb.CRC) != h.CRC {
				t.Fatalf("kmsg view %+v", kb)
			}
			batch, rest, err := Next(append(append([]byte{}, raw...), raw...))
			if err != nil || len(batch) != len(raw) || len(rest) != len(raw) {
				t.Fatal("Next split")
			}
		})
	}
}

func TestNextShort(t *testing.T) {
	raw, _ := Encode(NewBatch(1, Record{Value: []byte("a")}))
	for i := 0; i < len(raw); i++ {
		if _, _, err := Next(raw[:i]); err == nil {
			t.Fatalf("prefix %d accepted", i)
		}
	}
}

func TestControlType(t *testing.T) {
	b := NewBatch(5, Record{Key: ControlKey(ControlMirrorPidReset), Value: MirrorPidResetValue("abc")})
	b.Attributes = ControlBit
	raw, _ := Encode(b)
	typ, ok := ControlType(raw)
	if !ok || typ != 7 {
		t.Fatalf("got %d %v", typ, ok)
	}
	// Compressed, the same answer; a short key or a batch that does not
	// decode as a whole (as Records would refuse it) is not a control type.
	for _, c := range []Codec{CodecGzip, CodecSnappy, CodecLZ4, CodecZstd} {
		cb := NewBatch(5, Record{Key: ControlKey(ControlAbort), Value: EndTxnMarkerValue(3)})
		cb.Attributes = ControlBit | int16(c)
		craw, err := Encode(cb)
		if err != nil {
			t.Fatal(err)
		}
		if typ, ok := ControlType(craw); !ok || typ != ControlAbort {
			t.Fatalf("%s: got %d %v", c, typ, ok)
		}
	}
	short := NewBatch(5, Record{Key: []byte{0, 0}, Value: []byte("x")})
	short.Attributes = ControlBit
	sraw, _ := Encode(short)
	if _, ok := ControlType(sraw); ok {
		t.Fatal("a 2-byte key read as a control type")
	}
	bad := NewBatch(5, Record{Key: ControlKey(ControlCommit), Value: EndTxnMarkerValue(3)})
	bad.Attributes = ControlBit
	braw, _ := Encode(bad)
	binary.BigEndian.PutUint32(braw[RecordCountOffset:], 2) // declares a record it does not hold
	if _, err := Records(braw); err == nil {
		t.Fatal("Records accepted a batch declaring a missing record")
	}
	if _, ok := ControlType(braw); ok {
		t.Fatal("ControlType accepted a batch Records refuses")
	}
}

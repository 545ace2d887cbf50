package wireext

import (
	"bytes"
	"encoding/binary"
	"testing"
)

// fuzzValue checks, for any input b: ReadFrom never panics; a failed
// ReadFrom leaves the zero value; when b decodes to x, AppendTo(x) decodes
// to x again, re-encodes to itself (canonical) and is never longer than b
// (the canonical form is the shortest).
func fuzzValue[T comparable, P value[T]](t *testing.T, b []byte) {
	var x T
	if err := P(&x).ReadFrom(b); err != nil {
		var zero T
		if x != zero {
			t.Fatalf("%x: error %v with value %+v", b, err, x)
		}
		return
	}
	enc := P(&x).AppendTo(nil)
	var y T
	if err := P(&y).ReadFrom(enc); err != nil || y != x {
		t.Fatalf("%x -> %+v -> %x -> %+v (%v)", b, x, enc, y, err)
	}
	if again := P(&y).AppendTo(nil); !bytes.Equal(again, enc) {
		t.Fatalf("%+v encodes as %x and %x", x, enc, again)
	}
	if len(enc) > len(b) {
		t.Fatalf("canonical %x is longer than the input %x", enc, b)
	}
}

func FuzzMirrorProduce(f *testing.F) {
	f.Add((&MirrorProduce{WriterEpoch: 1_700_000_000, WriterID: [16]byte{1, 2, 3}}).AppendTo(nil))
	f.Add((&MirrorProduce{WriterEpoch: 1}).AppendTo(nil))
	f.Add([]byte{0, 0, 0, 0, 0, 1, 2, 0, 1, 9, 5, 0, 0})
	f.Fuzz(func(t *testing.T, b []byte) { fuzzValue[MirrorProduce](t, b) })
}

func FuzzMirrorPartition(f *testing.F) {
	p := NewMirrorPartition()
	f.Add(p.AppendTo(nil))
	f.Add((&MirrorPartition{ExpectedLogEndOffset: 42, CurrentLeaderEpoch: 3}).AppendTo(nil))
	f.Add([]byte{0, 0, 0, 0, 0, 0, 0, 0, 0, 5, 0, 0, 0, 1, 1, 7, 1, 0})
	f.Fuzz(func(t *testing.T, b []byte) { fuzzValue[MirrorPartition](t, b) })
}

// FuzzMirrorTopicID: also, exactly version >= 0 + 16 bytes + a tag section
// is accepted, and the id is the input's.
func FuzzMirrorTopicID(f *testing.F) {
	f.Add((&MirrorTopicID{TopicID: [16]byte{1, 2, 3}}).AppendTo(nil))
	f.Add([]byte{0, 1, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 1, 0, 1, 5})
	f.Add([]byte{0xff, 0xff})
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		fuzzValue[MirrorTopicID](t, b)
		var m MirrorTopicID
		if m.ReadFrom(b) == nil && (len(b) < 19 || m.Version < 0 || [16]byte(b[2:18]) != m.TopicID) {
			t.Fatalf("accepted %x as %+v", b, m)
		}
	})
}

// FuzzMirrorWriterEpoch: also, exactly version >= 0 + int32 + a tag
// section is accepted, and the epoch is the input's.
func FuzzMirrorWriterEpoch(f *testing.F) {
	f.Add((&MirrorWriterEpoch{WriterEpoch: 3}).AppendTo(nil))
	f.Add([]byte{0, 1, 0x7f, 0xff, 0xff, 0xff, 1, 0, 2, 9, 9})
	f.Add([]byte{0, 0, 0, 0, 0, 1, 0, 0})
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		fuzzValue[MirrorWriterEpoch](t, b)
		var m MirrorWriterEpoch
		if m.ReadFrom(b) == nil && (len(b) < 7 || m.Version < 0 || int32(binary.BigEndian.Uint32(b[2:])) != m.WriterEpoch) {
			t.Fatalf("accepted %x as %+v", b, m)
		}
	})
}

// FuzzTags: the walker never panics, never reads past its input, and
// re-encoding the fields it read gives the section's bytes back when they
// were canonical.
func FuzzTags(f *testing.F) {
	f.Add([]byte{0})
	f.Add([]byte{2, 0, 1, 'a', 0xc2, 0xac, 0x01, 2, 'b', 'c', 'r', 'e', 's', 't'})
	f.Add([]byte{1, 0x80, 0x80, 0x80, 0x80, 0x0f, 0})
	f.Fuzz(func(t *testing.T, b []byte) {
		it := ReadTags(b)
		n := it.Left()
		enc := AppendUvarint(nil, uint32(n))
		for it.Next() {
			enc = appendTag(enc, it.Tag(), it.Value())
		}
		if it.Err() != nil {
			if it.Rest() != nil {
				t.Fatal("rest after an error")
			}
			return
		}
		rest := it.Rest()
		sec := b[:len(b)-len(rest)]
		if len(enc) > len(sec) || (bytes.Equal(enc, sec) != (len(enc) == len(sec))) {
			t.Fatalf("section %x re-encodes as %x", sec, enc)
		}
	})
}

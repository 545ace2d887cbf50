package wireext

import (
	"bytes"
	"encoding/binary"
	"errors"
	"testing"
)

// value is what every extension struct is: encodable and decodable.
type value[T any] interface {
	*T
	AppendTo([]byte) []byte
	ReadFrom([]byte) error
}

// roundTrip checks ReadFrom(AppendTo(x)) == x and that the encoding is
// canonical (it re-encodes to itself).
func roundTrip[T comparable, P value[T]](t *testing.T, x T) {
	t.Helper()
	enc := P(&x).AppendTo([]byte("prefix"))
	if !bytes.HasPrefix(enc, []byte("prefix")) {
		t.Fatalf("AppendTo dropped dst: %x", enc)
	}
	enc = enc[len("prefix"):]
	var got T
	if err := P(&got).ReadFrom(enc); err != nil {
		t.Fatalf("%+v: ReadFrom(AppendTo) = %v", x, err)
	}
	if got != x {
		t.Fatalf("round trip %+v -> %x -> %+v", x, enc, got)
	}
	if again := P(&got).AppendTo(nil); !bytes.Equal(again, enc) {
		t.Fatalf("%+v: re-encoded %x, first %x", x, again, enc)
	}
}

func TestRoundTrip(t *testing.T) {
	id := [16]byte{0x18, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 0xff}
	for _, m := range []MirrorProduce{{}, {WriterEpoch: 1_700_000_000}, {WriterEpoch: -1, WriterID: id}, {Version: 3, WriterEpoch: 7, WriterID: [16]byte{15: 1}}} {
		roundTrip(t, m)
	}
	for _, m := range []MirrorPartition{{}, NewMirrorPartition(), {ExpectedLogEndOffset: 1 << 40, CurrentLeaderEpoch: 12}, {Version: 1, ExpectedLogEndOffset: -5},
		{ExpectedLogEndOffset: 10, CurrentLeaderEpoch: -1, SourceHighWatermark: 1<<62 + 3}} {
		roundTrip(t, m)
	}
	for _, m := range []MirrorTopicID{{}, {TopicID: id}, {Version: 2, TopicID: [16]byte{15: 1}}} {
		roundTrip(t, m)
	}
	for _, m := range []MirrorWriterEpoch{{}, {WriterEpoch: 7}, {Version: 1, WriterEpoch: 1<<31 - 1}, {WriterEpoch: -1}} {
		roundTrip(t, m)
	}
	roundTrip(t, MirrorProduce{WriterEpoch: RegisterWriterEpoch, WriterID: id})
}

// TestSourceHighWatermarkLayout pins the partition value's bytes with a
// source high watermark and refuses a malformed one.
func TestSourceHighWatermarkLayout(t *testing.T) {
	m := MirrorPartition{ExpectedLogEndOffset: 5, CurrentLeaderEpoch: 2, SourceHighWatermark: 9}
	want := []byte{0, 0, 0, 0, 0, 0, 0, 0, 0, 5, 0, 0, 0, 2, 1, SourceHighWatermarkTag, 8, 0, 0, 0, 0, 0, 0, 0, 9}
	if got := m.AppendTo(nil); string(got) != string(want) {
		t.Fatalf("encoded % x, want % x", got, want)
	}
	bad := append([]byte{}, want[:14]...)
	bad = append(bad, 1, SourceHighWatermarkTag, 4, 0, 0, 0, 9)
	var d MirrorPartition
	if err := d.ReadFrom(bad); !errors.Is(err, ErrSourceHighWatermark) {
		t.Fatalf("a 4-byte high watermark: %v", err)
	}
	neg := append([]byte{}, want...)
	neg[17] = 0x80
	if err := d.ReadFrom(neg); !errors.Is(err, ErrSourceHighWatermark) || d != (MirrorPartition{}) {
		t.Fatalf("a negative high watermark: %v %+v", err, d)
	}
}

// TestWriterEpochLayout pins the registration's bytes: a MirrorProduce
// asking for an epoch (-1) and the response partition's value.
func TestWriterEpochLayout(t *testing.T) {
	reg := MirrorProduce{WriterEpoch: RegisterWriterEpoch, WriterID: [16]byte{15: 2}}
	want := append([]byte{0, 0, 0xff, 0xff, 0xff, 0xff, 1, WriterIDTag, 16}, reg.WriterID[:]...)
	if got := reg.AppendTo(nil); !bytes.Equal(got, want) {
		t.Fatalf("registration %x, want %x", got, want)
	}
	if got := (&MirrorWriterEpoch{WriterEpoch: 0x01020304}).AppendTo(nil); !bytes.Equal(got, []byte{0, 0, 1, 2, 3, 4, 0}) {
		t.Fatalf("MirrorWriterEpoch %x", got)
	}
	if FeatureMirrorProduceMaxVersion < FeatureMirrorProduceAssigned || FeatureMirrorProduceMinVersion != FeatureMirrorProduceAssigned {
		t.Fatalf("feature versions %d-%d do not announce assigned epochs (%d) only", FeatureMirrorProduceMinVersion, FeatureMirrorProduceMaxVersion, FeatureMirrorProduceAssigned)
	}
	var m MirrorWriterEpoch
	if err := m.ReadFrom([]byte{0, 0, 0, 0, 0, 9, 1, 4, 1, 0}); err != nil || m.WriterEpoch != 9 {
		t.Fatalf("unknown tag: %+v %v", m, err)
	}
	for _, b := range [][]byte{nil, {0, 0, 0, 0, 0}, {0, 0, 0, 0, 0, 9}, {0, 0, 0, 0, 0, 9, 0, 0}, {0x80, 0, 0, 0, 0, 9, 0}, {0, 0, 0, 0, 0, 9, 1, 4, 2, 0}} {
		if err := m.ReadFrom(b); err != ErrMirrorWriterEpoch || m != (MirrorWriterEpoch{}) {
			t.Fatalf("%x: %+v %v", b, m, err)
		}
	}
}

// TestWireLayout pins the bytes docs/protocol.md documents, so a change of
// the encoding cannot pass as a round trip.
func TestWireLayout(t *testing.T) {
	id := [16]byte{0: 0xaa, 15: 0xbb}
	mp := MirrorProduce{WriterEpoch: 0x01020304, WriterID: id}
	want := append([]byte{0, 0, 1, 2, 3, 4, 1, WriterIDTag, 16}, id[:]...)
	if got := mp.AppendTo(nil); !bytes.Equal(got, want) {
		t.Fatalf("MirrorProduce %x, want %x", got, want)
	}
	if got := (&MirrorProduce{WriterEpoch: 5}).AppendTo(nil); !bytes.Equal(got, []byte{0, 0, 0, 0, 0, 5, 0}) {
		t.Fatalf("version-0 MirrorProduce %x", got)
	}
	part := MirrorPartition{ExpectedLogEndOffset: 0x0102030405060708, CurrentLeaderEpoch: -1}
	if got := part.AppendTo(nil); !bytes.Equal(got, []byte{0, 0, 1, 2, 3, 4, 5, 6, 7, 8, 0xff, 0xff, 0xff, 0xff, 0}) {
		t.Fatalf("MirrorPartition %x", got)
	}
	tid := MirrorTopicID{TopicID: id}
	if got := tid.AppendTo(nil); !bytes.Equal(got, append(append([]byte{0, 0}, id[:]...), 0)) {
		t.Fatalf("MirrorTopicID %x", got)
	}
	if MirrorTag != 0x5642 {
		t.Fatalf("MirrorTag %d", MirrorTag)
	}
}

// TestDecodeTolerance: what the broker has always accepted beyond the
// canonical form (unknown tags, bytes after a Produce value) and what it
// refuses, with the error naming the field.
func TestDecodeTolerance(t *testing.T) {
	base := (&MirrorProduce{WriterEpoch: 9}).AppendTo(nil)
	withUnknown := append(base[:6:6], 2, 0, 16)
	withUnknown = append(withUnknown, bytes.Repeat([]byte{7}, 16)...)
	withUnknown = append(withUnknown, 9, 1, 0xee)
	var m MirrorProduce
	if err := m.ReadFrom(withUnknown); err != nil || m.WriterEpoch != 9 || m.WriterID != [16]byte(bytes.Repeat([]byte{7}, 16)) {
		t.Fatalf("unknown tag after WriterID: %+v %v", m, err)
	}
	if err := m.ReadFrom(append(base, 1, 2, 3)); err != nil || m.WriterEpoch != 9 {
		t.Fatalf("trailing bytes: %v", err)
	}
	for name, b := range map[string][]byte{
		"short":            base[:5],
		"no tag section":   base[:6],
		"negative version": append([]byte{0x80, 0}, base[2:]...),
		"truncated tag":    append(base[:6:6], 1, 5, 3, 1),
	} {
		if err := m.ReadFrom(b); !errors.Is(err, ErrMirrorProduce) || m != (MirrorProduce{}) {
			t.Fatalf("%s: %v %+v", name, err, m)
		}
	}
	shortID := append(base[:6:6], 1, WriterIDTag, 15)
	shortID = append(shortID, make([]byte, 15)...)
	if err := m.ReadFrom(shortID); !errors.Is(err, ErrWriterID) || !errors.Is(err, ErrMirrorProduce) {
		t.Fatalf("15-byte WriterID: %v", err)
	}

	pb := NewMirrorPartition()
	penc := pb.AppendTo(nil)
	var p MirrorPartition
	if err := p.ReadFrom(append(penc[:14:14], 1, 3, 1, 0, 9)); err != nil || p != pb {
		t.Fatalf("partition with unknown tag and trailing byte: %+v %v", p, err)
	}
	for _, b := range [][]byte{penc[:13], penc[:14], append([]byte{0xff, 0xff}, penc[2:]...)} {
		if err := p.ReadFrom(b); err != ErrMirrorPartition || p != (MirrorPartition{}) {
			t.Fatalf("partition %x: %v", b, err)
		}
	}

	tenc := (&MirrorTopicID{TopicID: [16]byte{1}}).AppendTo(nil)
	var id MirrorTopicID
	if err := id.ReadFrom(append(tenc[:18:18], 1, 5, 1, 0)); err != nil || id.TopicID != [16]byte{1} {
		t.Fatalf("topic id with unknown tag: %+v %v", id, err)
	}
	for _, b := range [][]byte{tenc[:17], tenc[:18], append(tenc, 0), append([]byte{0x80, 0}, tenc[2:]...)} {
		if err := id.ReadFrom(b); err != ErrMirrorTopicID || id != (MirrorTopicID{}) {
			t.Fatalf("topic id %x: %v", b, err)
		}
	}
}

func TestTags(t *testing.T) {
	sec := AppendUvarint(nil, 3)
	sec = appendTag(sec, 0, []byte("a"))
	sec = appendTag(sec, MirrorTag, bytes.Repeat([]byte{1}, 200))
	sec = appendTag(sec, 1<<31, nil)
	sec = append(sec, "rest"...)
	var tags []uint32
	var sizes []int
	it := ReadTags(sec)
	for it.Next() {
		tags, sizes = append(tags, it.Tag()), append(sizes, len(it.Value()))
		if cap(it.Value()) != len(it.Value()) {
			t.Fatal("value capacity reaches past the field")
		}
	}
	if it.Err() != nil || string(it.Rest()) != "rest" || len(tags) != 3 || tags[1] != MirrorTag || sizes[1] != 200 || tags[2] != 1<<31 {
		t.Fatalf("tags %v sizes %v rest %q err %v", tags, sizes, it.Rest(), it.Err())
	}
	for _, c := range []struct {
		b   []byte
		err error
	}{
		{nil, ErrTagCount},
		{[]byte{0x80, 0x80, 0x80, 0x80, 0x10}, ErrTagCount}, // bits past 32
		{[]byte{1}, ErrTag},
		{[]byte{1, 0}, ErrTagSize},
		{[]byte{1, 0, 2, 9}, ErrTagSize},
		{[]byte{2, 0, 0}, ErrTag},
	} {
		it := ReadTags(c.b)
		for it.Next() {
		}
		if it.Err() != c.err || it.Rest() != nil {
			t.Fatalf("%x: %v, want %v", c.b, it.Err(), c.err)
		}
	}
}

func TestUvarint(t *testing.T) {
	for _, v := range []uint32{0, 1, 127, 128, 16383, 16384, 1 << 31, 1<<32 - 1} {
		b := AppendUvarint(nil, v)
		got, n := Uvarint(append(b, 0xff))
		if got != v || n != len(b) {
			t.Fatalf("%d: %x -> %d (%d bytes)", v, b, got, n)
		}
		if ref := binary.AppendUvarint(nil, uint64(v)); !bytes.Equal(ref, b) {
			t.Fatalf("%d: %x, encoding/binary %x", v, b, ref)
		}
	}
	for _, b := range [][]byte{nil, {0x80}, {0xff, 0xff, 0xff, 0xff, 0x1f}, {0x80, 0x80, 0x80, 0x80, 0x80, 0}} {
		if _, n := Uvarint(b); n != 0 {
			t.Fatalf("%x accepted", b)
		}
	}
}

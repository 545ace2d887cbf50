package wireext

import (
	"bytes"
	"encoding/binary"
	"testing"
)

func TestStartEpochRoundTrip(t *testing.T) {
	for _, m := range []MirrorStartEpoch{{}, {LeaderEpoch: 7}, {Version: 1, LeaderEpoch: 1<<31 - 1}} {
		roundTrip(t, m)
	}
}

// TestStartEpochLayout pins the bytes docs/protocol.md documents and what
// is refused: short values, bytes after the tag section, a negative
// version or epoch.
func TestStartEpochLayout(t *testing.T) {
	if got := (&MirrorStartEpoch{LeaderEpoch: 0x01020304}).AppendTo(nil); !bytes.Equal(got, []byte{0, 0, 1, 2, 3, 4, 0}) {
		t.Fatalf("MirrorStartEpoch %x", got)
	}
	if FeatureMirrorProduceMaxVersion < FeatureMirrorProduceStartEpoch || FeatureMirrorProduceMinVersion > FeatureMirrorProduceAssigned {
		t.Fatalf("feature versions %d-%d: want version %d announced and version-%d senders still admitted", FeatureMirrorProduceMinVersion, FeatureMirrorProduceMaxVersion, FeatureMirrorProduceStartEpoch, FeatureMirrorProduceAssigned)
	}
	var m MirrorStartEpoch
	if err := m.ReadFrom([]byte{0, 0, 0, 0, 0, 9, 1, 4, 1, 0}); err != nil || m.LeaderEpoch != 9 {
		t.Fatalf("unknown tag: %+v %v", m, err)
	}
	for _, b := range [][]byte{nil, {0, 0, 0, 0, 0}, {0, 0, 0, 0, 0, 9}, {0, 0, 0, 0, 0, 9, 0, 0}, {0x80, 0, 0, 0, 0, 9, 0}, {0, 0, 0xff, 0xff, 0xff, 0xff, 0}, {0, 0, 0, 0, 0, 9, 1, 4, 2, 0}} {
		if err := m.ReadFrom(b); err != ErrMirrorStartEpoch || m != (MirrorStartEpoch{}) {
			t.Fatalf("%x: %+v %v", b, m, err)
		}
	}
}

// FuzzMirrorStartEpoch: also, exactly version >= 0 + an int32 epoch >= 0
// + a tag section is accepted, and the epoch is the input's.
func FuzzMirrorStartEpoch(f *testing.F) {
	f.Add((&MirrorStartEpoch{LeaderEpoch: 3}).AppendTo(nil))
	f.Add([]byte{0, 1, 0x7f, 0xff, 0xff, 0xff, 1, 0, 2, 9, 9})
	f.Add([]byte{0, 0, 0xff, 0xff, 0xff, 0xff, 0})
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		fuzzValue[MirrorStartEpoch](t, b)
		var m MirrorStartEpoch
		if m.ReadFrom(b) == nil && (len(b) < 7 || m.Version < 0 || m.LeaderEpoch < 0 || int32(binary.BigEndian.Uint32(b[2:])) != m.LeaderEpoch) {
			t.Fatalf("accepted %x as %+v", b, m)
		}
	})
}

package broker

// Mirror writer identity (docs/protocol.md "Writer epoch").
//
// A mirror writer (a pusher) is (WriterEpoch, WriterID): the int32 epoch
// of MirrorProduce version 0 and, from feature version 1, a 16-byte
// WriterID in the MirrorProduce struct's tagged field wireext.WriterIDTag
// (the value's bytes are wireext's). Writers are
// ordered by epoch, then by WriterID as an unsigned big-endian number, so
// two pushers that chose the same epoch (the same start second) are still
// distinct and exactly one of them is the newest. A writer without a
// WriterID (a pusher from before version 1) has the zero id: it loses a
// tie against any pusher that sends one. The same (epoch, id) is the same
// writer and is always admitted.

import (
	"bytes"
	"encoding/hex"
	"fmt"

	"github.com/verbatim-kafka/verbatim/wireext"
)

// mirrorWriter identifies a mirror writer.
type mirrorWriter struct {
	Epoch int32
	ID    writerID
}

// writerID is a WriterID, persisted as 32 hex digits.
type writerID [16]byte

func (id writerID) MarshalText() ([]byte, error) { return []byte(hex.EncodeToString(id[:])), nil }

func (id *writerID) UnmarshalText(b []byte) error {
	if len(b) != 2*len(id) {
		return fmt.Errorf("writer id %q: want %d hex digits", b, 2*len(id))
	}
	_, err := hex.Decode(id[:], b)
	return err
}

// writerOf returns the writer identity a MirrorProduce value carries.
func writerOf(m *wireext.MirrorProduce) mirrorWriter {
	return mirrorWriter{Epoch: m.WriterEpoch, ID: m.WriterID}
}

// compare orders writers: by epoch, then by id.
func (w mirrorWriter) compare(o mirrorWriter) int {
	switch {
	case w.Epoch < o.Epoch:
		return -1
	case w.Epoch > o.Epoch:
		return 1
	}
	return bytes.Compare(w.ID[:], o.ID[:])
}

// String names the writer in fencing messages: its epoch, and its id when
// it has one.
func (w mirrorWriter) String() string {
	if w.ID == (writerID{}) {
		return fmt.Sprintf("epoch %d", w.Epoch)
	}
	return fmt.Sprintf("epoch %d (writer id %x)", w.Epoch, w.ID[:])
}

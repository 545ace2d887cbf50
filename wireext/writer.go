package wireext

import (
	"encoding/binary"
	"fmt"
)

// Broker-assigned writer epochs (feature FeatureMirrorProduce version 2,
// docs/protocol.md "Writer epoch").
//
// A pusher registers with a mirror DeleteRecords whose MirrorProduce value
// has WriterEpoch RegisterWriterEpoch and its WriterID; the broker assigns
// the epoch, persists it and answers it in each registered partition's
// MirrorWriterEpoch (DeleteRecords response partition, tag MirrorTag,
// flexible versions). Every later mirror write carries that epoch.

// RegisterWriterEpoch is the WriterEpoch of a registration: the request
// asks the broker for the partitions' next writer epoch.
const RegisterWriterEpoch = -1

// FeatureMirrorProduceAssigned is the first version of
// FeatureMirrorProduce whose broker assigns writer epochs.
const FeatureMirrorProduceAssigned = 2

// ErrMirrorWriterEpoch is the error of a MirrorWriterEpoch value that does
// not parse.
var ErrMirrorWriterEpoch = fmt.Errorf("malformed MirrorWriterEpoch response field (tag %d): want int16 version >= 0, an int32 writer epoch and a tag section", MirrorTag)

// MirrorWriterEpoch is the partition-level value of a DeleteRecords
// response to a registration: the writer epoch the broker assigned.
type MirrorWriterEpoch struct {
	Version     int16 // >= 0; 0 today
	WriterEpoch int32
}

// AppendTo appends the encoded value to dst.
func (m *MirrorWriterEpoch) AppendTo(dst []byte) []byte {
	return appendVersionInt32(dst, m.Version, m.WriterEpoch)
}

// ReadFrom decodes b into m: Version (int16, >= 0), WriterEpoch (int32),
// a tag section (skipped), and nothing after it. On error m is the zero
// value.
func (m *MirrorWriterEpoch) ReadFrom(b []byte) error {
	*m = MirrorWriterEpoch{}
	v, x, ok := readVersionInt32(b)
	if !ok {
		return ErrMirrorWriterEpoch
	}
	*m = MirrorWriterEpoch{Version: v, WriterEpoch: x}
	return nil
}

// appendVersionInt32 appends a value of the shape Version (int16), one
// int32, an empty tag section.
func appendVersionInt32(dst []byte, version int16, x int32) []byte {
	dst = binary.BigEndian.AppendUint16(dst, uint16(version))
	dst = binary.BigEndian.AppendUint32(dst, uint32(x))
	return append(dst, 0)
}

// readVersionInt32 decodes a value of that shape: ok when b is exactly a
// Version >= 0, the int32 and a tag section (skipped).
func readVersionInt32(b []byte) (version int16, x int32, ok bool) {
	if len(b) < 6 {
		return 0, 0, false
	}
	version, x = int16(binary.BigEndian.Uint16(b)), int32(binary.BigEndian.Uint32(b[2:]))
	rest, err := skipTags(b[6:])
	return version, x, err == nil && len(rest) == 0 && version >= 0
}

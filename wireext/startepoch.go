package wireext

import "fmt"

// The source's leader epoch at its log start (feature FeatureMirrorProduce
// version FeatureMirrorProduceStartEpoch, docs/protocol.md "Start epoch").
//
// A mirror DeleteRecords (request-level MirrorProduce value) forwards the
// source's log start in each partition's Offset; a partition entry may
// also carry, in its tagged field MirrorTag, a MirrorStartEpoch value: the
// leader epoch the source answers ListOffsets EARLIEST with at that
// offset. The broker records it in the partition's leader-epoch cache
// when it agrees with the stored batches, so that where the source's
// first batches were compacted away ListOffsets EARLIEST answers the
// source's epoch, not -1.

// FeatureMirrorProduceStartEpoch is the first version of
// FeatureMirrorProduce whose broker reads MirrorStartEpoch. A sender must
// not rely on the value with an older broker (it ignores unknown tags).
const FeatureMirrorProduceStartEpoch = 3

// ErrMirrorStartEpoch is the error of a MirrorStartEpoch value that does
// not parse.
var ErrMirrorStartEpoch = fmt.Errorf("malformed MirrorStartEpoch partition field (tag %d): want int16 version >= 0, an int32 leader epoch >= 0 and a tag section", MirrorTag)

// MirrorStartEpoch is the partition-level value of a mirror DeleteRecords
// request: the source's leader epoch at the partition's Offset.
type MirrorStartEpoch struct {
	Version     int16 // >= 0; 0 today
	LeaderEpoch int32 // >= 0
}

// AppendTo appends the encoded value to dst.
func (m *MirrorStartEpoch) AppendTo(dst []byte) []byte {
	return appendVersionInt32(dst, m.Version, m.LeaderEpoch)
}

// ReadFrom decodes b into m: Version (int16, >= 0), LeaderEpoch (int32,
// >= 0: a source without an epoch sends no value), a tag section
// (skipped), and nothing after it. On error m is the zero value.
func (m *MirrorStartEpoch) ReadFrom(b []byte) error {
	*m = MirrorStartEpoch{}
	v, e, ok := readVersionInt32(b)
	if !ok || e < 0 {
		return ErrMirrorStartEpoch
	}
	*m = MirrorStartEpoch{Version: v, LeaderEpoch: e}
	return nil
}

package wireext

import (
	"encoding/binary"
	"fmt"
)

// MirrorTag (0x5642, "VB") is the tag of every Verbatim extension field:
// Produce request level (MirrorProduce) and partition level
// (MirrorPartition), DeleteRecords request level (MirrorProduce), request
// partition level (MirrorStartEpoch) and response partition level
// (MirrorWriterEpoch), and CreateTopics topic entries (MirrorTopicID).
const MirrorTag = 22082

// WriterIDTag is the tag of MirrorProduce.WriterID inside the MirrorProduce
// struct's own tagged fields.
const WriterIDTag = 0

// ApiVersions supported features (v3+) advertising the extensions.
const (
	// FeatureMirrorProduce: MirrorProduce and MirrorPartition in Produce
	// v9+, MirrorProduce in DeleteRecords v2. Version 1 added WriterID;
	// version 2 (FeatureMirrorProduceAssigned) has the broker assign
	// writer epochs (writer.go), and a broker of version 2 no longer
	// admits client-chosen epochs, so its minimum is 2 as well; version 3
	// (FeatureMirrorProduceStartEpoch) reads MirrorStartEpoch in a mirror
	// DeleteRecords' partitions (startepoch.go), an addition a version-2
	// sender never uses, so the minimum stays 2.
	FeatureMirrorProduce           = "verbatim.mirror.produce"
	FeatureMirrorProduceMinVersion = 2
	FeatureMirrorProduceMaxVersion = 3
	// FeatureMirrorProduceWriterID is the first feature version whose
	// broker breaks writer-epoch ties by WriterID.
	FeatureMirrorProduceWriterID = 1

	// FeatureMirrorTopicID: MirrorTopicID in CreateTopics v5+.
	FeatureMirrorTopicID           = "verbatim.mirror.topic.id"
	FeatureMirrorTopicIDMinVersion = 0
	FeatureMirrorTopicIDMaxVersion = 0
)

// Decoding errors, naming the field as the broker reports it.
var (
	ErrMirrorProduce   = fmt.Errorf("malformed MirrorProduce request field (tag %d)", MirrorTag)
	ErrWriterID        = fmt.Errorf("%w: WriterID (field tag %d): want 16 bytes", ErrMirrorProduce, WriterIDTag)
	ErrMirrorPartition = fmt.Errorf("malformed MirrorProduce partition field (tag %d)", MirrorTag)
	ErrMirrorTopicID   = fmt.Errorf("malformed MirrorTopicID field (tag %d): want int16 version >= 0, a 16-byte topic id and a tag section", MirrorTag)
)

// MirrorProduce is the request-level value of a mirror produce and of a
// mirror DeleteRecords: the writer (pusher) the request comes from.
type MirrorProduce struct {
	Version int16 // >= 0; 0 today
	// WriterEpoch is the epoch the broker assigned to the writer
	// (RegisterWriterEpoch in a registration, writer.go).
	WriterEpoch int32
	// WriterID is the writer's identity (tagged field WriterIDTag,
	// feature version 1): the broker binds an assigned epoch to the id
	// that registered it. The zero id is the absent one and is not
	// encoded.
	WriterID [16]byte
}

// AppendTo appends the encoded value to dst.
func (m *MirrorProduce) AppendTo(dst []byte) []byte {
	dst = binary.BigEndian.AppendUint16(dst, uint16(m.Version))
	dst = binary.BigEndian.AppendUint32(dst, uint32(m.WriterEpoch))
	if m.WriterID == ([16]byte{}) {
		return append(dst, 0)
	}
	dst = append(dst, 1)
	return appendTag(dst, WriterIDTag, m.WriterID[:])
}

// ReadFrom decodes b into m: Version (int16, >= 0), WriterEpoch (int32),
// a tag section in which every WriterIDTag field must be 16 bytes (the
// last one counts; other tags are skipped). Bytes after the tag section
// are ignored. On error m is the zero value.
func (m *MirrorProduce) ReadFrom(b []byte) error {
	*m = MirrorProduce{}
	if len(b) < 6 {
		return ErrMirrorProduce
	}
	m.Version = int16(binary.BigEndian.Uint16(b))
	m.WriterEpoch = int32(binary.BigEndian.Uint32(b[2:]))
	var err error
	t := ReadTags(b[6:])
	for t.Next() {
		if t.Tag() != WriterIDTag {
			continue
		}
		if v := t.Value(); len(v) == len(m.WriterID) {
			copy(m.WriterID[:], v)
		} else {
			err = ErrWriterID
		}
	}
	switch {
	case t.Err() != nil || m.Version < 0:
		err = ErrMirrorProduce
	case err == nil:
		return nil
	}
	*m = MirrorProduce{}
	return err
}

// MirrorPartition is the partition-level value of a Produce: what the
// sender expects of the partition.
type MirrorPartition struct {
	Version int16 // >= 0; 0 today
	// ExpectedLogEndOffset is the log end the sender expects before the
	// append; -1 is no check (refused in a mirror produce).
	ExpectedLogEndOffset int64
	// CurrentLeaderEpoch is the sender's view of the partition leader
	// epoch; -1 is no check.
	CurrentLeaderEpoch int32
	// SourceHighWatermark is the source partition's high watermark when
	// the sender fetched these batches (tagged field
	// SourceHighWatermarkTag), from which the destination reports the
	// mirror's lag; 0 is "not sent" and is not encoded (an empty source
	// has nothing to lag behind).
	SourceHighWatermark int64
}

// SourceHighWatermarkTag is the tag of MirrorPartition.SourceHighWatermark
// inside the value's own tagged fields (an int64).
const SourceHighWatermarkTag = 0

// ErrSourceHighWatermark refuses a SourceHighWatermark field that is not
// a non-negative int64.
var ErrSourceHighWatermark = fmt.Errorf("%w: SourceHighWatermark (field tag %d): want a non-negative int64", ErrMirrorPartition, SourceHighWatermarkTag)

// NewMirrorPartition returns a value that checks nothing.
func NewMirrorPartition() MirrorPartition {
	return MirrorPartition{ExpectedLogEndOffset: -1, CurrentLeaderEpoch: -1}
}

// AppendTo appends the encoded value to dst.
func (m *MirrorPartition) AppendTo(dst []byte) []byte {
	dst = binary.BigEndian.AppendUint16(dst, uint16(m.Version))
	dst = binary.BigEndian.AppendUint64(dst, uint64(m.ExpectedLogEndOffset))
	dst = binary.BigEndian.AppendUint32(dst, uint32(m.CurrentLeaderEpoch))
	if m.SourceHighWatermark == 0 {
		return append(dst, 0)
	}
	dst = append(dst, 1)
	var hw [8]byte
	binary.BigEndian.PutUint64(hw[:], uint64(m.SourceHighWatermark))
	return appendTag(dst, SourceHighWatermarkTag, hw[:])
}

// ReadFrom decodes b into m: Version (int16, >= 0), ExpectedLogEndOffset
// (int64), CurrentLeaderEpoch (int32), a tag section in which a
// SourceHighWatermarkTag field must be a non-negative int64 (the last one
// counts; other tags are skipped). Bytes after the tag section are
// ignored. On error m is the zero value.
func (m *MirrorPartition) ReadFrom(b []byte) error {
	*m = MirrorPartition{}
	if len(b) < 14 {
		return ErrMirrorPartition
	}
	v := MirrorPartition{
		Version:              int16(binary.BigEndian.Uint16(b)),
		ExpectedLogEndOffset: int64(binary.BigEndian.Uint64(b[2:])),
		CurrentLeaderEpoch:   int32(binary.BigEndian.Uint32(b[10:])),
	}
	t := ReadTags(b[14:])
	for t.Next() {
		if t.Tag() != SourceHighWatermarkTag {
			continue
		}
		val := t.Value()
		if len(val) != 8 || int64(binary.BigEndian.Uint64(val)) < 0 {
			return ErrSourceHighWatermark
		}
		v.SourceHighWatermark = int64(binary.BigEndian.Uint64(val))
	}
	if t.Err() != nil || v.Version < 0 {
		return ErrMirrorPartition
	}
	*m = v
	return nil
}

// MirrorTopicID is the value of a CreateTopics topic entry: the topic id
// (KIP-516) a mirror topic must have, its source's.
type MirrorTopicID struct {
	Version int16 // >= 0; 0 today
	TopicID [16]byte
}

// AppendTo appends the encoded value to dst.
func (m *MirrorTopicID) AppendTo(dst []byte) []byte {
	dst = binary.BigEndian.AppendUint16(dst, uint16(m.Version))
	dst = append(dst, m.TopicID[:]...)
	return append(dst, 0)
}

// ReadFrom decodes b into m: Version (int16, >= 0), TopicID (16 bytes), a
// tag section (skipped), and nothing after it: a value longer than its
// struct is malformed.
func (m *MirrorTopicID) ReadFrom(b []byte) error {
	*m = MirrorTopicID{}
	if len(b) < 18 {
		return ErrMirrorTopicID
	}
	v := MirrorTopicID{Version: int16(binary.BigEndian.Uint16(b)), TopicID: [16]byte(b[2:18])}
	if rest, err := skipTags(b[18:]); err != nil || len(rest) != 0 || v.Version < 0 {
		return ErrMirrorTopicID
	}
	*m = v
	return nil
}

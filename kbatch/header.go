package kbatch

import (
	"encoding/binary"
	"errors"
	"hash/crc32"
)

// Byte offsets of the v2 record batch header fields. The batch length field
// counts the bytes after itself (from PartitionLeaderEpoch to the end), so a
// whole batch is LengthOffset+4+length bytes long.
const (
	BaseOffsetOffset      = 0
	LengthOffset          = 8
	LeaderEpochOffset     = 12
	MagicOffset           = 16
	CRCOffset             = 17
	AttributesOffset      = 21
	LastOffsetDeltaOffset = 23
	BaseTimestampOffset   = 27
	MaxTimestampOffset    = 35
	ProducerIDOffset      = 43
	ProducerEpochOffset   = 51
	BaseSequenceOffset    = 53
	RecordCountOffset     = 57
	HeaderSize            = 61

	// LogOverhead is the size of BaseOffset plus Length: the part of a
	// batch that is not counted by its own length field.
	LogOverhead = 12
)

// Attribute bits.
const (
	CodecMask          = 0x07
	TimestampTypeBit   = 0x08 // 1 = LogAppendTime
	TransactionalBit   = 0x10
	ControlBit         = 0x20
	DeleteHorizonBit   = 0x40 // BaseTimestamp holds the delete horizon (KIP-534)
	KnownAttributeBits = CodecMask | TimestampTypeBit | TransactionalBit | ControlBit | DeleteHorizonBit
)

// Codec is the compression codec in attribute bits 0-2.
type Codec int8

const (
	CodecNone   Codec = 0
	CodecGzip   Codec = 1
	CodecSnappy Codec = 2
	CodecLZ4    Codec = 3
	CodecZstd   Codec = 4
)

func (c Codec) String() string {
	switch c {
	case CodecNone:
		return "none"
	case CodecGzip:
		return "gzip"
	case CodecSnappy:
		return "snappy"
	case CodecLZ4:
		return "lz4"
	case CodecZstd:
		return "zstd"
	}
	return "unknown"
}

// Control record types (the key of the single record of a control batch).
const (
	ControlAbort          int16 = 0
	ControlCommit         int16 = 1
	ControlMirrorPidReset int16 = 7 // KIP-1279 MIRROR_PID_RESET barrier
)

// NoProducerID is the producer id of batches written by non-idempotent producers.
const NoProducerID int64 = -1

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// CRC computes the v2 batch checksum: CRC-32C over attributes to the end.
// b must be a whole batch of at least HeaderSize bytes.
func CRC(b []byte) uint32 { return crc32.Checksum(b[AttributesOffset:], castagnoli) }

// CRCUpdate continues a CRC-32C computation; exported for callers that
// checksum data in pieces.
func CRCUpdate(crc uint32, p []byte) uint32 { return crc32.Update(crc, castagnoli, p) }

// Header is a decoded copy of the 61 header bytes.
type Header struct {
	BaseOffset      int64
	Length          int32
	LeaderEpoch     int32
	Magic           int8
	CRC             uint32
	Attributes      int16
	LastOffsetDelta int32
	BaseTimestamp   int64
	MaxTimestamp    int64
	ProducerID      int64
	ProducerEpoch   int16
	BaseSequence    int32
	RecordCount     int32
}

// Size is the whole batch size in bytes implied by Length.
func (h *Header) Size() int { return LogOverhead + int(h.Length) }

// LastOffset is BaseOffset + LastOffsetDelta.
func (h *Header) LastOffset() int64 { return h.BaseOffset + int64(h.LastOffsetDelta) }

// NextOffset is the offset after the last one the batch covers.
func (h *Header) NextOffset() int64 { return h.LastOffset() + 1 }

func (h *Header) Codec() Codec          { return Codec(h.Attributes & CodecMask) }
func (h *Header) IsControl() bool       { return h.Attributes&ControlBit != 0 }
func (h *Header) IsTransactional() bool { return h.Attributes&TransactionalBit != 0 }
func (h *Header) LogAppendTime() bool   { return h.Attributes&TimestampTypeBit != 0 }
func (h *Header) HasDeleteHorizon() bool {
	return h.Attributes&DeleteHorizonBit != 0
}

// HasProducerID reports whether the batch was written by an idempotent or
// transactional producer.
func (h *Header) HasProducerID() bool { return h.ProducerID >= 0 }

// LastSequence is the sequence of the batch's last record, with Kafka's
// wrap-around at MaxInt32.
func (h *Header) LastSequence() int32 {
	if h.BaseSequence < 0 {
		return -1
	}
	s := int64(h.BaseSequence) + int64(h.LastOffsetDelta)
	if s > 0x7fffffff {
		s -= 0x80000000
	}
	return int32(s)
}

// ErrShort is returned when fewer bytes than a header (or than the length
// field announces) are available.
var ErrShort = errors.New("kbatch: truncated record batch")

// ParseHeader decodes the header at the start of b. It checks only that the
// 61 bytes are present; it does not check magic, length or CRC.
func ParseHeader(b []byte) (Header, error) {
	var h Header
	if len(b) < HeaderSize {
		return h, ErrShort
	}
	be := binary.BigEndian
	h.BaseOffset = int64(be.Uint64(b[BaseOffsetOffset:]))
	h.Length = int32(be.Uint32(b[LengthOffset:]))
	h.LeaderEpoch = int32(be.Uint32(b[LeaderEpochOffset:]))
	h.Magic = int8(b[MagicOffset])
	h.CRC = be.Uint32(b[CRCOffset:])
	h.Attributes = int16(be.Uint16(b[AttributesOffset:]))
	h.LastOffsetDelta = int32(be.Uint32(b[LastOffsetDeltaOffset:]))
	h.BaseTimestamp = int64(be.Uint64(b[BaseTimestampOffset:]))
	h.MaxTimestamp = int64(be.Uint64(b[MaxTimestampOffset:]))
	h.ProducerID = int64(be.Uint64(b[ProducerIDOffset:]))
	h.ProducerEpoch = int16(be.Uint16(b[ProducerEpochOffset:]))
	h.BaseSequence = int32(be.Uint32(b[BaseSequenceOffset:]))
	h.RecordCount = int32(be.Uint32(b[RecordCountOffset:]))
	return h, nil
}

// Single-field accessors for hot paths that must not decode the whole header.
// b must hold at least HeaderSize bytes.

func BaseOffset(b []byte) int64 { return int64(binary.BigEndian.Uint64(b[BaseOffsetOffset:])) }
func Length(b []byte) int32     { return int32(binary.BigEndian.Uint32(b[LengthOffset:])) }
func LeaderEpoch(b []byte) int32 {
	return int32(binary.BigEndian.Uint32(b[LeaderEpochOffset:]))
}
func Magic(b []byte) int8       { return int8(b[MagicOffset]) }
func StoredCRC(b []byte) uint32 { return binary.BigEndian.Uint32(b[CRCOffset:]) }
func Attributes(b []byte) int16 { return int16(binary.BigEndian.Uint16(b[AttributesOffset:])) }
func LastOffsetDelta(b []byte) int32 {
	return int32(binary.BigEndian.Uint32(b[LastOffsetDeltaOffset:]))
}
func MaxTimestamp(b []byte) int64 { return int64(binary.BigEndian.Uint64(b[MaxTimestampOffset:])) }

// SetBaseOffset and SetLeaderEpoch patch fields outside the CRC in place.
func SetBaseOffset(b []byte, off int64) {
	binary.BigEndian.PutUint64(b[BaseOffsetOffset:], uint64(off))
}
func SetLeaderEpoch(b []byte, e int32) {
	binary.BigEndian.PutUint32(b[LeaderEpochOffset:], uint32(e))
}

// SetMaxTimestamp patches MaxTimestamp, which is inside the CRC; the caller
// must call SetCRC afterwards.
func SetMaxTimestamp(b []byte, ts int64) {
	binary.BigEndian.PutUint64(b[MaxTimestampOffset:], uint64(ts))
}

// SetCRC recomputes and stores the batch CRC.
func SetCRC(b []byte) { binary.BigEndian.PutUint32(b[CRCOffset:], CRC(b)) }

// Next splits the first batch off a record set. It returns the batch, the
// rest, and ErrShort if the length field is missing, negative or points past
// the end of b. Magic and CRC are not checked.
func Next(b []byte) (batch, rest []byte, err error) {
	if len(b) < LogOverhead+5 { // offset, length, epoch, magic
		return nil, b, ErrShort
	}
	n := int64(Length(b))
	if n < 0 || int64(len(b)) < LogOverhead+n {
		return nil, b, ErrShort
	}
	end := LogOverhead + int(n)
	return b[:end:end], b[end:], nil
}

package abi

import (
	"encoding/binary"
	"errors"
)

// Version is the ABI version this package implements. A module declares
// the version it was written for (descriptor key "abi"); the host refuses
// any other.
const Version = 1

// Names of the exports a policy module provides.
const (
	// ExportDescribe is `verbatim_describe() -> i64`: the address (high 32
	// bits) and length (low 32 bits) of the module's descriptor text.
	ExportDescribe = "verbatim_describe"
	// ExportAlloc is `verbatim_alloc(size i32) -> i32`: the address of a
	// buffer of at least size bytes that stays valid until the next
	// verbatim_alloc call. The host writes a judge call's input there.
	ExportAlloc = "verbatim_alloc"
	// ExportJudge is `verbatim_judge(ptr i32, len i32) -> i64`: judge the
	// input at ptr. 0 accepts every batch; anything else is the address
	// (high 32 bits) and length (low 32 bits) of a verdict list.
	ExportJudge = "verbatim_judge"
	// ExportMemory is the module's linear memory.
	ExportMemory = "memory"
	// ExportInitialize is the optional reactor initialiser (Go, TinyGo,
	// Rust wasip1 reactors); the host calls it once per instance.
	ExportInitialize = "_initialize"
)

// Needs are what a module asks for beyond the batch headers.
type Needs uint32

const (
	// NeedControlBytes: the whole bytes of control batches.
	NeedControlBytes Needs = 1 << 0
	// NeedBatchBytes: the whole bytes of every batch (implies control).
	NeedBatchBytes Needs = 1 << 1
)

// MirrorMode is the topic's mirror configuration.
type MirrorMode uint8

const (
	ModeNone MirrorMode = 0 // an ordinary topic
	ModePush MirrorMode = 1 // mirror.mode=push
)

// MirrorState is where a mirror topic is in its life.
type MirrorState uint8

const (
	StateNone      MirrorState = 0 // not a mirror (or a stopped one)
	StateMirroring MirrorState = 1
	StateStopping  MirrorState = 2 // stop/failover in progress
)

// Input layout: a fixed 64-byte context header, then the tables it points
// at. Integers are little-endian (WebAssembly's byte order) except inside
// the batch headers, which are copied from the wire (big-endian).
const (
	OffVersion        = 0  // u32: ABI version of the input (1)
	OffHeaderSize     = 4  // u32: size of this fixed header (64)
	OffFlags          = 8  // u32: FlagBatchBytes, FlagControlBytes
	OffMirrorMode     = 12 // u8
	OffMirrorState    = 13 // u8
	OffPartition      = 16 // i32
	OffLeaderEpoch    = 20 // i32: the partition's current leader epoch
	OffLogEndOffset   = 24 // i64
	OffLastEpoch      = 32 // i32: epoch of the last stored batch, -1 if none
	OffBatchCount     = 36 // u32
	OffBatchTable     = 40 // u32: offset of the batch table
	OffOpenTxnCount   = 44 // u32
	OffOpenTxnTable   = 48 // u32: offset of the open-transaction producer ids (i64 each)
	OffTopic          = 52 // u32: offset of the topic name (UTF-8)
	OffTopicLen       = 56 // u16
	OffConfigCount    = 58 // u16
	OffConfigTable    = 60 // u32: offset of the config table
	InputHeaderSize   = 64
	FlagBatchBytes    = 1 << 0
	FlagControlBytes  = 1 << 1
	BatchEntrySize    = 80
	EntryHeader       = 0  // 61 bytes: the batch header as on the wire
	EntryFlags        = 61 // u8: EntryControl, EntryControlTypeKnown
	EntryControlType  = 62 // i16
	EntrySize         = 64 // u32: whole batch size in bytes
	EntryBytesOffset  = 68 // u32: offset of the batch bytes, 0 if not passed
	EntryControl      = 1 << 0
	EntryControlKnown = 1 << 1
	BatchHeaderSize   = 61
)

// Verdict list layout: u32 count, then per rejection u32 batch index, i16
// Kafka error code, u16 reason length and the reason (UTF-8), unpadded.
const (
	VerdictCountSize = 4
	VerdictFixedSize = 8
	MaxReasonLen     = 1024
)

// ErrMalformed is returned for inputs or verdict lists that break the
// layout.
var ErrMalformed = errors.New("policy abi: malformed")

var le = binary.LittleEndian

// Rejection is one rejected batch.
type Rejection struct {
	Batch  int
	Code   int16
	Reason string
}

// AppendVerdicts appends the verdict list for rs (reasons longer than
// MaxReasonLen are cut).
func AppendVerdicts(dst []byte, rs []Rejection) []byte {
	dst = le.AppendUint32(dst, uint32(len(rs)))
	for _, r := range rs {
		reason := r.Reason
		if len(reason) > MaxReasonLen {
			reason = reason[:MaxReasonLen]
		}
		dst = le.AppendUint32(dst, uint32(r.Batch))
		dst = le.AppendUint16(dst, uint16(r.Code))
		dst = le.AppendUint16(dst, uint16(len(reason)))
		dst = append(dst, reason...)
	}
	return dst
}

// DecodeVerdicts parses a verdict list for an input of nbatches batches,
// calling fn per rejection. The reason aliases b. A batch index out of
// range, a reason past the end, a reason longer than MaxReasonLen or
// trailing bytes are ErrMalformed.
func DecodeVerdicts(b []byte, nbatches int, fn func(batch int, code int16, reason []byte)) error {
	if len(b) < VerdictCountSize {
		return ErrMalformed
	}
	n := le.Uint32(b)
	b = b[VerdictCountSize:]
	if uint64(n)*VerdictFixedSize > uint64(len(b)) {
		return ErrMalformed
	}
	for i := uint32(0); i < n; i++ {
		if len(b) < VerdictFixedSize {
			return ErrMalformed
		}
		idx := le.Uint32(b)
		code := int16(le.Uint16(b[4:]))
		rl := int(le.Uint16(b[6:]))
		b = b[VerdictFixedSize:]
		if uint64(idx) >= uint64(nbatches) || rl > MaxReasonLen || rl > len(b) {
			return ErrMalformed
		}
		fn(int(idx), code, b[:rl:rl])
		b = b[rl:]
	}
	if len(b) != 0 {
		return ErrMalformed
	}
	return nil
}

package abi

import "encoding/binary"

var be = binary.BigEndian

// Header is a decoded v2 record batch header (the 61 wire bytes).
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

// Attribute bits of a v2 batch.
const (
	AttrCodecMask     = 0x07
	AttrLogAppendTime = 0x08
	AttrTransactional = 0x10
	AttrControl       = 0x20
	AttrDeleteHorizon = 0x40
)

// ParseHeader decodes 61 wire bytes; b must hold at least BatchHeaderSize
// bytes.
func ParseHeader(b []byte) Header {
	_ = b[BatchHeaderSize-1]
	return Header{
		BaseOffset:      int64(be.Uint64(b[0:])),
		Length:          int32(be.Uint32(b[8:])),
		LeaderEpoch:     int32(be.Uint32(b[12:])),
		Magic:           int8(b[16]),
		CRC:             be.Uint32(b[17:]),
		Attributes:      int16(be.Uint16(b[21:])),
		LastOffsetDelta: int32(be.Uint32(b[23:])),
		BaseTimestamp:   int64(be.Uint64(b[27:])),
		MaxTimestamp:    int64(be.Uint64(b[35:])),
		ProducerID:      int64(be.Uint64(b[43:])),
		ProducerEpoch:   int16(be.Uint16(b[51:])),
		BaseSequence:    int32(be.Uint32(b[53:])),
		RecordCount:     int32(be.Uint32(b[57:])),
	}
}

// Input is a judge call's input, validated once by ParseInput; its
// accessors then only index.
type Input struct {
	b     []byte
	tab   uint32 // offset of the batch table
	n     int    // batch count
	bytes bool   // batch bytes may be passed (flags); entries were checked
}

// Batch is one batch of an Input.
type Batch struct {
	Header Header
	// Control is true for control batches (attribute bit 5).
	Control bool
	// ControlType is the control record's type when ControlTypeKnown
	// (the host decoded the key of the batch's first record).
	ControlType      int16
	ControlTypeKnown bool
	// Size is the whole batch size in bytes.
	Size int
	// Bytes is the whole batch when the module asked for it, else nil.
	Bytes []byte
}

func in(b []byte, off, n uint64) bool { return off <= uint64(len(b)) && n <= uint64(len(b))-off }

// ParseInput checks that every table of b lies inside b.
func ParseInput(b []byte) (Input, error) {
	if len(b) < InputHeaderSize || le.Uint32(b[OffVersion:]) != Version || le.Uint32(b[OffHeaderSize:]) < InputHeaderSize {
		return Input{}, ErrMalformed
	}
	nb := uint64(le.Uint32(b[OffBatchCount:]))
	if !in(b, uint64(le.Uint32(b[OffBatchTable:])), nb*BatchEntrySize) ||
		!in(b, uint64(le.Uint32(b[OffOpenTxnTable:])), uint64(le.Uint32(b[OffOpenTxnCount:]))*8) ||
		!in(b, uint64(le.Uint32(b[OffTopic:])), uint64(le.Uint16(b[OffTopicLen:]))) {
		return Input{}, ErrMalformed
	}
	// Config table: walk it once.
	off := uint64(le.Uint32(b[OffConfigTable:]))
	for i := 0; i < int(le.Uint16(b[OffConfigCount:])); i++ {
		for j := 0; j < 2; j++ {
			if !in(b, off, 2) {
				return Input{}, ErrMalformed
			}
			n := uint64(le.Uint16(b[off:]))
			if !in(b, off+2, n) {
				return Input{}, ErrMalformed
			}
			off += 2 + n
		}
	}
	tab := uint64(le.Uint32(b[OffBatchTable:]))
	// Bytes offsets are only read (and so only checked) when the flags
	// say bytes were passed: a headers-only call costs no walk here.
	withBytes := le.Uint32(b[OffFlags:])&(FlagBatchBytes|FlagControlBytes) != 0
	for i := uint64(0); withBytes && i < nb; i++ {
		e := b[tab+i*BatchEntrySize:]
		if bo := uint64(le.Uint32(e[EntryBytesOffset:])); bo != 0 && !in(b, bo, uint64(le.Uint32(e[EntrySize:]))) {
			return Input{}, ErrMalformed
		}
	}
	return Input{b: b, tab: uint32(tab), n: int(nb), bytes: withBytes}, nil
}

func (x Input) Partition() int32          { return int32(le.Uint32(x.b[OffPartition:])) }
func (x Input) CurrentLeaderEpoch() int32 { return int32(le.Uint32(x.b[OffLeaderEpoch:])) }
func (x Input) LogEndOffset() int64       { return int64(le.Uint64(x.b[OffLogEndOffset:])) }
func (x Input) LastBatchEpoch() int32     { return int32(le.Uint32(x.b[OffLastEpoch:])) }
func (x Input) MirrorMode() MirrorMode    { return MirrorMode(x.b[OffMirrorMode]) }
func (x Input) MirrorState() MirrorState  { return MirrorState(x.b[OffMirrorState]) }
func (x Input) NumBatches() int           { return int(le.Uint32(x.b[OffBatchCount:])) }
func (x Input) NumOpenTransactions() int  { return int(le.Uint32(x.b[OffOpenTxnCount:])) }
func (x Input) BatchBytesPassed() bool    { return le.Uint32(x.b[OffFlags:])&FlagBatchBytes != 0 }
func (x Input) ControlBytesPassed() bool {
	return le.Uint32(x.b[OffFlags:])&(FlagBatchBytes|FlagControlBytes) != 0
}
func (x Input) topicBytes() []byte {
	o := le.Uint32(x.b[OffTopic:])
	return x.b[o : o+uint32(le.Uint16(x.b[OffTopicLen:]))]
}
func (x Input) Topic() string            { return string(x.topicBytes()) }
func (x Input) TopicIs(name string) bool { return string(x.topicBytes()) == name }
func (x Input) OpenTransaction(i int) int64 {
	return int64(le.Uint64(x.b[le.Uint32(x.b[OffOpenTxnTable:])+uint32(i)*8:]))
}

// HasOpenTransaction reports whether pid has a transaction open before
// this call's batches.
func (x Input) HasOpenTransaction(pid int64) bool {
	for i, n := 0, x.NumOpenTransactions(); i < n; i++ {
		if x.OpenTransaction(i) == pid {
			return true
		}
	}
	return false
}

// Config returns a topic config the module declared (absent when the
// topic has no value for it).
func (x Input) Config(key string) (string, bool) {
	off := le.Uint32(x.b[OffConfigTable:])
	for i := 0; i < int(le.Uint16(x.b[OffConfigCount:])); i++ {
		kl := uint32(le.Uint16(x.b[off:]))
		k := x.b[off+2 : off+2+kl]
		off += 2 + kl
		vl := uint32(le.Uint16(x.b[off:]))
		v := x.b[off+2 : off+2+vl]
		off += 2 + vl
		if string(k) == key {
			return string(v), true
		}
	}
	return "", false
}

// entry returns batch i's table entry.
func (x Input) entry(i int) []byte {
	o := x.tab + uint32(i)*BatchEntrySize
	return x.b[o : o+BatchEntrySize : o+BatchEntrySize]
}

// Header returns batch i's 61 header bytes as on the wire. The single
// field accessors below read from it without decoding the rest; they are
// what a policy looking at one or two fields should use.
func (x Input) Header(i int) []byte { return x.entry(i)[:BatchHeaderSize] }

func (x Input) BaseOffset(i int) int64    { return int64(be.Uint64(x.entry(i)[0:])) }
func (x Input) LeaderEpoch(i int) int32   { return int32(be.Uint32(x.entry(i)[12:])) }
func (x Input) Attributes(i int) int16    { return int16(be.Uint16(x.entry(i)[21:])) }
func (x Input) ProducerID(i int) int64    { return int64(be.Uint64(x.entry(i)[43:])) }
func (x Input) ProducerEpoch(i int) int16 { return int16(be.Uint16(x.entry(i)[51:])) }
func (x Input) BaseSequence(i int) int32  { return int32(be.Uint32(x.entry(i)[53:])) }
func (x Input) IsControl(i int) bool      { return x.entry(i)[EntryFlags]&EntryControl != 0 }
func (x Input) BatchSize(i int) int       { return int(le.Uint32(x.entry(i)[EntrySize:])) }

// Batch returns batch i (0 <= i < NumBatches), fully decoded.
func (x Input) Batch(i int) Batch {
	e := x.entry(i)
	bt := Batch{
		Header:           ParseHeader(e[EntryHeader:]),
		Control:          e[EntryFlags]&EntryControl != 0,
		ControlTypeKnown: e[EntryFlags]&EntryControlKnown != 0,
		ControlType:      int16(le.Uint16(e[EntryControlType:])),
		Size:             int(le.Uint32(e[EntrySize:])),
	}
	if o := le.Uint32(e[EntryBytesOffset:]); o != 0 && x.bytes {
		bt.Bytes = x.b[o : o+uint32(bt.Size) : o+uint32(bt.Size)]
	}
	return bt
}

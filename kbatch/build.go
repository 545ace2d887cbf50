package kbatch

import (
	"encoding/binary"
	"io"
)

// Batch describes a batch to encode. It is meant for tests, benchmarks and
// for the few batches the broker writes itself (control markers).
type Batch struct {
	BaseOffset      int64
	LeaderEpoch     int32
	Attributes      int16 // codec, timestamp type, transactional, control, delete horizon
	LastOffsetDelta int32 // -1: derived from the records (len-1, or the last OffsetDelta)
	BaseTimestamp   int64
	MaxTimestamp    int64 // -1: derived from the records
	ProducerID      int64
	ProducerEpoch   int16
	BaseSequence    int32
	Records         []Record
}

// NewBatch returns a Batch with the defaults of a non-idempotent producer.
func NewBatch(baseTimestamp int64, recs ...Record) Batch {
	return Batch{
		LeaderEpoch:     -1,
		LastOffsetDelta: -1,
		BaseTimestamp:   baseTimestamp,
		MaxTimestamp:    -1,
		ProducerID:      NoProducerID,
		ProducerEpoch:   -1,
		BaseSequence:    -1,
		Records:         recs,
	}
}

// Encode builds the wire bytes of b, compressing with the codec in its
// attributes and computing the CRC.
func Encode(b Batch) ([]byte, error) {
	var recs []byte
	maxTS := b.BaseTimestamp
	lod := int32(len(b.Records) - 1)
	for i := range b.Records {
		r := &b.Records[i]
		recs = AppendRecord(recs, r)
		if ts := b.BaseTimestamp + r.TimestampDelta; ts > maxTS {
			maxTS = ts
		}
		lod = r.OffsetDelta
	}
	if len(b.Records) == 0 {
		lod = 0
	}
	if b.LastOffsetDelta >= 0 {
		lod = b.LastOffsetDelta
	}
	if b.MaxTimestamp != -1 {
		maxTS = b.MaxTimestamp
	}
	body, err := Compress(Codec(b.Attributes&CodecMask), recs)
	if err != nil {
		return nil, err
	}
	out := make([]byte, HeaderSize, HeaderSize+len(body))
	be := binary.BigEndian
	be.PutUint64(out[BaseOffsetOffset:], uint64(b.BaseOffset))
	be.PutUint32(out[LengthOffset:], uint32(HeaderSize-LogOverhead+len(body)))
	be.PutUint32(out[LeaderEpochOffset:], uint32(b.LeaderEpoch))
	out[MagicOffset] = 2
	be.PutUint16(out[AttributesOffset:], uint16(b.Attributes))
	be.PutUint32(out[LastOffsetDeltaOffset:], uint32(lod))
	be.PutUint64(out[BaseTimestampOffset:], uint64(b.BaseTimestamp))
	be.PutUint64(out[MaxTimestampOffset:], uint64(maxTS))
	be.PutUint64(out[ProducerIDOffset:], uint64(b.ProducerID))
	be.PutUint16(out[ProducerEpochOffset:], uint16(b.ProducerEpoch))
	be.PutUint32(out[BaseSequenceOffset:], uint32(b.BaseSequence))
	be.PutUint32(out[RecordCountOffset:], uint32(len(b.Records)))
	out = append(out, body...)
	SetCRC(out)
	return out, nil
}

// ControlKey returns the key of a control record of the given type.
func ControlKey(typ int16) []byte {
	return []byte{0, 0, byte(uint16(typ) >> 8), byte(typ)}
}

// EndTxnMarkerValue returns the value of a COMMIT/ABORT marker record
// (version 0, coordinator epoch).
func EndTxnMarkerValue(coordinatorEpoch int32) []byte {
	v := []byte{0, 0, 0, 0, 0, 0}
	binary.BigEndian.PutUint32(v[2:], uint32(coordinatorEpoch))
	return v
}

// MirrorPidResetValue returns the value of a MIRROR_PID_RESET (type 7)
// control record: MirrorPidResetRecord{Version int16, SourceClusterId
// string}, flexible version 0 (compact string, empty tagged fields).
func MirrorPidResetValue(sourceClusterID string) []byte {
	v := []byte{0, 0}
	v = binary.AppendUvarint(v, uint64(len(sourceClusterID))+1)
	v = append(v, sourceClusterID...)
	return append(v, 0)
}

// ControlType returns the control type of a control batch's single record:
// the int16 after the key's int16 version. ok is false when the batch is not
// a control batch (of any codec) that decodes whole with a key of 4 bytes or
// more.
func ControlType(b []byte) (typ int16, ok bool) {
	if len(b) < HeaderSize || Attributes(b)&ControlBit == 0 {
		return 0, false
	}
	// Stream it as Records would decode it (same limits, same verdict on
	// the whole batch) but hold one record at a time instead of copying
	// every record of a compressed batch only to read the first key.
	rr, err := NewRecordReader(b, Limits{MaxBatchBytes: maxDecompressed, Keep: true})
	if err != nil {
		return 0, false
	}
	defer rr.Close()
	ok = false
	for i := 0; ; i++ {
		if _, err := rr.Next(); err != nil {
			return typ, ok && err == io.EOF
		}
		rec, err := decodeBody(rr.curBody)
		if err != nil {
			return 0, false
		}
		if i == 0 {
			if len(rec.Key) < 4 {
				return 0, false
			}
			typ, ok = int16(binary.BigEndian.Uint16(rec.Key[2:])), true
		}
	}
}

package storage

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	"github.com/verbatim-kafka/verbatim/kbatch"
)

// ErrMalformedControl is wrapped by ParseControlBatch errors.
var ErrMalformedControl = errors.New("storage: malformed control record")

// maxControlRecordBytes bounds the decompressed control record of a
// compressed control batch (a marker's key and value are a few bytes).
const maxControlRecordBytes = 1 << 20

// ControlRecord is what producer state needs from the single record of a
// control batch.
type ControlRecord struct {
	// Present is false for a control batch without records (compaction
	// removed the marker; Kafka then leaves producer state alone).
	Present bool
	// Type is the control type from the key: kbatch.ControlAbort,
	// kbatch.ControlCommit, kbatch.ControlMirrorPidReset, or another
	// (unknown) type. -1 when the record could not be decoded.
	Type int16
	// CoordinatorEpoch is the coordinator epoch of a COMMIT/ABORT marker.
	CoordinatorEpoch int32
	// Timestamp is the record's timestamp (base timestamp plus delta, or
	// the batch max timestamp for LogAppendTime batches).
	Timestamp int64
	// TransactionVersion is not in the record: it is the transaction
	// version of a marker the local coordinator writes (WriteTxnMarkers),
	// used only with OriginCoordinator. 2 applies KIP-890's strict epoch
	// check (the marker epoch must be above the producer's). 0 otherwise.
	TransactionVersion int16
}

// ParseControlBatch decodes the control record of a whole control batch
// without allocating when the batch is uncompressed (Kafka always writes
// control batches uncompressed; compressed ones are decoded the slow way).
// An error wraps ErrMalformedControl; a caller in verbatim mode that must
// store the batch anyway passes ControlRecord{Present: true, Type: -1},
// which producer state treats as an unknown control type.
func ParseControlBatch(batch []byte) (ControlRecord, error) {
	if len(batch) < kbatch.HeaderSize {
		return ControlRecord{Type: -1}, fmt.Errorf("%w: %d bytes is shorter than a batch header", ErrMalformedControl, len(batch))
	}
	attrs := kbatch.Attributes(batch)
	if attrs&kbatch.ControlBit == 0 {
		return ControlRecord{Type: -1}, fmt.Errorf("%w: not a control batch", ErrMalformedControl)
	}
	count := int32(binary.BigEndian.Uint32(batch[kbatch.RecordCountOffset:]))
	if count == 0 {
		return ControlRecord{Type: -1}, nil
	}
	if count < 0 {
		return ControlRecord{Type: -1}, fmt.Errorf("%w: negative record count %d", ErrMalformedControl, count)
	}
	var key, value []byte
	var tsDelta int64
	if kbatch.Codec(attrs&kbatch.CodecMask) == kbatch.CodecNone {
		var err error
		key, value, tsDelta, err = firstRecordFields(batch[kbatch.HeaderSize:])
		if err != nil {
			return ControlRecord{Type: -1}, err
		}
	} else {
		// Streamed: only the first record is decompressed, and no
		// further than maxControlRecordBytes (a hostile compressed
		// control batch, stored by a verbatim append, cannot make
		// recovery inflate it).
		rr, err := kbatch.NewRecordReader(batch, kbatch.Limits{MaxRecordBytes: maxControlRecordBytes, Keep: true})
		if err != nil {
			return ControlRecord{Type: -1}, fmt.Errorf("%w: %v", ErrMalformedControl, err)
		}
		defer rr.Close() // after key and value are read below
		if _, err := rr.Next(); err == io.EOF {
			return ControlRecord{Type: -1}, nil
		} else if err != nil {
			return ControlRecord{Type: -1}, fmt.Errorf("%w: %v", ErrMalformedControl, err)
		}
		rec, err := rr.Record()
		if err != nil {
			return ControlRecord{Type: -1}, fmt.Errorf("%w: %v", ErrMalformedControl, err)
		}
		key, value, tsDelta = rec.Key, rec.Value, rec.TimestampDelta
	}
	if len(key) < 4 {
		return ControlRecord{Type: -1}, fmt.Errorf("%w: control key of %d bytes (need 4)", ErrMalformedControl, len(key))
	}
	if v := int16(binary.BigEndian.Uint16(key)); v < 0 {
		return ControlRecord{Type: -1}, fmt.Errorf("%w: negative control key version %d", ErrMalformedControl, v)
	}
	c := ControlRecord{Present: true, Type: int16(binary.BigEndian.Uint16(key[2:])), CoordinatorEpoch: -1}
	if attrs&kbatch.TimestampTypeBit != 0 {
		c.Timestamp = kbatch.MaxTimestamp(batch)
	} else {
		c.Timestamp = int64(binary.BigEndian.Uint64(batch[kbatch.BaseTimestampOffset:])) + tsDelta
	}
	if c.Type == kbatch.ControlAbort || c.Type == kbatch.ControlCommit {
		// EndTxnMarker value: version int16, coordinator epoch int32.
		if len(value) < 6 {
			return ControlRecord{Type: -1}, fmt.Errorf("%w: end transaction marker value of %d bytes (need 6)", ErrMalformedControl, len(value))
		}
		c.CoordinatorEpoch = int32(binary.BigEndian.Uint32(value[2:]))
	}
	return c, nil
}

// firstRecordFields decodes key, value and timestamp delta of the first
// record in an uncompressed records section.
func firstRecordFields(b []byte) (key, value []byte, tsDelta int64, err error) {
	bad := func(what string) error { return fmt.Errorf("%w: bad %s in first record", ErrMalformedControl, what) }
	length, n := binary.Varint(b)
	if n <= 0 || length < 0 || int64(len(b)-n) < length {
		return nil, nil, 0, bad("length")
	}
	r := b[n : n+int(length)]
	if len(r) < 1 {
		return nil, nil, 0, bad("attributes")
	}
	r = r[1:] // attributes
	tsDelta, n = binary.Varint(r)
	if n <= 0 {
		return nil, nil, 0, bad("timestamp delta")
	}
	r = r[n:]
	if _, n = binary.Varint(r); n <= 0 { // offset delta
		return nil, nil, 0, bad("offset delta")
	}
	r = r[n:]
	klen, n := binary.Varint(r)
	if n <= 0 || klen < -1 || int64(len(r)-n) < klen {
		return nil, nil, 0, bad("key")
	}
	r = r[n:]
	if klen >= 0 {
		key, r = r[:klen], r[klen:]
	}
	vlen, n := binary.Varint(r)
	if n <= 0 || vlen < -1 || int64(len(r)-n) < vlen {
		return nil, nil, 0, bad("value")
	}
	r = r[n:]
	if vlen >= 0 {
		value = r[:vlen]
	}
	return key, value, tsDelta, nil
}

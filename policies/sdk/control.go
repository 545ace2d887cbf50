package sdk

import (
	"encoding/binary"
	"errors"
)

// ControlRecord is the single record of a control batch.
type ControlRecord struct {
	OffsetDelta int64
	KeyNull     bool
	Key         []byte
	ValueNull   bool
	Value       []byte
	NumHeaders  int64
}

// KeyVersion and Type read the control key (ok false if shorter than 4).
func (r *ControlRecord) KeyVersion() (int16, bool) {
	if len(r.Key) < 4 {
		return 0, false
	}
	return int16(binary.BigEndian.Uint16(r.Key)), true
}

func (r *ControlRecord) Type() (int16, bool) {
	if len(r.Key) < 4 {
		return 0, false
	}
	return int16(binary.BigEndian.Uint16(r.Key[2:])), true
}

// ErrRecords is wrapped by record decoding errors.
var ErrRecords = errors.New("malformed record")

// FirstRecord decodes the first record of an uncompressed batch and
// returns it with the number of records the data section holds. It
// refuses compressed batches and any byte the records do not account for.
func FirstRecord(batch []byte) (first ControlRecord, n int, err error) {
	if len(batch) < 61 {
		return first, 0, errors.New("batch shorter than its header")
	}
	if batch[22]&0x07 != 0 {
		return first, 0, errors.New("batch is compressed")
	}
	data := batch[61:]
	for len(data) > 0 {
		r, used, err := decodeRecord(data)
		if err != nil {
			return first, n, err
		}
		if n == 0 {
			first = r
		}
		n++
		data = data[used:]
	}
	return first, n, nil
}

type rd struct {
	b   []byte
	err error
}

func (r *rd) varint() int64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Varint(r.b)
	if n <= 0 {
		r.err = ErrRecords
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *rd) bytes() ([]byte, bool) {
	l := r.varint()
	if r.err != nil || l < 0 {
		return nil, l < 0
	}
	if l > int64(len(r.b)) {
		r.err = ErrRecords
		return nil, false
	}
	v := r.b[:l:l]
	r.b = r.b[l:]
	return v, false
}

func decodeRecord(b []byte) (ControlRecord, int, error) {
	var rec ControlRecord
	l, n := binary.Varint(b)
	if n <= 0 || l < 1 || l > int64(len(b)-n) {
		return rec, 0, errors.New("record length past the end of the batch")
	}
	r := rd{b: b[n+1 : n+int(l)]} // skip the attributes byte
	r.varint()                    // timestamp delta
	rec.OffsetDelta = r.varint()
	rec.Key, rec.KeyNull = r.bytes()
	rec.Value, rec.ValueNull = r.bytes()
	rec.NumHeaders = r.varint()
	if r.err == nil && (rec.NumHeaders < 0 || rec.NumHeaders > int64(len(r.b))) {
		r.err = errors.New("bad header count")
	}
	for i := int64(0); i < rec.NumHeaders && r.err == nil; i++ {
		if _, null := r.bytes(); null {
			r.err = errors.New("null header key")
		}
		r.bytes()
	}
	if r.err != nil {
		return rec, 0, r.err
	}
	if len(r.b) != 0 {
		return rec, 0, errors.New("trailing bytes inside a record")
	}
	return rec, n + int(l), nil
}

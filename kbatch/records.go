package kbatch

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// Record is one decoded record of a v2 batch. Key and Value are nil for a
// null key or value.
type Record struct {
	Attributes     int8
	TimestampDelta int64
	OffsetDelta    int32
	Key            []byte
	Value          []byte
	Headers        []RecordHeader
}

// RecordHeader is a record header; Value is nil for a null value.
type RecordHeader struct {
	Key   string
	Value []byte
}

// ErrMalformedRecords is wrapped by every record decoding error.
var ErrMalformedRecords = errors.New("kbatch: malformed records")

// Records decodes (and decompresses) the records of a whole batch. The
// returned records alias the decompressed buffer, or b when uncompressed.
func Records(b []byte) ([]Record, error) {
	h, err := ParseHeader(b)
	if err != nil {
		return nil, err
	}
	if h.Size() != len(b) {
		return nil, fmt.Errorf("%w: batch length %d does not match %d bytes", ErrMalformedRecords, h.Size(), len(b))
	}
	data, err := Decompress(h.Codec(), b[HeaderSize:])
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrMalformedRecords, err)
	}
	if h.RecordCount < 0 {
		return nil, fmt.Errorf("%w: negative record count", ErrMalformedRecords)
	}
	if int64(h.RecordCount) > int64(len(data)) { // every record takes >= 1 byte... in practice >= 7
		return nil, fmt.Errorf("%w: record count %d exceeds data", ErrMalformedRecords, h.RecordCount)
	}
	recs := make([]Record, 0, h.RecordCount)
	for i := int32(0); i < h.RecordCount; i++ {
		var r Record
		var n int
		r, n, err = decodeRecord(data)
		if err != nil {
			return nil, fmt.Errorf("%w: record %d: %v", ErrMalformedRecords, i, err)
		}
		data = data[n:]
		recs = append(recs, r)
	}
	if len(data) != 0 {
		return nil, fmt.Errorf("%w: %d trailing bytes after %d records", ErrMalformedRecords, len(data), h.RecordCount)
	}
	return recs, nil
}

type reader struct {
	b   []byte
	err error
}

func (r *reader) varint() int64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Varint(r.b)
	if n <= 0 {
		r.err = errors.New("bad varint")
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *reader) bytes(n int64) []byte {
	if r.err != nil {
		return nil
	}
	if n < 0 {
		return nil
	}
	if n > int64(len(r.b)) {
		r.err = errors.New("field past end")
		return nil
	}
	v := r.b[:n:n]
	r.b = r.b[n:]
	return v
}

func decodeRecord(b []byte) (Record, int, error) {
	var rec Record
	length, n := binary.Varint(b)
	if n <= 0 {
		return rec, 0, errors.New("bad length varint")
	}
	if length < 0 || length > int64(len(b)-n) {
		return rec, 0, errors.New("record length past end")
	}
	body := b[n : n+int(length)]
	if len(body) < 1 {
		return rec, 0, errors.New("empty record")
	}
	rec.Attributes = int8(body[0])
	r := reader{b: body[1:]}
	rec.TimestampDelta = r.varint()
	rec.OffsetDelta = int32(r.varint())
	rec.Key = r.bytes(r.varint())
	rec.Value = r.bytes(r.varint())
	nh := r.varint()
	if r.err == nil && (nh < 0 || nh > int64(len(r.b))) {
		r.err = errors.New("bad header count")
	}
	for i := int64(0); i < nh && r.err == nil; i++ {
		kl := r.varint()
		if kl < 0 {
			r.err = errors.New("null header key")
			break
		}
		k := r.bytes(kl)
		v := r.bytes(r.varint())
		rec.Headers = append(rec.Headers, RecordHeader{Key: string(k), Value: v})
	}
	if r.err != nil {
		return rec, 0, r.err
	}
	if len(r.b) != 0 {
		return rec, 0, errors.New("trailing bytes in record")
	}
	return rec, n + int(length), nil
}

// AppendRecord appends the wire encoding of r.
func AppendRecord(dst []byte, r *Record) []byte {
	var body []byte
	body = append(body, byte(r.Attributes))
	body = binary.AppendVarint(body, r.TimestampDelta)
	body = binary.AppendVarint(body, int64(r.OffsetDelta))
	body = appendBytes(body, r.Key)
	body = appendBytes(body, r.Value)
	body = binary.AppendVarint(body, int64(len(r.Headers)))
	for _, h := range r.Headers {
		body = binary.AppendVarint(body, int64(len(h.Key)))
		body = append(body, h.Key...)
		body = appendBytes(body, h.Value)
	}
	dst = binary.AppendVarint(dst, int64(len(body)))
	return append(dst, body...)
}

func appendBytes(dst, b []byte) []byte {
	if b == nil {
		return binary.AppendVarint(dst, -1)
	}
	dst = binary.AppendVarint(dst, int64(len(b)))
	return append(dst, b...)
}

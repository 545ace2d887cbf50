package kbatch

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
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

// Records decodes (and decompresses) the records of a whole batch, with
// the decompressed records section bounded by 256 MiB. It is for tests,
// tools and small batches the broker writes itself; readers that may meet
// large or hostile batches walk them with a RecordReader. The returned
// records alias b when it is uncompressed, else copies of their bytes.
func Records(b []byte) ([]Record, error) {
	rr, err := NewRecordReader(b, Limits{MaxBatchBytes: maxDecompressed, Keep: true})
	if err != nil {
		return nil, err
	}
	defer rr.Close()
	var recs []Record
	if rr.Codec() == CodecNone {
		recs = make([]Record, 0, min(int(rr.count), len(b)))
	}
	for {
		if _, err := rr.Next(); err != nil {
			if err == io.EOF {
				return recs, nil
			}
			return nil, err
		}
		body := rr.curBody
		if rr.Codec() != CodecNone {
			body = bytes.Clone(body)
		}
		rec, err := decodeBody(body)
		if err != nil {
			return nil, fmt.Errorf("%w: record %d: %v", ErrMalformedRecords, len(recs), err)
		}
		recs = append(recs, rec)
	}
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

// decodeBody decodes a record body (after its length varint) that Next
// has checked; the fields alias body.
func decodeBody(body []byte) (Record, error) {
	var rec Record
	if len(body) < 1 {
		return rec, errors.New("empty record")
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
	if nh > 0 && r.err == nil {
		rec.Headers = make([]RecordHeader, 0, nh)
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
		return rec, r.err
	}
	if len(r.b) != 0 {
		return rec, errors.New("trailing bytes in record")
	}
	return rec, nil
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

package hotpath

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// Produce request decoding without kmsg: versions 3-13 (flexible from 9,
// topic ids instead of names from 13). The decoded request aliases the frame:
// topic names, the transactional id and every record set are sub-slices of
// the body, so a request costs no allocation once the reusable struct has
// grown to the request's shape, whatever its batch count and size.

// Produce versions decoded here (Kafka 4 serves 3-13).
const (
	ProduceMinVersion = 3
	ProduceMaxVersion = 13
)

// ErrMalformedRequest is wrapped by every decoding error; the broker answers
// it by closing the connection, as Kafka does for unparsable requests.
var ErrMalformedRequest = errors.New("hotpath: malformed produce request")

// ProduceRequest is a decoded Produce request. It aliases the body it was
// decoded from and is only valid while that buffer is.
type ProduceRequest struct {
	Version int16
	// TransactionalID is nil when null.
	TransactionalID []byte
	Acks            int16
	TimeoutMs       int32
	Topics          []ProduceTopic

	parts []ProducePartition // backing array of every topic's Partitions
}

// ProduceTopic is one topic of a Produce request: Name up to v12, ID from
// v13.
type ProduceTopic struct {
	Name       []byte
	ID         [16]byte
	Partitions []ProducePartition

	from, to int // range in ProduceRequest.parts while decoding
}

// ProducePartition is one partition's record set (nil when null).
type ProducePartition struct {
	Index   int32
	Records []byte
}

// NumPartitions returns the number of partitions over all topics.
func (r *ProduceRequest) NumPartitions() int { return len(r.parts) }

// reader is a sticky-error big-endian reader over a frame.
type reader struct {
	b   []byte
	bad bool
}

func (r *reader) fail() { r.bad, r.b = true, nil }

func (r *reader) int16() int16 {
	if len(r.b) < 2 {
		r.fail()
		return 0
	}
	v := int16(binary.BigEndian.Uint16(r.b))
	r.b = r.b[2:]
	return v
}

func (r *reader) int32() int32 {
	if len(r.b) < 4 {
		r.fail()
		return 0
	}
	v := int32(binary.BigEndian.Uint32(r.b))
	r.b = r.b[4:]
	return v
}

// uvarint reads an unsigned varint of at most 5 bytes (bits past 32
// refused).
func (r *reader) uvarint() uint32 {
	var v uint32
	for i := 0; i < 5 && i < len(r.b); i++ {
		c := r.b[i]
		v |= uint32(c&0x7f) << (7 * i)
		if c&0x80 == 0 {
			if i == 4 && c > 0x0f {
				break
			}
			r.b = r.b[i+1:]
			return v
		}
	}
	r.fail()
	return 0
}

func (r *reader) span(n int) []byte {
	if n < 0 || n > len(r.b) {
		r.fail()
		return nil
	}
	v := r.b[:n:n]
	r.b = r.b[n:]
	return v
}

// length reads a string/bytes/array length: int16 or int32 in classic
// versions, uvarint N+1 in flexible ones (0 = null, returned as -1).
func (r *reader) length(flexible, wide bool) int {
	if flexible {
		return int(int64(r.uvarint()) - 1)
	}
	if wide {
		return int(r.int32())
	}
	return int(r.int16())
}

// skipTags skips a tagged-field section.
func (r *reader) skipTags() {
	n := r.uvarint()
	for ; n > 0 && !r.bad; n-- {
		r.uvarint() // tag
		r.span(int(r.uvarint()))
	}
}

// Decode decodes a Produce request body (the bytes after the request
// header) of the given version into r, reusing r's slices.
func (r *ProduceRequest) Decode(body []byte, version int16) error {
	if version < ProduceMinVersion || version > ProduceMaxVersion {
		return fmt.Errorf("%w: version %d outside %d-%d", ErrMalformedRequest, version, ProduceMinVersion, ProduceMaxVersion)
	}
	flexible := version >= 9
	r.Version = version
	r.Topics = r.Topics[:0]
	r.parts = r.parts[:0]
	rd := reader{b: body}
	if n := rd.length(flexible, false); n >= 0 {
		r.TransactionalID = rd.span(n)
	} else {
		r.TransactionalID = nil
	}
	r.Acks = rd.int16()
	r.TimeoutMs = rd.int32()
	nt := rd.length(flexible, true)
	minTopic := 2 // smallest encoded topic, to bound the count before growing
	if version >= 13 {
		minTopic = 18
	}
	if rd.bad || nt < 0 || nt > len(rd.b)/minTopic {
		return fmt.Errorf("%w: bad topic count %d", ErrMalformedRequest, nt)
	}
	for t := 0; t < nt; t++ {
		var topic ProduceTopic
		if version >= 13 {
			copy(topic.ID[:], rd.span(16))
		} else {
			n := rd.length(flexible, false)
			if n < 0 {
				return fmt.Errorf("%w: null topic name", ErrMalformedRequest)
			}
			topic.Name = rd.span(n)
		}
		np := rd.length(flexible, true)
		if rd.bad || np < 0 || np > len(rd.b)/6 {
			return fmt.Errorf("%w: bad partition count %d in topic %d", ErrMalformedRequest, np, t)
		}
		from := len(r.parts)
		for p := 0; p < np; p++ {
			var part ProducePartition
			part.Index = rd.int32()
			if n := rd.length(flexible, true); n >= 0 {
				part.Records = rd.span(n)
			}
			if flexible {
				rd.skipTags()
			}
			r.parts = append(r.parts, part)
		}
		if flexible {
			rd.skipTags()
		}
		if rd.bad {
			return fmt.Errorf("%w: truncated in topic %d", ErrMalformedRequest, t)
		}
		topic.from, topic.to = from, len(r.parts)
		r.Topics = append(r.Topics, topic)
	}
	if flexible {
		rd.skipTags()
	}
	if rd.bad {
		return fmt.Errorf("%w: truncated", ErrMalformedRequest)
	}
	// Point every topic at its partitions in the final backing array.
	for t := range r.Topics {
		tp := &r.Topics[t]
		tp.Partitions = r.parts[tp.from:tp.to:tp.to]
	}
	return nil
}

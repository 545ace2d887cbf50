package hotpath

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/verbatim-kafka/verbatim/wireext"
)

// Produce request decoding without kmsg: versions 3-13 (flexible from 9,
// topic ids instead of names from 13). The decoded request aliases the frame:
// topic names, the transactional id and every record set are sub-slices of
// the body, so a request costs no allocation once the reusable struct has
// grown to the request's shape, whatever its batch count and size. The same
// single pass decodes Verbatim's mirror produce fields (tag
// wireext.MirrorTag at request and partition level, docs/protocol.md);
// other tagged fields are skipped.

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
	// Mirror is the request-level MirrorProduce value (v9+), valid when
	// HasMirror: the request is a mirror produce.
	Mirror    wireext.MirrorProduce
	HasMirror bool

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
	// Mirror is the partition-level MirrorPartition value (v9+), valid
	// when HasMirror.
	Mirror    wireext.MirrorPartition
	HasMirror bool
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
	if len(r.b) > 0 && r.b[0] < 0x80 {
		// One byte: every length and count of an ordinary request.
		v := uint32(r.b[0])
		r.b = r.b[1:]
		return v
	}
	v, n := wireext.Uvarint(r.b)
	if n == 0 {
		r.fail()
		return 0
	}
	r.b = r.b[n:]
	return v
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

// field walks a tagged-field section and returns the value of its last
// field with the given tag (as kmsg keeps the last of duplicate tags).
func (r *reader) field(tag uint32) (v []byte, ok bool) {
	if r.bad {
		return nil, false
	}
	if len(r.b) > 0 && r.b[0] == 0 {
		// An empty section, by far the most common: no walk.
		r.b = r.b[1:]
		return nil, false
	}
	t := wireext.ReadTags(r.b)
	for t.Next() {
		if t.Tag() == tag {
			v, ok = t.Value(), true
		}
	}
	if t.Err() != nil {
		r.fail()
		return nil, false
	}
	r.b = t.Rest()
	return v, ok
}

// skipTags skips a tagged-field section (the value field finds is unused).
func (r *reader) skipTags() { r.field(0) }

// malformedTag wraps a mirror field's decoding error.
func malformedTag(err error) error { return fmt.Errorf("%w: %w", ErrMalformedRequest, err) }

// Decode decodes a Produce request body (the bytes after the request
// header) of the given version into r, reusing r's slices.
func (r *ProduceRequest) Decode(body []byte, version int16) error {
	if version < ProduceMinVersion || version > ProduceMaxVersion {
		return fmt.Errorf("%w: version %d outside %d-%d", ErrMalformedRequest, version, ProduceMinVersion, ProduceMaxVersion)
	}
	flexible := version >= 9
	r.Version = version
	r.Mirror, r.HasMirror = wireext.MirrorProduce{}, false
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
				v, ok := rd.field(wireext.MirrorTag)
				if ok {
					if err := part.Mirror.ReadFrom(v); err != nil {
						return malformedTag(err)
					}
					part.HasMirror = true
				}
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
	var mirror []byte
	if flexible {
		mirror, r.HasMirror = rd.field(wireext.MirrorTag)
	}
	if rd.bad {
		return fmt.Errorf("%w: truncated", ErrMalformedRequest)
	}
	if r.HasMirror {
		if err := r.Mirror.ReadFrom(mirror); err != nil {
			r.HasMirror = false
			return malformedTag(err)
		}
	}
	// Point every topic at its partitions in the final backing array.
	for t := range r.Topics {
		tp := &r.Topics[t]
		tp.Partitions = r.parts[tp.from:tp.to:tp.to]
	}
	return nil
}

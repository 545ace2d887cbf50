package wireext

import "errors"

// Errors of a tagged-field section that does not parse (Tags.Err).
var (
	ErrTagCount = errors.New("malformed tagged-field count")
	ErrTag      = errors.New("malformed tag")
	ErrTagSize  = errors.New("malformed tag size")
)

// Uvarint reads a Kafka unsigned varint from the start of b: at most 5
// bytes and 32 bits (Kafka's readUnsignedVarint). n is the number of bytes
// read, 0 when b is truncated or the varint is longer than 32 bits.
func Uvarint(b []byte) (v uint32, n int) {
	for i := 0; i < 5 && i < len(b); i++ {
		c := b[i]
		v |= uint32(c&0x7f) << (7 * i)
		if c&0x80 == 0 {
			if i == 4 && c > 0x0f {
				return 0, 0
			}
			return v, i + 1
		}
	}
	return 0, 0
}

// AppendUvarint appends v as a Kafka unsigned varint.
func AppendUvarint(dst []byte, v uint32) []byte {
	for v >= 0x80 {
		dst = append(dst, byte(v)|0x80)
		v >>= 7
	}
	return append(dst, byte(v))
}

// Tags walks one tagged-field section in place: ReadTags reads its field
// count, each Next one field (Tag, Value alias the input), and once Next
// returned false, Err says whether the section was malformed and Rest
// returns the bytes after it. A value type: walking costs no allocation.
type Tags struct {
	b    []byte
	left uint32
	err  error
	tag  uint32
	val  []byte
}

// ReadTags starts walking the section at the start of b.
func ReadTags(b []byte) Tags {
	n, k := Uvarint(b)
	if k == 0 {
		return Tags{err: ErrTagCount}
	}
	return Tags{b: b[k:], left: n}
}

// Next reads the next field; false at the end of the section or when it
// is malformed (Err).
func (t *Tags) Next() bool {
	if t.err != nil || t.left == 0 {
		return false
	}
	tag, k := Uvarint(t.b)
	if k == 0 {
		t.fail(ErrTag)
		return false
	}
	size, ks := Uvarint(t.b[k:])
	k += ks
	if ks == 0 || uint64(size) > uint64(len(t.b)-k) {
		t.fail(ErrTagSize)
		return false
	}
	end := k + int(size)
	t.tag, t.val, t.b = tag, t.b[k:end:end], t.b[end:]
	t.left--
	return true
}

func (t *Tags) fail(err error) { t.err, t.b, t.val, t.left = err, nil, nil, 0 }

// Left returns the number of fields the section still claims.
func (t *Tags) Left() int { return int(t.left) }

// Tag is the tag of the field Next read.
func (t *Tags) Tag() uint32 { return t.tag }

// Value is the value of the field Next read (capacity capped at its
// length).
func (t *Tags) Value() []byte { return t.val }

// Err is ErrTagCount, ErrTag or ErrTagSize when the section is malformed.
func (t *Tags) Err() error { return t.err }

// Rest returns the bytes after the last field read: after the section
// once Next returned false (nil when the section is malformed), after the
// field count before the first Next.
func (t *Tags) Rest() []byte { return t.b }

// skipTags walks a whole section and returns the bytes after it.
func skipTags(b []byte) ([]byte, error) {
	t := ReadTags(b)
	for t.Next() {
	}
	return t.Rest(), t.Err()
}

// appendTag appends one tagged field.
func appendTag(dst []byte, tag uint32, v []byte) []byte {
	dst = AppendUvarint(dst, tag)
	dst = AppendUvarint(dst, uint32(len(v)))
	return append(dst, v...)
}

package wireext

import (
	"encoding/binary"
	"errors"
	"fmt"
	"sort"
)

// The primitives of the link admin requests' flexible encoding (KIP-482):
// fixed-width big-endian integers, booleans as one byte, compact strings
// (uvarint length+1), compact nullable strings (0 is null), compact
// arrays (uvarint count+1), 16-byte ids, and a tag section ending every
// struct. Unlike the Produce values above, decoding these allocates (the
// strings, slices and maps of the result; nothing aliases the input).

// ErrLinkMessage is the error of every link admin message that does not
// parse; the text after it names the field.
var ErrLinkMessage = errors.New("malformed cluster link message")

// reader decodes one message; the first error sticks, later reads answer
// zero values.
type reader struct {
	b   []byte
	err error
}

func (r *reader) fail(field, why string) {
	if r.err == nil {
		r.err = fmt.Errorf("%w: %s: %s", ErrLinkMessage, field, why)
		r.b = nil
	}
}

func (r *reader) take(n int, field string) []byte {
	if r.err != nil {
		return nil
	}
	if len(r.b) < n {
		r.fail(field, "truncated")
		return nil
	}
	v := r.b[:n]
	r.b = r.b[n:]
	return v
}

func (r *reader) int16(field string) int16 {
	if v := r.take(2, field); v != nil {
		return int16(binary.BigEndian.Uint16(v))
	}
	return 0
}

func (r *reader) int32(field string) int32 {
	if v := r.take(4, field); v != nil {
		return int32(binary.BigEndian.Uint32(v))
	}
	return 0
}

func (r *reader) int64(field string) int64 {
	if v := r.take(8, field); v != nil {
		return int64(binary.BigEndian.Uint64(v))
	}
	return 0
}

// bool reads one byte; any non-zero byte is true, as Kafka reads it.
func (r *reader) bool(field string) bool {
	v := r.take(1, field)
	return v != nil && v[0] != 0
}

func (r *reader) uuid(field string) (id [16]byte) {
	if v := r.take(16, field); v != nil {
		copy(id[:], v)
	}
	return id
}

func (r *reader) uvarint(field string) uint32 {
	if r.err != nil {
		return 0
	}
	v, n := Uvarint(r.b)
	if n == 0 {
		r.fail(field, "malformed varint")
		return 0
	}
	r.b = r.b[n:]
	return v
}

// string reads a compact string; null is refused.
func (r *reader) string(field string) string {
	s, null := r.nullable(field)
	if null {
		r.fail(field, "null string")
	}
	return s
}

// nullableString reads a compact nullable string: null reads as "".
func (r *reader) nullableString(field string) string {
	s, _ := r.nullable(field)
	return s
}

func (r *reader) nullable(field string) (string, bool) {
	n := r.uvarint(field)
	if r.err != nil {
		return "", false
	}
	if n == 0 {
		return "", true
	}
	return string(r.take(int(n-1), field)), false
}

// arrayLen reads a compact array's count (null reads as empty). Every
// element takes at least min bytes, so a count the rest cannot hold is
// refused before anything is allocated for it.
func (r *reader) arrayLen(field string, min int) int {
	n := r.uvarint(field)
	if r.err != nil || n == 0 {
		return 0
	}
	if uint64(n-1)*uint64(min) > uint64(len(r.b)) {
		r.fail(field, "array longer than the message")
		return 0
	}
	return int(n - 1)
}

// tags skips a struct's tag section (unknown tags are ignored).
func (r *reader) tags(field string) {
	if r.err != nil {
		return
	}
	rest, err := skipTags(r.b)
	if err != nil {
		r.fail(field+" tags", err.Error())
		return
	}
	r.b = rest
}

// taggedFields reads a struct's tag section, calling f with each field
// (the value aliases the input: f copies what it keeps).
func (r *reader) taggedFields(field string, f func(tag uint32, val []byte)) {
	if r.err != nil {
		return
	}
	t := ReadTags(r.b)
	for t.Next() && r.err == nil {
		f(t.Tag(), t.Value())
	}
	if r.err != nil {
		return
	}
	if err := t.Err(); err != nil {
		r.fail(field+" tags", err.Error())
		return
	}
	r.b = t.Rest()
}

// strings reads a compact array of compact strings (empty: nil).
func (r *reader) strings(field string) []string {
	n := r.arrayLen(field, 1)
	if n == 0 {
		return nil
	}
	out := make([]string, n)
	for i := range out {
		out[i] = r.string(field)
	}
	return out
}

// stringMap reads a compact array of {key, value, tags} (empty: nil);
// a key given twice is refused.
func (r *reader) stringMap(field string) map[string]string {
	n := r.arrayLen(field, 3)
	if n == 0 {
		return nil
	}
	m := make(map[string]string, n)
	for i := 0; i < n && r.err == nil; i++ {
		k := r.string(field + " key")
		v := r.string(field + " value")
		r.tags(field)
		if _, dup := m[k]; dup && r.err == nil {
			r.fail(field, fmt.Sprintf("key %q given twice", k))
		}
		m[k] = v
	}
	return m
}

// end checks that a whole message was read.
func (r *reader) end(msg string) error {
	if r.err == nil && len(r.b) != 0 {
		r.fail(msg, fmt.Sprintf("%d bytes after the message", len(r.b)))
	}
	return r.err
}

func appendInt16(dst []byte, v int16) []byte { return binary.BigEndian.AppendUint16(dst, uint16(v)) }
func appendInt32(dst []byte, v int32) []byte { return binary.BigEndian.AppendUint32(dst, uint32(v)) }
func appendInt64(dst []byte, v int64) []byte { return binary.BigEndian.AppendUint64(dst, uint64(v)) }

func appendBool(dst []byte, v bool) []byte {
	if v {
		return append(dst, 1)
	}
	return append(dst, 0)
}

func appendString(dst []byte, s string) []byte {
	dst = AppendUvarint(dst, uint32(len(s))+1)
	return append(dst, s...)
}

// appendNullableString encodes "" as null.
func appendNullableString(dst []byte, s string) []byte {
	if s == "" {
		return append(dst, 0)
	}
	return appendString(dst, s)
}

func appendArrayLen(dst []byte, n int) []byte { return AppendUvarint(dst, uint32(n)+1) }

// appendNoTags ends a struct with an empty tag section.
func appendNoTags(dst []byte) []byte { return append(dst, 0) }

func appendStrings(dst []byte, ss []string) []byte {
	dst = appendArrayLen(dst, len(ss))
	for _, s := range ss {
		dst = appendString(dst, s)
	}
	return dst
}

// appendStringMap encodes m sorted by key (canonical).
func appendStringMap(dst []byte, m map[string]string) []byte {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	dst = appendArrayLen(dst, len(keys))
	for _, k := range keys {
		dst = appendString(dst, k)
		dst = appendString(dst, m[k])
		dst = appendNoTags(dst)
	}
	return dst
}

package kbatch

import (
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/verbatim-kafka/verbatim/wireext"
)

// Limits bound what a RecordReader decompresses (0: no limit). Both count
// decompressed bytes of the records section.
type Limits struct {
	// MaxRecordBytes bounds one record's body (its declared size, not
	// counting the length varint), as Kafka's max.decompressed.message.bytes
	// bounds DefaultRecord.readFrom: checked before the body is read.
	MaxRecordBytes int64
	// MaxBatchBytes bounds the whole decompressed records section; declared
	// sizes (snappy lengths, zstd content sizes, record lengths) are checked
	// against it before they are decoded.
	MaxBatchBytes int64
	// Keep makes Next hold the current record's bytes (at most
	// MaxRecordBytes, contiguous) so that Record can return them. Without
	// it key, value and header bytes are skipped as they stream past and
	// Record fails with ErrNotKept.
	Keep bool
}

var (
	// ErrUndecodable is wrapped by every error of a payload that is not
	// valid for its codec (bad header, corrupt block, checksum, truncation,
	// trailing bytes after the stream, a window or block size over what the
	// reader accepts).
	ErrUndecodable = errors.New("kbatch: payload not valid for its codec")
	// ErrRecordTooLarge: a record's declared size is over
	// Limits.MaxRecordBytes (a *LimitError carries the numbers).
	ErrRecordTooLarge = errors.New("kbatch: record over the decompressed record limit")
	// ErrBatchTooLarge: the records section decompresses (or declares that
	// it decompresses) to more than Limits.MaxBatchBytes (*LimitError).
	ErrBatchTooLarge = errors.New("kbatch: batch over the decompressed batch limit")
	// ErrNotKept is returned by Record when the reader was made without
	// Limits.Keep.
	ErrNotKept = errors.New("kbatch: record bytes not kept (Limits.Keep unset)")
)

// LimitError reports a limit that was hit; it wraps ErrRecordTooLarge or
// ErrBatchTooLarge.
type LimitError struct {
	Err    error
	Record int32 // index of the record in the batch
	Size   int64 // the declared or reached size
	Limit  int64
}

func (e *LimitError) Error() string {
	if e.Err == ErrRecordTooLarge {
		return fmt.Sprintf("record %d: invalid record size: %d exceeds the configured maximum record size of %d", e.Record, e.Size, e.Limit)
	}
	return fmt.Sprintf("records decompress to more than %d bytes (at least %d, at record %d)", e.Limit, e.Size, e.Record)
}

func (e *LimitError) Unwrap() error { return e.Err }

// RecordInfo is what Next reports of a record without holding its bytes.
type RecordInfo struct {
	Attributes     int8
	TimestampDelta int64
	OffsetDelta    int32
	KeyLen         int32 // -1: null key
	ValueLen       int32 // -1: null value
	Headers        int32 // number of headers
	Size           int32 // body size (after the length varint)
}

// windowSize is the read buffer of a compressed batch's RecordReader:
// records that fit are parsed in place, larger ones stream through it.
const windowSize = 64 << 10

// readerOverhead is the RecordReader itself beyond its window, rounded up.
const readerOverhead = 2 << 10

// RecordReader walks the records of one v2 batch with bounded memory:
// uncompressed batches are read in place; compressed ones stream through a
// fixed window from a pooled decoder whose state WorkingSet describes.
// It checks the declared record count against the records (premature end,
// trailing bytes), record structure (Kafka's DefaultRecord rules, varints
// bounded to 32/64 bits) and Limits. Not safe for concurrent use; Close
// returns it and its decoder to their pools.
type RecordReader struct {
	batch []byte
	codec Codec
	count int32
	lim   Limits
	ws    int64

	dec  decoder // nil for uncompressed batches
	win  []byte  // pooled window (compressed batches)
	buf  []byte  // what is parsed: win, batch records, or big
	r, w int     // buf[r:w] is unread
	eof  bool    // no more input beyond buf[:w]

	big   []byte // kept records larger than the window
	n     int32  // records returned by Next
	total int64  // decompressed bytes pulled from the decoder
	claim int64  // decompressed bytes of the records read (declared sizes)

	cur     RecordInfo
	curBody []byte // the current record's body when kept
	err     error  // sticky
	done    bool
}

var readerPool = sync.Pool{New: func() any { return &RecordReader{win: make([]byte, windowSize)} }}

// NewRecordReader checks b's header and, for a compressed batch, the
// structure of its stream headers and the sizes they declare (against
// lim), and returns a reader positioned before the first record. b must be
// a whole batch (Size() == len(b)). Large decoder buffers are allocated on
// the first Next, so a caller charges WorkingSet to a budget in between.
func NewRecordReader(b []byte, lim Limits) (*RecordReader, error) {
	h, err := ParseHeader(b)
	if err != nil {
		return nil, err
	}
	if h.Size() != len(b) {
		return nil, fmt.Errorf("%w: batch length %d does not match %d bytes", ErrMalformedRecords, h.Size(), len(b))
	}
	if h.RecordCount < 0 {
		return nil, fmt.Errorf("%w: negative record count %d", ErrMalformedRecords, h.RecordCount)
	}
	c := h.Codec()
	payload := b[HeaderSize:]
	var sc scan
	if c != CodecNone {
		if sc, err = scanStream(c, payload); err != nil {
			return nil, err
		}
		if lim.MaxBatchBytes > 0 && sc.declared > lim.MaxBatchBytes {
			return nil, &LimitError{Err: ErrBatchTooLarge, Size: sc.declared, Limit: lim.MaxBatchBytes}
		}
	}
	r := readerPool.Get().(*RecordReader)
	r.batch, r.codec, r.count, r.lim = b, c, h.RecordCount, lim
	r.r, r.w, r.n, r.total, r.claim, r.err, r.done, r.curBody = 0, 0, 0, 0, 0, nil, false, nil
	if c == CodecNone {
		r.buf, r.w, r.eof, r.ws = payload, len(payload), true, 0
		return r, nil
	}
	r.buf, r.eof, r.ws = r.win, false, sc.workingSet
	if r.dec, err = openDecoder(c, payload, &sc); err != nil {
		r.dec = nil
		r.Close()
		return nil, err
	}
	return r, nil
}

// WorkingSet is the decoder memory this reader's batch needs
// (WorkingSet(batch)); 0 for an uncompressed batch. Kept records add up
// to Limits.MaxRecordBytes on top.
func (r *RecordReader) WorkingSet() int64 { return r.ws }

// Codec is the batch's compression codec.
func (r *RecordReader) Codec() Codec { return r.codec }

// Close returns the reader and its decoder to their pools. The reader and
// anything Record returned must not be used afterwards.
func (r *RecordReader) Close() {
	if r.batch == nil {
		return // closed already
	}
	if r.dec != nil {
		r.dec.release()
		r.dec = nil
	}
	if cap(r.big) > 1<<20 {
		r.big = nil
	}
	r.batch, r.buf, r.curBody, r.err = nil, nil, nil, nil
	readerPool.Put(r)
}

// Next reads the next record. It returns io.EOF once the declared number
// of records was read and the stream ended right after them (its
// checksums verified); an error wrapping ErrMalformedRecords,
// ErrUndecodable or a *LimitError otherwise. Errors are sticky.
func (r *RecordReader) Next() (RecordInfo, error) {
	if r.err != nil {
		return RecordInfo{}, r.err
	}
	if r.done {
		return RecordInfo{}, io.EOF
	}
	r.curBody = nil
	if r.n == r.count {
		if err := r.fill(1); err != nil {
			return RecordInfo{}, r.fail(err)
		}
		if r.w > r.r {
			return RecordInfo{}, r.fail(fmt.Errorf("%w: incorrect declared batch size, records still remaining after %d records", ErrMalformedRecords, r.count))
		}
		r.done = true
		return RecordInfo{}, io.EOF
	}
	info, err := r.next()
	if err != nil {
		return RecordInfo{}, r.fail(err)
	}
	r.n++
	r.cur = info
	return info, nil
}

func (r *RecordReader) fail(err error) error {
	r.err = err
	return err
}

func (r *RecordReader) malformed(format string, args ...any) error {
	return fmt.Errorf("%w: record %d: %s", ErrMalformedRecords, r.n, fmt.Sprintf(format, args...))
}

// fill makes at least need bytes available in buf[r:w] unless the input
// ends first; it compacts the window and reads from the decoder.
func (r *RecordReader) fill(need int) error {
	if r.w-r.r >= need || r.eof {
		return nil
	}
	if r.r > 0 {
		r.w = copy(r.buf, r.buf[r.r:r.w])
		r.r = 0
	}
	for r.w < need && !r.eof {
		n, err := r.read(r.buf[r.w:])
		r.w += n
		if err != nil {
			return err
		}
	}
	return nil
}

// maxEmptyReads bounds successive reads that return nothing and no error
// (io.Reader allows them; a decoder stuck in them is a broken stream).
const maxEmptyReads = 100

// read reads decompressed bytes into p, counting them against
// MaxBatchBytes; it sets eof at the end of the stream.
func (r *RecordReader) read(p []byte) (int, error) {
	for empty := 0; ; empty++ {
		n, err := r.dec.Read(p)
		r.total += int64(n)
		if r.lim.MaxBatchBytes > 0 && r.total > r.lim.MaxBatchBytes {
			return n, &LimitError{Err: ErrBatchTooLarge, Record: r.n, Size: r.total, Limit: r.lim.MaxBatchBytes}
		}
		switch {
		case err == io.EOF:
			r.eof = true
			return n, nil
		case err != nil:
			return n, fmt.Errorf("%w: %s: %v", ErrUndecodable, r.codec, err)
		case n > 0:
			return n, nil
		case empty == maxEmptyReads:
			return 0, fmt.Errorf("%w: %s: decoder made no progress", ErrUndecodable, r.codec)
		}
	}
}

// next parses one record: the length varint, the limits, then the body,
// in place when kept or when it is already whole in the buffer.
func (r *RecordReader) next() (RecordInfo, error) {
	if err := r.fill(5); err != nil {
		return RecordInfo{}, err
	}
	if r.r == r.w {
		return RecordInfo{}, fmt.Errorf("%w: incorrect declared batch size, premature end after %d of %d records", ErrMalformedRecords, r.n, r.count)
	}
	size, k := Varint(r.buf[r.r:r.w])
	if k == 0 {
		return RecordInfo{}, r.malformed("invalid record size varint")
	}
	r.r += k
	if size < 0 {
		return RecordInfo{}, r.malformed("invalid record size: %d is negative", size)
	}
	if l := r.lim.MaxRecordBytes; l > 0 && int64(size) > l {
		return RecordInfo{}, &LimitError{Err: ErrRecordTooLarge, Record: r.n, Size: int64(size), Limit: l}
	}
	r.claim += int64(k) + int64(size)
	if l := r.lim.MaxBatchBytes; l > 0 && r.claim > l {
		return RecordInfo{}, &LimitError{Err: ErrBatchTooLarge, Record: r.n, Size: r.claim, Limit: l}
	}
	if size == 0 {
		return RecordInfo{}, r.malformed("empty record")
	}
	n := int(size)
	if err := r.fill(min(n, len(r.buf))); err != nil {
		return RecordInfo{}, err
	}
	if r.eof && r.w-r.r < n {
		return RecordInfo{}, r.malformed("invalid record size: expected %d bytes in record payload, but only %d remain", n, r.w-r.r)
	}
	if r.w-r.r >= n {
		body := r.buf[r.r : r.r+n : r.r+n]
		info, err := r.parseBody(n)
		if err == nil && r.lim.Keep {
			r.curBody = body
		}
		return info, err
	}
	if !r.lim.Keep {
		return r.parseBody(n)
	}
	// A kept record larger than the window: gather it in big, then parse
	// it there (the window is empty afterwards).
	if cap(r.big) < n {
		r.big = make([]byte, n)
	}
	big := r.big[:n]
	have := copy(big, r.buf[r.r:r.w])
	r.r = r.w
	for have < n {
		if r.eof {
			return RecordInfo{}, r.malformed("invalid record size: expected %d bytes in record payload, but the record payload reached EOF", n)
		}
		m, err := r.read(big[have:])
		have += m
		if err != nil {
			return RecordInfo{}, err
		}
	}
	win, eof := r.buf, r.eof
	r.buf, r.r, r.w, r.eof = big, 0, n, true
	info, err := r.parseBody(n)
	r.buf, r.r, r.w, r.eof = win, 0, 0, eof
	if err == nil {
		r.curBody = big
	}
	return info, err
}

// parseBody reads a record body of n bytes at buf[r:], refilling as it
// goes (a body larger than the window streams through it).
func (r *RecordReader) parseBody(n int) (RecordInfo, error) {
	info := RecordInfo{Size: int32(n)}
	rem := n
	// bad reports a field that does not parse; an error of the stream
	// itself (undecodable, a limit) is passed on as it is.
	bad := func(err error, what string) error {
		if err != errBody {
			return err
		}
		return r.malformed("%s", what)
	}
	b, err := r.bodyBytes(&rem, 1)
	if err != nil {
		return info, bad(err, "empty record")
	}
	info.Attributes = int8(b[0])
	r.r++
	rem--
	if info.TimestampDelta, err = r.bodyVarlong(&rem); err != nil {
		return info, bad(err, "invalid timestamp delta")
	}
	if info.OffsetDelta, err = r.bodyVarint(&rem); err != nil {
		return info, bad(err, "invalid offset delta")
	}
	if info.KeyLen, err = r.bodyField(&rem); err != nil {
		return info, bad(err, "invalid key")
	}
	if info.ValueLen, err = r.bodyField(&rem); err != nil {
		return info, bad(err, "invalid value")
	}
	if info.Headers, err = r.bodyVarint(&rem); err != nil {
		return info, bad(err, "invalid header count")
	}
	if info.Headers < 0 || int(info.Headers) > rem {
		return info, r.malformed("found invalid number of record headers %d", info.Headers)
	}
	for i := int32(0); i < info.Headers; i++ {
		kl, err := r.bodyField(&rem)
		if err == nil && kl < 0 {
			err = errBody
		}
		if err != nil {
			return info, bad(err, "invalid header key")
		}
		if _, err := r.bodyField(&rem); err != nil {
			return info, bad(err, "invalid header value")
		}
	}
	if rem != 0 {
		return info, r.malformed("invalid record size: expected to read %d bytes in record payload, but %d remain", n, rem)
	}
	return info, nil
}

var errBody = errors.New("field past the record end")

// bodyBytes makes min(want, rem) bytes available at buf[r:] (at least
// one); it fails when the body or the input ends first.
func (r *RecordReader) bodyBytes(rem *int, want int) ([]byte, error) {
	want = min(want, *rem)
	if want <= 0 {
		return nil, errBody
	}
	if err := r.fill(want); err != nil {
		return nil, err
	}
	if r.w-r.r < want {
		return nil, errBody
	}
	return r.buf[r.r : r.r+want], nil
}

func (r *RecordReader) bodyVarint(rem *int) (int32, error) { return bodyVar(r, rem, 5, Varint) }

func (r *RecordReader) bodyVarlong(rem *int) (int64, error) { return bodyVar(r, rem, 10, Varlong) }

// bodyVar reads a varint of at most max bytes with dec.
func bodyVar[T int32 | int64](r *RecordReader, rem *int, max int, dec func([]byte) (T, int)) (T, error) {
	b, err := r.bodyBytes(rem, max)
	if err != nil {
		return 0, err
	}
	v, k := dec(b)
	if k == 0 {
		return 0, errBody
	}
	r.r += k
	*rem -= k
	return v, nil
}

// bodyField reads a varint length and skips that many bytes (negative:
// null, nothing to skip).
func (r *RecordReader) bodyField(rem *int) (int32, error) {
	l, err := r.bodyVarint(rem)
	if err != nil {
		return 0, err
	}
	if l <= 0 {
		return l, nil
	}
	if int(l) > *rem {
		return 0, errBody
	}
	*rem -= int(l)
	for left := int(l); left > 0; {
		if r.r == r.w {
			if err := r.fill(1); err != nil {
				return 0, err
			}
			if r.r == r.w {
				return 0, errBody
			}
		}
		k := min(left, r.w-r.r)
		r.r += k
		left -= k
	}
	return l, nil
}

// Record returns the current record (the one Next last returned) with its
// key, value and headers. They alias the reader's buffers and are valid
// until the next call of Next or Close. The reader must have been made
// with Limits.Keep.
func (r *RecordReader) Record() (Record, error) {
	if !r.lim.Keep {
		return Record{}, ErrNotKept
	}
	if r.curBody == nil {
		return Record{}, errors.New("kbatch: Record called without a current record")
	}
	rec, err := decodeBody(r.curBody)
	if err != nil {
		return Record{}, fmt.Errorf("%w: record %d: %v", ErrMalformedRecords, r.n-1, err)
	}
	return rec, nil
}

// Varint decodes a zigzag varint of at most 5 bytes as Kafka's
// ByteUtils.readVarint, refusing a fifth byte with bits past 32. n is 0
// when b does not start with one.
func Varint(b []byte) (int32, int) {
	u, n := wireext.Uvarint(b)
	return int32(u>>1) ^ -int32(u&1), n
}

// Varlong decodes a zigzag varlong of at most 10 bytes, refusing bits past
// 64.
func Varlong(b []byte) (int64, int) {
	var v uint64
	for i := 0; i < 10 && i < len(b); i++ {
		c := b[i]
		v |= uint64(c&0x7f) << (7 * i)
		if c&0x80 == 0 {
			if i == 9 && c > 0x01 {
				return 0, 0
			}
			return int64(v>>1) ^ -int64(v&1), i + 1
		}
	}
	return 0, 0
}

package kbatch

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"

	"github.com/pierrec/lz4/v4"
)

var allCodecs = []Codec{CodecNone, CodecGzip, CodecSnappy, CodecLZ4, CodecZstd}
var compressedCodecs = allCodecs[1:]

// textValue is text-like data of n bytes that compresses about 3-4x.
func textValue(n, seed int) []byte {
	words := []string{"offset", "epoch", "leader", "batch", "record", "mirror", "kafka", "topic", "partition", "segment", "verbatim", "replica"}
	var b bytes.Buffer
	x := uint32(seed*2654435761 + 1)
	for b.Len() < n {
		x ^= x << 13
		x ^= x >> 17
		x ^= x << 5
		b.WriteString(words[x%uint32(len(words))])
		fmt.Fprintf(&b, "=%d ", x%1000)
	}
	return b.Bytes()[:n]
}

func streamRecords() []Record {
	return []Record{
		{Key: []byte("k0"), Value: []byte("small"), Headers: []RecordHeader{{Key: "h", Value: []byte("x")}, {Key: "n", Value: nil}}},
		{OffsetDelta: 1, TimestampDelta: 7, Key: nil, Value: textValue(200<<10, 1)}, // larger than the window
		{OffsetDelta: 2, TimestampDelta: -3, Key: []byte{}, Value: nil},
		{OffsetDelta: 3, TimestampDelta: 1 << 40, Key: textValue(70<<10, 2), Value: textValue(10, 3)},
		{OffsetDelta: 4, Value: textValue(1000, 4)},
	}
}

func encodeWith(t testing.TB, c Codec, recs []Record) []byte {
	t.Helper()
	b := NewBatch(1000, recs...)
	b.Attributes = int16(c)
	raw, err := Encode(b)
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

func nullLen(b []byte) int32 {
	if b == nil {
		return -1
	}
	return int32(len(b))
}

// Every codec streams the same records: Next reports their fields without
// holding them, Record (with Keep) returns their bytes, the window is
// crossed by records larger than it, and io.EOF ends the walk.
func TestRecordReaderAllCodecs(t *testing.T) {
	want := streamRecords()
	for _, c := range allCodecs {
		for _, keep := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/keep=%v", c, keep), func(t *testing.T) {
				raw := encodeWith(t, c, want)
				rr, err := NewRecordReader(raw, Limits{Keep: keep})
				if err != nil {
					t.Fatal(err)
				}
				defer rr.Close()
				for i, w := range want {
					info, err := rr.Next()
					if err != nil {
						t.Fatalf("record %d: %v", i, err)
					}
					if info.OffsetDelta != w.OffsetDelta || info.TimestampDelta != w.TimestampDelta || info.KeyLen != nullLen(w.Key) ||
						info.ValueLen != nullLen(w.Value) || info.Headers != int32(len(w.Headers)) {
						t.Fatalf("record %d: info %+v", i, info)
					}
					rec, err := rr.Record()
					if !keep {
						if !errors.Is(err, ErrNotKept) {
							t.Fatalf("Record without Keep: %v", err)
						}
						continue
					}
					if err != nil {
						t.Fatal(err)
					}
					if !bytes.Equal(rec.Key, w.Key) || (rec.Key == nil) != (w.Key == nil) || !bytes.Equal(rec.Value, w.Value) ||
						(rec.Value == nil) != (w.Value == nil) || len(rec.Headers) != len(w.Headers) {
						t.Fatalf("record %d differs", i)
					}
					for j, h := range w.Headers {
						if rec.Headers[j].Key != h.Key || !bytes.Equal(rec.Headers[j].Value, h.Value) || (rec.Headers[j].Value == nil) != (h.Value == nil) {
							t.Fatalf("record %d header %d differs", i, j)
						}
					}
				}
				if _, err := rr.Next(); err != io.EOF {
					t.Fatalf("after the last record: %v", err)
				}
				if _, err := rr.Next(); err != io.EOF {
					t.Fatalf("EOF is not sticky: %v", err)
				}
				recs, err := Records(raw)
				if err != nil || len(recs) != len(want) || !bytes.Equal(recs[1].Value, want[1].Value) || !bytes.Equal(recs[3].Key, want[3].Key) {
					t.Fatalf("Records: %d records, %v", len(recs), err)
				}
			})
		}
	}
}

// setCount rewrites the record count (and LastOffsetDelta) and the CRC.
func setCount(b []byte, n int32) []byte {
	b = bytes.Clone(b)
	binary.BigEndian.PutUint32(b[RecordCountOffset:], uint32(n))
	binary.BigEndian.PutUint32(b[LastOffsetDeltaOffset:], uint32(n-1))
	SetCRC(b)
	return b
}

// withPayload replaces the records section.
func withPayload(b, payload []byte) []byte {
	out := append(bytes.Clone(b[:HeaderSize]), payload...)
	binary.BigEndian.PutUint32(out[LengthOffset:], uint32(len(out)-LogOverhead))
	SetCRC(out)
	return out
}

// A declared count that does not match the records, and payloads that are
// not valid for their codec (truncated, corrupted, garbage, trailing bytes),
// are errors of the right kind for every codec.
func TestRecordReaderBadInput(t *testing.T) {
	recs := streamRecords()
	for _, c := range allCodecs {
		t.Run(c.String(), func(t *testing.T) {
			raw := encodeWith(t, c, recs)
			if _, err := walkAll(setCount(raw, int32(len(recs)+1)), Limits{}); !errors.Is(err, ErrMalformedRecords) || !strings.Contains(err.Error(), "premature") {
				t.Fatalf("count above the records: %v", err)
			}
			if _, err := walkAll(setCount(raw, int32(len(recs)-1)), Limits{}); !errors.Is(err, ErrMalformedRecords) || !strings.Contains(err.Error(), "remaining") {
				t.Fatalf("count below the records: %v", err)
			}
			if c == CodecNone {
				return
			}
			payload := raw[HeaderSize:]
			bad := map[string][]byte{
				"truncated": payload[:len(payload)-7],
				"half":      payload[:len(payload)/2],
				"garbage":   bytes.Repeat([]byte{0xa5}, 300),
				"trailing":  append(bytes.Clone(payload), 0, 1, 2, 3),
				"empty":     {},
			}
			flipped := bytes.Clone(payload)
			flipped[len(flipped)/2] ^= 0x40
			bad["flipped"] = flipped
			for name, p := range bad {
				_, err := walkAll(withPayload(raw, p), Limits{})
				if err == nil && name == "flipped" && c == CodecSnappy {
					continue // xerial chunks carry no checksum: other bytes, still records
				}
				if err == nil {
					t.Errorf("%s: accepted", name)
					continue
				}
				// A flip may land in record bytes that the codec does not
				// checksum (snappy without framing checksums): then the
				// records are malformed instead, or survive as other bytes.
				if !errors.Is(err, ErrUndecodable) && !(name == "flipped" && errors.Is(err, ErrMalformedRecords)) {
					t.Errorf("%s: %v", name, err)
				}
			}
		})
	}
}

// Records that are malformed inside a valid stream are ErrMalformedRecords.
func TestRecordReaderMalformedRecords(t *testing.T) {
	good := AppendRecord(nil, &Record{Value: []byte("v")})
	cases := map[string][]byte{
		"negative-size": binary.AppendVarint(nil, -2),
		"empty-record":  {0},
		"size-past-end": append(binary.AppendVarint(nil, 50), good...),
		"headers-too-many": func() []byte {
			body := []byte{0, 0, 0, 1, 1} // attrs, ts, offset, null key, null value
			body = binary.AppendVarint(body, 100)
			return append(binary.AppendVarint(nil, int64(len(body))), body...)
		}(),
		"overlong-varint": {0x80, 0x80, 0x80, 0x80, 0x10},
	}
	for _, c := range allCodecs {
		for name, data := range cases {
			z, err := Compress(c, data)
			if err != nil {
				t.Fatal(err)
			}
			b := withPayload(setCount(encodeWith(t, c, []Record{{Value: []byte("x")}}), 1), z)
			if _, err := walkAll(b, Limits{}); !errors.Is(err, ErrMalformedRecords) {
				t.Errorf("%s/%s: %v", c, name, err)
			}
		}
	}
}

// Limits: a record whose declared size is over MaxRecordBytes (Kafka's
// message), and a batch that decompresses to more than MaxBatchBytes, are
// refused before the bytes are read; declared stream sizes are checked when
// the reader is made.
func TestRecordReaderLimits(t *testing.T) {
	for _, c := range allCodecs {
		raw := encodeWith(t, c, []Record{{Value: make([]byte, 4096)}, {OffsetDelta: 1, Value: make([]byte, 10)}})
		_, err := walkAll(raw, Limits{MaxRecordBytes: 512})
		var le *LimitError
		if !errors.Is(err, ErrRecordTooLarge) || !errors.As(err, &le) || le.Limit != 512 || le.Size < 4096 || le.Record != 0 ||
			!strings.Contains(err.Error(), "exceeds the configured maximum record size of 512") {
			t.Errorf("%s record limit: %v", c, err)
		}
		if _, err := walkAll(raw, Limits{MaxBatchBytes: 2048}); !errors.Is(err, ErrBatchTooLarge) {
			t.Errorf("%s batch limit: %v", c, err)
		}
		if n, err := walkAll(raw, Limits{MaxRecordBytes: 4200, MaxBatchBytes: 4200}); err != nil || n != 2 {
			t.Errorf("%s within the limits: %d records, %v", c, n, err)
		}
	}
	// A raw snappy block declaring 1 GiB is refused from its header.
	huge := binary.AppendUvarint(nil, 1<<30)
	b := withPayload(encodeWith(t, CodecSnappy, []Record{{Value: []byte("x")}}), append(huge, 0, 0, 0))
	if _, err := NewRecordReader(b, Limits{MaxBatchBytes: 64 << 20}); !errors.Is(err, ErrBatchTooLarge) {
		t.Fatalf("declared snappy size: %v", err)
	}
}

// WorkingSet: nothing for uncompressed batches; gzip's fixed state; the
// LZ4 frame's block size; the zstd window's class; the largest snappy
// block; and stream headers it refuses.
func TestWorkingSet(t *testing.T) {
	recs := []Record{{Value: textValue(10000, 9)}}
	ws := func(b []byte) int64 {
		n, err := WorkingSet(b)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	if n := ws(encodeWith(t, CodecNone, recs)); n != 0 {
		t.Fatalf("uncompressed: %d", n)
	}
	base := int64(windowSize + readerOverhead)
	if n := ws(encodeWith(t, CodecGzip, recs)); n != base+gzipState {
		t.Fatalf("gzip: %d", n)
	}
	// pierrec's default frame declares 4 MiB blocks; the one block of this
	// batch (about 4 KiB compressed) can decode to at most 256 times that:
	// a 2 MiB buffer, not 4.
	if n := ws(encodeWith(t, CodecLZ4, recs)); n != base+2<<20+lz4State {
		t.Fatalf("lz4: %d", n)
	}
	// zstd EncodeAll: a single-segment frame, its content size as window.
	if n := ws(encodeWith(t, CodecZstd, recs)); n != base+256<<10+2*128<<10+zstdState {
		t.Fatalf("zstd: %d", n)
	}
	sn := encodeWith(t, CodecSnappy, recs)
	if n := ws(sn); n < base+10000 || n > base+11000 {
		t.Fatalf("snappy: %d", n)
	}
	// A zstd frame declaring a 16 MiB window (over MaxZstdWindow): an
	// empty raw last block after a window descriptor.
	zstdFrame := func(windowLog byte) []byte {
		frame := []byte{0x28, 0xb5, 0x2f, 0xfd, 0x00, (windowLog - 10) << 3, 0x01, 0x00, 0x00}
		b := withPayload(sn, frame)
		binary.BigEndian.PutUint16(b[AttributesOffset:], uint16(CodecZstd))
		SetCRC(b)
		return b
	}
	if _, err := WorkingSet(zstdFrame(24)); !errors.Is(err, ErrUndecodable) || !strings.Contains(err.Error(), "window") {
		t.Fatalf("16 MiB window: %v", err)
	}
	// An 8 MiB window is accepted and charged.
	if n, err := WorkingSet(zstdFrame(23)); err != nil || n != base+8<<20+2*128<<10+zstdState {
		t.Fatalf("8 MiB window: %d, %v", n, err)
	}
	// LZ4: dependent blocks and a dictionary id are refused.
	lz := encodeWith(t, CodecLZ4, recs)
	for name, flg := range map[string]byte{"dependent": 0x40, "dictionary": 0x61} {
		b := bytes.Clone(lz)
		b[HeaderSize+4] = flg
		SetCRC(b)
		if _, err := WorkingSet(b); !errors.Is(err, ErrUndecodable) {
			t.Fatalf("lz4 %s: %v", name, err)
		}
	}
}

// LZ4 frames as Java writes them (64 KiB blocks) and with block checksums
// decode, and a wrong block checksum, content checksum or descriptor
// checksum is ErrUndecodable.
func TestLZ4Frames(t *testing.T) {
	recs := []Record{{Value: textValue(300<<10, 11)}, {OffsetDelta: 1, Value: make([]byte, 100<<10)}}
	var section []byte
	for i := range recs {
		section = AppendRecord(section, &recs[i])
	}
	frame := func(opts ...lz4.Option) []byte {
		var buf bytes.Buffer
		w := lz4.NewWriter(&buf)
		if err := w.Apply(opts...); err != nil {
			t.Fatal(err)
		}
		w.Write(section)
		w.Close()
		return buf.Bytes()
	}
	base := encodeWith(t, CodecLZ4, recs)
	for name, p := range map[string][]byte{
		"java-64KiB-blocks": frame(lz4.BlockSizeOption(lz4.Block64Kb)),
		"block-checksums":   frame(lz4.BlockChecksumOption(true), lz4.BlockSizeOption(lz4.Block256Kb)),
		"no-checksums":      frame(lz4.ChecksumOption(false)),
	} {
		b := withPayload(base, p)
		if n, err := walkAll(b, Limits{}); err != nil || n != 2 {
			t.Fatalf("%s: %d records, %v", name, n, err)
		}
		if name == "java-64KiB-blocks" {
			if ws, _ := WorkingSet(b); ws != 64<<10+lz4State+windowSize+readerOverhead {
				t.Fatalf("%s: working set %d", name, ws)
			}
		}
		if name == "no-checksums" {
			continue
		}
		// The last 4 bytes are the content checksum; with block checksums,
		// the 4 before the end mark are the last block's.
		at := []int{len(p) - 1}
		if name == "block-checksums" {
			at = append(at, len(p)-9)
		}
		for _, at := range at {
			c := bytes.Clone(p)
			c[at] ^= 1
			if _, err := walkAll(withPayload(base, c), Limits{}); !errors.Is(err, ErrUndecodable) || !strings.Contains(err.Error(), "checksum") {
				t.Fatalf("%s, byte %d flipped: %v", name, at, err)
			}
		}
	}
	c := bytes.Clone(base)
	c[HeaderSize+6] ^= 1 // the descriptor checksum byte
	SetCRC(c)
	if _, err := WorkingSet(c); !errors.Is(err, ErrUndecodable) || !strings.Contains(err.Error(), "descriptor checksum") {
		t.Fatalf("descriptor checksum: %v", err)
	}
}

// xxHash32 against published vectors, whole and written in pieces.
func TestXXH32(t *testing.T) {
	for s, want := range map[string]uint32{"": 0x02CC5D05, "a": 0x550D7456, "abc": 0x32D153FF,
		"Nobody inspects the spammish repetition": 0xE2293B2F} {
		if got := xxh32Sum([]byte(s)); got != want {
			t.Errorf("%q: %08x, want %08x", s, got, want)
		}
		var x xxh32
		x.reset()
		for i := 0; i < len(s); i += 3 {
			x.write([]byte(s[i:min(i+3, len(s))]))
		}
		if got := x.sum(); got != want {
			t.Errorf("%q in pieces: %08x, want %08x", s, got, want)
		}
	}
}

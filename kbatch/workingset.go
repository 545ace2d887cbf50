package kbatch

import (
	"encoding/binary"
	"fmt"

	"github.com/klauspost/compress/snappy"
)

// What decoding a compressed batch costs in memory, read from the codec's
// stream headers without decompressing anything, and the structural checks
// those headers allow (so that the decoders only ever see streams whose
// buffers were accounted for).

// maxDeclared bounds any decompressed size a stream header may declare
// (1 GiB), whatever the caller's Limits: the decoders refuse more anyway.
const maxDeclared = 1 << 30

// Decoder state beyond the buffers the stream headers size, measured on
// the pooled decoders (TestWorkingSetBoundsHeap) and rounded up.
const (
	gzipState = 96 << 10  // flate's 32 KiB window, Huffman tables, gzip header
	lz4State  = 1 << 10   // the decoder beyond its buffer
	zstdState = 640 << 10 // block buffers (compressed, literals, output) and tables
)

// scan is what scanStream learnt of a payload.
type scan struct {
	workingSet int64
	declared   int64 // decompressed bytes the headers declare (a lower bound)
	window     int64 // zstd: largest window
	block      int64 // snappy: largest decoded block; lz4: decode buffer needed
	xerial     bool
	// lz4: where the blocks start, and the frame's checksum flags.
	lz4Blocks                  int
	lz4BlockSum, lz4ContentSum bool
}

// WorkingSet returns the memory a RecordReader needs to walk batch's
// records: its window plus the decoder state the codec's stream headers
// call for (gzip's fixed window; the zstd window, bounded by
// MaxZstdWindow; what the LZ4 frame's largest compressed block can decode
// to, at most its block size (4 MiB); the largest
// snappy block or xerial chunk as declared). 0 for an uncompressed batch.
// It reads only headers and allocates nothing; a stream whose headers are
// not valid for its codec is an ErrUndecodable error.
func WorkingSet(batch []byte) (int64, error) {
	h, err := ParseHeader(batch)
	if err != nil {
		return 0, err
	}
	if h.Size() != len(batch) {
		return 0, fmt.Errorf("%w: batch length %d does not match %d bytes", ErrMalformedRecords, h.Size(), len(batch))
	}
	if h.Codec() == CodecNone {
		return 0, nil
	}
	sc, err := scanStream(h.Codec(), batch[HeaderSize:])
	return sc.workingSet, err
}

func undecodable(c Codec, format string, args ...any) error {
	return fmt.Errorf("%w: %s: %s", ErrUndecodable, c, fmt.Sprintf(format, args...))
}

func scanStream(c Codec, p []byte) (scan, error) {
	var sc scan
	var err error
	switch c {
	case CodecGzip:
		// RFC 1952: ID1 ID2, CM 8 (deflate); the rest is the decoder's.
		if len(p) < 18 || p[0] != 0x1f || p[1] != 0x8b || p[2] != 8 {
			return sc, undecodable(c, "not a gzip member")
		}
		sc.workingSet = gzipState
	case CodecSnappy:
		err = scanSnappy(p, &sc)
		sc.workingSet = sc.block
	case CodecLZ4:
		err = scanLZ4(p, &sc)
		sc.workingSet = lz4Classes[lz4Class(sc.block)] + lz4State
	case CodecZstd:
		err = scanZstd(p, &sc)
		w := sc.window
		if class := zstdClass(w); class < len(zstdClasses) {
			w = zstdClasses[class] // a pooled decoder of the class may hold that much
		}
		sc.workingSet = w + 2*min(w, 128<<10) + zstdState
	default:
		return sc, fmt.Errorf("%w: %w %d", ErrUndecodable, ErrUnknownCodec, c)
	}
	sc.workingSet += windowSize + readerOverhead
	return sc, err
}

const xerialHeaderSize = 16

// scanSnappy: xerial framing (magic, version, compatible version, then
// chunks of a big-endian int32 length and a raw snappy block) or one raw
// block; each block starts with its decoded length.
func scanSnappy(p []byte, sc *scan) error {
	blockLen := func(b []byte) error {
		n, err := snappy.DecodedLen(b)
		if err != nil {
			return undecodable(CodecSnappy, "%v", err)
		}
		if n > maxDeclared {
			return undecodable(CodecSnappy, "block declares %d decoded bytes", n)
		}
		sc.declared += int64(n)
		sc.block = max(sc.block, int64(n))
		return nil
	}
	if len(p) < len(xerialMagic) || string(p[:len(xerialMagic)]) != string(xerialMagic) {
		return blockLen(p)
	}
	if len(p) < xerialHeaderSize {
		return undecodable(CodecSnappy, "short xerial header")
	}
	sc.xerial = true
	for rest := p[xerialHeaderSize:]; len(rest) > 0; {
		if len(rest) < 4 {
			return undecodable(CodecSnappy, "short xerial chunk length")
		}
		n := int64(int32(binary.BigEndian.Uint32(rest)))
		rest = rest[4:]
		if n <= 0 || n > int64(len(rest)) {
			return undecodable(CodecSnappy, "xerial chunk of %d bytes with %d left", n, len(rest))
		}
		if err := blockLen(rest[:n]); err != nil {
			return err
		}
		if sc.declared > maxDeclared {
			return undecodable(CodecSnappy, "chunks declare more than %d decoded bytes", maxDeclared)
		}
		rest = rest[n:]
	}
	return nil
}

// LZ4 frame format (lz4_Frame_format.md v1.6): exactly one frame, as Kafka's
// Lz4BlockInputStream reads one; version 01, independent blocks (Kafka
// decompresses each block on its own), no dictionary, reserved bits clear,
// block sizes within the declared maximum.
const lz4Magic = 0x184D2204

func scanLZ4(p []byte, sc *scan) error {
	bad := func(format string, args ...any) error { return undecodable(CodecLZ4, format, args...) }
	if len(p) < 7 {
		return bad("short frame")
	}
	if m := binary.LittleEndian.Uint32(p); m != lz4Magic {
		return bad("not an LZ4 frame (magic %#x)", m)
	}
	flg, bd := p[4], p[5]
	switch {
	case flg>>6 != 1:
		return bad("frame version %d", flg>>6)
	case flg&0x20 == 0:
		return bad("dependent blocks")
	case flg&0x02 != 0 || bd&0x8f != 0:
		return bad("reserved bits set")
	case flg&0x01 != 0:
		return bad("dictionary id")
	}
	id := bd >> 4 & 7
	if id < 4 {
		return bad("block size id %d", id)
	}
	blockMax := int64(1) << (8 + 2*int64(id)) // 64 KiB, 256 KiB, 1 MiB, 4 MiB
	sc.lz4BlockSum, sc.lz4ContentSum = flg&0x10 != 0, flg&0x04 != 0
	desc := 6
	if flg&0x08 != 0 { // content size
		if len(p) < desc+8 {
			return bad("short frame descriptor")
		}
		cs := binary.LittleEndian.Uint64(p[desc:])
		if cs > maxDeclared {
			return bad("content size %d", cs)
		}
		sc.declared = int64(cs)
		desc += 8
	}
	if len(p) < desc+1 {
		return bad("short frame descriptor")
	}
	if hc := byte(xxh32Sum(p[4:desc]) >> 8); p[desc] != hc {
		return bad("frame descriptor checksum %#x, want %#x", p[desc], hc)
	}
	sc.lz4Blocks = desc + 1
	rest := p[desc+1:]
	for {
		if len(rest) < 4 {
			return bad("frame ends without an end mark")
		}
		v := binary.LittleEndian.Uint32(rest)
		rest = rest[4:]
		if v == 0 {
			break
		}
		n := int64(v & 0x7fffffff)
		if n > blockMax {
			return bad("block of %d bytes over the frame's %d", n, blockMax)
		}
		if v&0x80000000 == 0 {
			// A block decodes to at most 255 bytes per byte (a match
			// length byte of 255), and never past the block size.
			sc.block = max(sc.block, min(blockMax, 256*n+16))
		}
		if sc.lz4BlockSum {
			n += 4
		}
		if n > int64(len(rest)) {
			return bad("block past the end of the payload")
		}
		rest = rest[n:]
	}
	if sc.lz4ContentSum {
		if len(rest) < 4 {
			return bad("short content checksum")
		}
		rest = rest[4:]
	}
	if len(rest) != 0 {
		return bad("%d bytes after the frame", len(rest))
	}
	return nil
}

// Zstandard frames (RFC 8878): one or more frames, skippable frames
// allowed; no dictionaries; windows up to MaxZstdWindow (a single-segment
// frame's window is its content size, bounded by the limits instead).
const (
	zstdMagic         = 0xFD2FB528
	zstdSkippableMask = 0xFFFFFFF0
	zstdSkippable     = 0x184D2A50
)

func scanZstd(p []byte, sc *scan) error {
	bad := func(format string, args ...any) error { return undecodable(CodecZstd, format, args...) }
	frames := 0
	for len(p) > 0 {
		if len(p) < 4 {
			return bad("%d bytes after the last frame", len(p))
		}
		m := binary.LittleEndian.Uint32(p)
		if m&zstdSkippableMask == zstdSkippable {
			if len(p) < 8 {
				return bad("short skippable frame")
			}
			n := uint64(binary.LittleEndian.Uint32(p[4:]))
			if n > uint64(len(p)-8) {
				return bad("skippable frame past the end")
			}
			p = p[8+n:]
			continue
		}
		if m != zstdMagic {
			return bad("not a zstd frame (magic %#x)", m)
		}
		rest, err := scanZstdFrame(p[4:], sc)
		if err != nil {
			return err
		}
		p = rest
		frames++
	}
	if frames == 0 {
		return bad("no frame")
	}
	return nil
}

func scanZstdFrame(p []byte, sc *scan) ([]byte, error) {
	bad := func(format string, args ...any) ([]byte, error) { return nil, undecodable(CodecZstd, format, args...) }
	if len(p) < 1 {
		return bad("short frame header")
	}
	fhd := p[0]
	p = p[1:]
	fcsFlag, single, checksum, didFlag := fhd>>6, fhd&0x20 != 0, fhd&0x04 != 0, fhd&3
	if fhd&0x08 != 0 {
		return bad("reserved frame header bit set")
	}
	var window uint64
	if !single {
		if len(p) < 1 {
			return bad("short frame header")
		}
		exp, mant := uint64(p[0]>>3), uint64(p[0]&7)
		base := uint64(1) << (10 + exp)
		window = base + base/8*mant
		p = p[1:]
		if window > MaxZstdWindow {
			return bad("window of %d bytes over the %d accepted", window, MaxZstdWindow)
		}
	}
	didSize := [4]int{0, 1, 2, 4}[didFlag]
	if len(p) < didSize {
		return bad("short frame header")
	}
	var did uint32
	for i := didSize - 1; i >= 0; i-- {
		did = did<<8 | uint32(p[i])
	}
	if did != 0 {
		return bad("dictionary %d", did)
	}
	p = p[didSize:]
	fcsSize := [4]int{0, 2, 4, 8}[fcsFlag]
	if fcsFlag == 0 && single {
		fcsSize = 1
	}
	if len(p) < fcsSize {
		return bad("short frame header")
	}
	var fcs uint64
	for i := fcsSize - 1; i >= 0; i-- {
		fcs = fcs<<8 | uint64(p[i])
	}
	if fcsSize == 2 {
		fcs += 256
	}
	p = p[fcsSize:]
	if fcsSize > 0 {
		if fcs > maxDeclared {
			return bad("content size %d", fcs)
		}
		sc.declared += int64(fcs)
		if sc.declared > maxDeclared {
			return bad("frames declare more than %d bytes", maxDeclared)
		}
	}
	if single {
		window = max(fcs, 1<<10)
	}
	sc.window = max(sc.window, int64(window))
	blockMax := min(window, 128<<10)
	for {
		if len(p) < 3 {
			return bad("frame ends inside a block header")
		}
		bh := uint32(p[0]) | uint32(p[1])<<8 | uint32(p[2])<<16
		p = p[3:]
		last, typ, size := bh&1 != 0, bh>>1&3, uint64(bh>>3)
		if size > blockMax {
			return bad("block of %d bytes over the frame's maximum %d", size, blockMax)
		}
		switch typ {
		case 1: // RLE: one byte repeated size times
			size = 1
		case 3:
			return bad("reserved block type")
		}
		if size > uint64(len(p)) {
			return bad("block past the end of the payload")
		}
		p = p[size:]
		if last {
			break
		}
	}
	if checksum {
		if len(p) < 4 {
			return bad("short content checksum")
		}
		p = p[4:]
	}
	return p, nil
}

package kbatch

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/snappy"
	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"
)

// decoder is a pooled streaming decompressor over one batch's payload.
type decoder interface {
	io.Reader
	release()
}

// openDecoder takes a decoder for codec c from its pool, reading payload.
// sc is the payload's scan (scanStream); nothing large is allocated
// before the first Read.
func openDecoder(c Codec, payload []byte, sc *scan) (decoder, error) {
	switch c {
	case CodecGzip:
		d := gzipPool.Get().(*gzipDecoder)
		d.src.Reset(payload)
		if err := d.z.Reset(&d.src); err != nil {
			d.release()
			return nil, fmt.Errorf("%w: gzip: %v", ErrUndecodable, err)
		}
		d.z.Multistream(false)
		return d, nil
	case CodecSnappy:
		d := snappyPool.Get().(*snappyDecoder)
		d.reset(payload, sc)
		return d, nil
	case CodecLZ4:
		class := lz4Class(sc.block)
		d, _ := lz4Pools[class].Get().(*lz4Decoder)
		if d == nil {
			d = &lz4Decoder{class: class, buf: make([]byte, lz4Classes[class])}
		}
		d.reset(payload, sc)
		return d, nil
	case CodecZstd:
		class := zstdClass(sc.window)
		var d *zstdDecoder
		if class < len(zstdPools) {
			d, _ = zstdPools[class].Get().(*zstdDecoder)
		}
		if d == nil {
			z, err := zstd.NewReader(nil, zstd.WithDecoderConcurrency(1), zstd.WithDecoderLowmem(true),
				zstd.WithDecoderMaxWindow(MaxZstdWindow), zstd.WithDecoderMaxMemory(zstdMaxMemory))
			if err != nil {
				return nil, fmt.Errorf("%w: zstd: %v", ErrUndecodable, err)
			}
			d = &zstdDecoder{z: z}
		}
		d.class = class
		d.src.Reset(payload)
		if err := d.z.Reset(&d.src); err != nil {
			d.release()
			return nil, fmt.Errorf("%w: zstd: %v", ErrUndecodable, err)
		}
		return d, nil
	}
	return nil, fmt.Errorf("%w: %w %d", ErrUndecodable, ErrUnknownCodec, c)
}

// gzip: one member (what Java's GZIPOutputStream, librdkafka and franz-go
// write), nothing after it; the 32 KiB window is fixed.

type gzipDecoder struct {
	src bytes.Reader
	z   gzip.Reader
}

var gzipPool = sync.Pool{New: func() any { return new(gzipDecoder) }}

func (d *gzipDecoder) Read(p []byte) (int, error) {
	n, err := d.z.Read(p)
	if err == io.EOF && d.src.Len() > 0 {
		return n, fmt.Errorf("%d bytes after the gzip member", d.src.Len())
	}
	return n, err
}

func (d *gzipDecoder) release() {
	d.src.Reset(nil)
	gzipPool.Put(d)
}

// lz4: one LZ4 frame (Kafka's Lz4BlockInputStream reads one), checked by
// scanLZ4, decoded block by block straight from the payload: uncompressed
// blocks are read in place, compressed ones decoded into a buffer as large
// as the largest block can decode to (at most the frame's block size: LZ4
// inflates a block at most 255 times), from pools by buffer class, so a
// small batch from a producer declaring 4 MiB blocks does not cost 4 MiB.
// Block and content checksums are verified (xxHash32) as the consumers do.

// lz4Classes are the decode buffer sizes of pooled LZ4 decoders.
var lz4Classes = [...]int64{0, 64 << 10, 128 << 10, 256 << 10, 512 << 10, 1 << 20, 2 << 20, 4 << 20}

var lz4Pools [len(lz4Classes)]sync.Pool

func lz4Class(block int64) int {
	for i, c := range lz4Classes {
		if block <= c {
			return i
		}
	}
	return len(lz4Classes) - 1 // scanLZ4 bounds blocks by 4 MiB
}

type lz4Decoder struct {
	src                  []byte // the next block header onwards
	blockSum, contentSum bool
	out                  []byte // decoded, not yet read
	buf                  []byte // owned decode buffer of its class
	class                int
	sum                  xxh32
	done                 bool
}

func (d *lz4Decoder) reset(payload []byte, sc *scan) {
	d.src, d.out, d.done = payload[sc.lz4Blocks:], nil, false
	d.blockSum, d.contentSum = sc.lz4BlockSum, sc.lz4ContentSum
	d.sum.reset()
}

func (d *lz4Decoder) Read(p []byte) (int, error) {
	le := binary.LittleEndian
	for len(d.out) == 0 {
		if d.done {
			return 0, io.EOF
		}
		// scanLZ4 checked that every block, checksum and the end mark are
		// there and within the frame's block size.
		v := le.Uint32(d.src)
		d.src = d.src[4:]
		if v == 0 {
			if d.contentSum && le.Uint32(d.src) != d.sum.sum() {
				return 0, errors.New("lz4: content checksum mismatch")
			}
			d.done = true
			continue
		}
		n := int(v & 0x7fffffff)
		data := d.src[:n]
		d.src = d.src[n:]
		if d.blockSum {
			if le.Uint32(d.src) != xxh32Sum(data) {
				return 0, errors.New("lz4: block checksum mismatch")
			}
			d.src = d.src[4:]
		}
		if v&0x80000000 != 0 {
			d.out = data
		} else {
			k, err := lz4.UncompressBlock(data, d.buf)
			if err != nil {
				return 0, fmt.Errorf("lz4: %w", err)
			}
			d.out = d.buf[:k]
		}
		if d.contentSum {
			d.sum.write(d.out)
		}
	}
	n := copy(p, d.out)
	d.out = d.out[n:]
	return n, nil
}

func (d *lz4Decoder) release() {
	d.src, d.out = nil, nil
	lz4Pools[d.class].Put(d)
}

// zstd: synchronous streaming decoders (concurrency 1: no goroutines),
// pooled by window class so that a decoder whose history buffer grew for a
// large window is only reused for frames of that class (its memory is
// what the class charges).

// MaxZstdWindow is the largest zstd window accepted: 8 MiB, zstd's window
// for compression levels up to 19 (windowLog 23) when the content size is
// not known in advance, as in Java's zstd-jni stream (2 MiB at Kafka's
// default level 3) and librdkafka linked to a shared libzstd (a static one
// pledges the content size); franz-go declares a 64 KiB window and frames
// with a known content size (Sarama, zstd one-shot APIs) need no more than
// their content. Only the ultra levels 20-22 of an
// unpledged stream declare more (32-128 MiB); such batches are refused.
const MaxZstdWindow = 8 << 20

const zstdMaxMemory = 1 << 30

// zstdClasses are the window classes of pooled zstd decoders; a larger
// window (a single-segment frame declaring a large content size) gets an
// unpooled decoder.
var zstdClasses = [...]int64{256 << 10, 512 << 10, 1 << 20, 2 << 20, 4 << 20, MaxZstdWindow}

var zstdPools [len(zstdClasses)]sync.Pool

func zstdClass(window int64) int {
	for i, c := range zstdClasses {
		if window <= c {
			return i
		}
	}
	return len(zstdClasses)
}

type zstdDecoder struct {
	src   bytes.Reader // not a byter: Reset must stream, not DecodeAll
	z     *zstd.Decoder
	class int
}

func (d *zstdDecoder) Read(p []byte) (int, error) { return d.z.Read(p) }

func (d *zstdDecoder) release() {
	_ = d.z.Reset(nil)
	d.src.Reset(nil)
	if d.class < len(zstdPools) {
		zstdPools[d.class].Put(d)
		return
	}
	d.z.Close()
}

// snappy: xerial framing (Java's SnappyOutputStream, franz-go) decoded
// chunk by chunk into a buffer of the largest chunk, or one raw block
// (librdkafka, older franz-go) decoded whole; both with the strict
// standard-Snappy decoder (no S2 extensions, which Java cannot read).

type snappyDecoder struct {
	src    []byte
	xerial bool
	out    []byte // decoded, not yet read
	buf    []byte // owned decode buffer
}

var snappyPool = sync.Pool{New: func() any { return new(snappyDecoder) }}

func (d *snappyDecoder) reset(payload []byte, sc *scan) {
	d.src, d.xerial, d.out = payload, sc.xerial, nil
	if d.xerial {
		d.src = payload[xerialHeaderSize:]
	}
	if int64(cap(d.buf)) < sc.block {
		d.buf = make([]byte, 0, sc.block)
	}
}

func (d *snappyDecoder) Read(p []byte) (int, error) {
	for len(d.out) == 0 {
		if len(d.src) == 0 {
			return 0, io.EOF
		}
		block := d.src
		if d.xerial {
			n := int(binary.BigEndian.Uint32(d.src)) // scanSnappy checked the chunks
			block, d.src = d.src[4:4+n], d.src[4+n:]
		} else {
			d.src = nil
		}
		out, err := snappy.DecodeStrict(d.buf[:cap(d.buf)], block)
		if err != nil {
			return 0, err
		}
		d.out = out
	}
	n := copy(p, d.out)
	d.out = d.out[n:]
	return n, nil
}

func (d *snappyDecoder) release() {
	d.src, d.out = nil, nil
	if cap(d.buf) > 1<<20 {
		d.buf = nil
	}
	snappyPool.Put(d)
}

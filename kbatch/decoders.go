package kbatch

import (
	"bytes"
	"encoding/binary"
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
		d := lz4Pool.Get().(*lz4Decoder)
		d.src.Reset(payload)
		d.z.Reset(&d.src)
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
// scanLZ4 before pierrec's reader sees it; the reader's buffers are its
// pooled ones of the frame's block size.

type lz4Decoder struct {
	src bytes.Reader
	z   *lz4.Reader
}

var lz4Pool = sync.Pool{New: func() any { return &lz4Decoder{z: lz4.NewReader(nil)} }}

func (d *lz4Decoder) Read(p []byte) (int, error) { return d.z.Read(p) }

func (d *lz4Decoder) release() {
	d.z.Reset(nil) // gives its block buffers back to pierrec's pools
	d.src.Reset(nil)
	lz4Pool.Put(d)
}

// zstd: synchronous streaming decoders (concurrency 1: no goroutines),
// pooled by window class so that a decoder whose history buffer grew for a
// large window is only reused for frames of that class (its memory is
// what the class charges).

// MaxZstdWindow is the largest zstd window accepted: 8 MiB, zstd's window
// for compression levels up to 19 (windowLog 23) when the content size is
// not known in advance, as in Java's zstd-jni stream (2 MiB at Kafka's
// default level 3) and librdkafka; franz-go declares a 64 KiB window and
// frames with a known content size (franz-go, Sarama, zstd one-shot APIs)
// need no more than their content. Only the ultra levels 20-22 of an
// unpledged stream declare more (32-128 MiB); such batches are refused.
const MaxZstdWindow = 8 << 20

const zstdMaxMemory = 1 << 30

// zstdClasses are the window classes of pooled zstd decoders; a larger
// window (a single-segment frame declaring a large content size) gets an
// unpooled decoder.
var zstdClasses = [...]int64{256 << 10, 2 << 20, MaxZstdWindow}

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

package kbatch

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/s2"
	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"
)

// ErrUnknownCodec is returned for attribute codec values above 4.
var ErrUnknownCodec = errors.New("kbatch: unknown compression codec")

// xerialMagic starts the framed snappy stream that Kafka's Java client writes.
var xerialMagic = []byte{0x82, 'S', 'N', 'A', 'P', 'P', 'Y', 0}

var (
	zstdDecOnce sync.Once
	zstdDec     *zstd.Decoder
	zstdEncOnce sync.Once
	zstdEnc     *zstd.Encoder
)

func zstdDecoder() *zstd.Decoder {
	zstdDecOnce.Do(func() {
		zstdDec, _ = zstd.NewReader(nil, zstd.WithDecoderConcurrency(0), zstd.WithDecoderMaxMemory(1<<30))
	})
	return zstdDec
}

func zstdEncoder() *zstd.Encoder {
	zstdEncOnce.Do(func() {
		zstdEnc, _ = zstd.NewWriter(nil, zstd.WithEncoderConcurrency(1))
	})
	return zstdEnc
}

// maxDecompressed bounds decompression output so a hostile batch cannot
// exhaust memory.
const maxDecompressed = 256 << 20

// Decompress returns the decompressed records section of a batch compressed
// with codec c. For CodecNone it returns src unchanged.
func Decompress(c Codec, src []byte) ([]byte, error) {
	switch c {
	case CodecNone:
		return src, nil
	case CodecGzip:
		r, err := gzip.NewReader(bytes.NewReader(src))
		if err != nil {
			return nil, fmt.Errorf("gzip: %w", err)
		}
		return readBounded(r)
	case CodecSnappy:
		return snappyDecode(src)
	case CodecLZ4:
		return readBounded(lz4.NewReader(bytes.NewReader(src)))
	case CodecZstd:
		out, err := zstdDecoder().DecodeAll(src, nil)
		if err != nil {
			return nil, fmt.Errorf("zstd: %w", err)
		}
		return out, nil
	}
	return nil, ErrUnknownCodec
}

func readBounded(r io.Reader) ([]byte, error) {
	var buf bytes.Buffer
	n, err := io.Copy(&buf, io.LimitReader(r, maxDecompressed+1))
	if err != nil {
		return nil, err
	}
	if n > maxDecompressed {
		return nil, errors.New("kbatch: decompressed size over limit")
	}
	return buf.Bytes(), nil
}

func snappyDecode(src []byte) ([]byte, error) {
	if !bytes.HasPrefix(src, xerialMagic) {
		n, err := s2.DecodedLen(src)
		if err != nil {
			return nil, fmt.Errorf("snappy: %w", err)
		}
		if n > maxDecompressed {
			return nil, errors.New("kbatch: decompressed size over limit")
		}
		return s2.Decode(nil, src)
	}
	// xerial framing: 8 magic bytes, 4 version, 4 compatible version, then
	// chunks of [int32 length][snappy block].
	if len(src) < 16 {
		return nil, errors.New("snappy: short xerial header")
	}
	src = src[16:]
	var out []byte
	for len(src) > 0 {
		if len(src) < 4 {
			return nil, errors.New("snappy: short xerial chunk length")
		}
		n := int(binary.BigEndian.Uint32(src))
		src = src[4:]
		if n < 0 || n > len(src) {
			return nil, errors.New("snappy: xerial chunk past end")
		}
		dl, err := s2.DecodedLen(src[:n])
		if err != nil {
			return nil, fmt.Errorf("snappy: %w", err)
		}
		if len(out)+dl > maxDecompressed {
			return nil, errors.New("kbatch: decompressed size over limit")
		}
		d, err := s2.Decode(nil, src[:n])
		if err != nil {
			return nil, fmt.Errorf("snappy: %w", err)
		}
		out = append(out, d...)
		src = src[n:]
	}
	return out, nil
}

// Compress compresses a records section with codec c, in the framing Kafka's
// Java client writes (xerial framing for snappy, LZ4 frame, gzip, zstd frame).
func Compress(c Codec, src []byte) ([]byte, error) {
	switch c {
	case CodecNone:
		return src, nil
	case CodecGzip:
		var buf bytes.Buffer
		w := gzip.NewWriter(&buf)
		if _, err := w.Write(src); err != nil {
			return nil, err
		}
		if err := w.Close(); err != nil {
			return nil, err
		}
		return buf.Bytes(), nil
	case CodecSnappy:
		out := append([]byte(nil), xerialMagic...)
		out = binary.BigEndian.AppendUint32(out, 1)
		out = binary.BigEndian.AppendUint32(out, 1)
		const chunk = 32 << 10
		for len(src) > 0 {
			n := min(chunk, len(src))
			blk := s2.EncodeSnappy(nil, src[:n])
			out = binary.BigEndian.AppendUint32(out, uint32(len(blk)))
			out = append(out, blk...)
			src = src[n:]
		}
		return out, nil
	case CodecLZ4:
		var buf bytes.Buffer
		w := lz4.NewWriter(&buf)
		if _, err := w.Write(src); err != nil {
			return nil, err
		}
		if err := w.Close(); err != nil {
			return nil, err
		}
		return buf.Bytes(), nil
	case CodecZstd:
		return zstdEncoder().EncodeAll(src, nil), nil
	}
	return nil, ErrUnknownCodec
}

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
	zstdEncOnce sync.Once
	zstdEnc     *zstd.Encoder
)

func zstdEncoder() *zstd.Encoder {
	zstdEncOnce.Do(func() {
		zstdEnc, _ = zstd.NewWriter(nil, zstd.WithEncoderConcurrency(1))
	})
	return zstdEnc
}

// maxDecompressed bounds what Decompress and Records inflate (256 MiB).
const maxDecompressed = 256 << 20

// Decompress returns the decompressed records section of a batch compressed
// with codec c (src is the payload after the header), through the same
// streaming decoders and stream checks as RecordReader, bounded by 256 MiB.
// For CodecNone it returns src unchanged. It is for tests and tools: it
// holds the whole output.
func Decompress(c Codec, src []byte) ([]byte, error) {
	if c == CodecNone {
		return src, nil
	}
	sc, err := scanStream(c, src)
	if err != nil {
		return nil, err
	}
	if sc.declared > maxDecompressed {
		return nil, &LimitError{Err: ErrBatchTooLarge, Size: sc.declared, Limit: maxDecompressed}
	}
	d, err := openDecoder(c, src, &sc)
	if err != nil {
		return nil, err
	}
	defer d.release()
	var buf bytes.Buffer
	n, err := io.Copy(&buf, io.LimitReader(d, maxDecompressed+1))
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrUndecodable, c, err)
	}
	if n > maxDecompressed {
		return nil, &LimitError{Err: ErrBatchTooLarge, Size: n, Limit: maxDecompressed}
	}
	return buf.Bytes(), nil
}

// Compress compresses a records section with codec c, in the framing Kafka's
// Java client writes (xerial framing for snappy, LZ4 frame, gzip, zstd frame).
func Compress(c Codec, src []byte) ([]byte, error) {
	switch c {
	case CodecNone:
		return src, nil
	case CodecGzip:
		var buf bytes.Buffer
		return closeWritten(gzip.NewWriter(&buf), &buf, src)
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
		return closeWritten(lz4.NewWriter(&buf), &buf, src)
	case CodecZstd:
		return zstdEncoder().EncodeAll(src, nil), nil
	}
	return nil, ErrUnknownCodec
}

// closeWritten writes src through w, a stream compressor writing into
// buf, and closes it (the frame's end is written then): buf holds the
// whole compressed stream.
func closeWritten(w io.WriteCloser, buf *bytes.Buffer, src []byte) ([]byte, error) {
	if _, err := w.Write(src); err != nil {
		return nil, err
	}
	if err := w.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

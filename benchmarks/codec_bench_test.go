package benchmarks

import (
	"bytes"
	"fmt"
	"io"
	"testing"
	"time"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"

	"github.com/verbatim-kafka/verbatim/budget"
	"github.com/verbatim-kafka/verbatim/hotpath"
	"github.com/verbatim-kafka/verbatim/kbatch"
)

// BenchmarkCompressedValidate splits what normal-mode validation of a
// compressed bench-ingest batch costs: "validate" is hotpath.Validate (the
// streaming record walk, CRC, header patch), "inflate" decompresses the
// same payload with the codec library's own reader into io.Discard, the
// floor any broker that walks the records pays (Kafka's LogValidator
// does). MB/s are of the batch's bytes on the wire.
func BenchmarkCompressedValidate(b *testing.B) {
	for _, c := range []kbatch.Codec{kbatch.CodecGzip, kbatch.CodecLZ4, kbatch.CodecZstd} {
		for _, size := range []int{16 << 10, 256 << 10, 1 << 20} {
			batch, _, err := BuildCompressedBatch(size, 1000, c, 1)
			if err != nil {
				b.Fatal(err)
			}
			payload := batch[kbatch.HeaderSize:]
			b.Run(fmt.Sprintf("%s/%dKiB/validate", c, size>>10), func(b *testing.B) {
				o := &hotpath.Options{Mode: hotpath.Normal, Topic: hotpath.DefaultTopicConfig(), NowMs: time.Now().UnixMilli(), Decode: budget.New(64 << 20)}
				buf := bytes.Clone(batch)
				var res hotpath.Result
				b.SetBytes(int64(len(batch)))
				for i := 0; i < b.N; i++ {
					copy(buf, batch)
					if err := hotpath.Validate(buf, o, &res); err != nil {
						b.Fatal(err)
					}
				}
			})
			b.Run(fmt.Sprintf("%s/%dKiB/inflate", c, size>>10), func(b *testing.B) {
				b.SetBytes(int64(len(batch)))
				var zr *zstd.Decoder
				if c == kbatch.CodecZstd {
					zr, _ = zstd.NewReader(nil, zstd.WithDecoderConcurrency(1))
					defer zr.Close()
				}
				for i := 0; i < b.N; i++ {
					var r io.Reader
					switch c {
					case kbatch.CodecGzip:
						g, err := gzip.NewReader(bytes.NewReader(payload))
						if err != nil {
							b.Fatal(err)
						}
						r = g
					case kbatch.CodecLZ4:
						r = lz4.NewReader(bytes.NewReader(payload))
					case kbatch.CodecZstd:
						if err := zr.Reset(bytes.NewReader(payload)); err != nil {
							b.Fatal(err)
						}
						r = zr
					}
					if _, err := io.Copy(io.Discard, r); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

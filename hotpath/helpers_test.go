package hotpath

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kbin"

	"github.com/verbatim-kafka/verbatim/kbatch"
)

// splitRequest reads the request header (v1, or v2 from Produce v9) of a
// test frame (the bytes after the size) with franz-go's kbin.Reader and
// returns the version, the correlation id and the body. The broker's
// connection parses real request headers; the hot path starts at the body.
//
// No tb.Helper(): the benchmarks call it per request, and Helper's stack
// walk would be most of the 1 KiB pipeline's per-request cost.
func splitRequest(tb testing.TB, frame []byte) (version int16, correlationID int32, body []byte) {
	r := kbin.Reader{Src: frame}
	_ = r.Int16() // api key
	version = r.Int16()
	correlationID = r.Int32()
	if n := r.Int16(); n > 0 { // client id, -1 when null
		r.Span(int(n))
	}
	if version >= 9 {
		for n := r.Uvarint(); n > 0; n-- {
			_ = r.Uvarint()
			r.Span(int(r.Uvarint()))
		}
	}
	if !r.Ok() {
		tb.Fatal("truncated request header")
	}
	return version, correlationID, r.Src
}

// lastOffset is the last offset of the last batch of a framed set.
func lastOffset(set []byte) int64 {
	last := int64(-1)
	for len(set) >= kbatch.HeaderSize {
		last = kbatch.BaseOffset(set) + int64(kbatch.LastOffsetDelta(set))
		size := kbatch.LogOverhead + int64(kbatch.Length(set))
		if size < kbatch.HeaderSize || size > int64(len(set)) {
			break
		}
		set = set[size:]
	}
	return last
}

package hotpath

import (
	"fmt"
	"testing"

	"github.com/valyala/bytebufferpool"
)

// Response buffers: sync.Pool of *[]byte (what hotpath uses) against
// bytebufferpool, building real Produce responses of 1, 10 and 200
// partitions in parallel. bytebufferpool's calibration (it learns the
// usual size and drops outliers) buys nothing here: produce responses are
// small, both pools reach 0 allocations, and the pool operation is a
// fraction of the encoding. It would matter for large, varied responses
// (Fetch), which this package does not build.
func benchResponse(partitions int) *ProduceResponse {
	r := &ProduceResponse{Version: 11, Topics: []ProduceTopicResponse{{Name: []byte("bench-topic")}}}
	for i := 0; i < partitions; i++ {
		p := NewPartitionResponse(int32(i), 0)
		p.BaseOffset, p.LogStartOffset = int64(i)*1000, 0
		r.Topics[0].Partitions = append(r.Topics[0].Partitions, p)
	}
	return r
}

func BenchmarkResponseBuffer(b *testing.B) {
	for _, n := range []int{1, 10, 200} {
		resp := benchResponse(n)
		b.Run(fmt.Sprintf("sync.Pool/partitions=%d", n), func(b *testing.B) {
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					p := GetResponseBuffer()
					*p = AppendResponseFrame(*p, 1, resp)
					PutResponseBuffer(p)
				}
			})
		})
		b.Run(fmt.Sprintf("bytebufferpool/partitions=%d", n), func(b *testing.B) {
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					bb := bytebufferpool.Get()
					bb.B = AppendResponseFrame(bb.B[:0], 1, resp)
					bytebufferpool.Put(bb)
				}
			})
		})
	}
}

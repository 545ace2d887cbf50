//go:build !race

package broker

import "testing"

// TestAllocConnRequestPath bounds the connection machinery's allocations
// per request (framing, header, ordering, response framing; the handler
// answers a constant): one, the pending entry that carries the request to
// the writer. Frame buffers are pooled (hotpath), the handler context is
// lazy (reqctx.go), the client id string is reused.
func TestAllocConnRequestPath(t *testing.T) {
	res := testing.Benchmark(BenchmarkConnPipelinedRawRequests)
	if res.N == 0 {
		t.Fatal("benchmark did not run")
	}
	if got := res.AllocsPerOp(); got > 1 {
		t.Fatalf("%d allocations per request, want at most 1 (%s)", got, res.MemString())
	}
}

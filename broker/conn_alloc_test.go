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

// TestAllocProduceConn bounds a whole produce request over a connection,
// normal and mirror, with 8 in flight: the pending entry and at most one
// more (the produce state is pooled, the writer waits without the request
// context's timers).
func TestAllocProduceConn(t *testing.T) {
	for _, mirror := range []bool{false, true} {
		res := testing.Benchmark(func(b *testing.B) { benchProduceConn(b, mirror, 8) })
		if res.N == 0 {
			t.Fatal("benchmark did not run")
		}
		t.Logf("mirror=%v: %d allocations per request", mirror, res.AllocsPerOp())
		if got := res.AllocsPerOp(); got > maxProduceAllocs {
			t.Fatalf("mirror=%v: %d allocations per request, want at most %d (%s)", mirror, got, maxProduceAllocs, res.MemString())
		}
	}
}

//go:build !race

package broker

import (
	"context"
	"testing"
)

// TestAllocProduceRequest bounds the allocations of one single-partition
// Produce request through the handler, the partition queue and storage
// (acks=1, flush never): the response and its per-request bookkeeping,
// never anything proportional to the record bytes.
func TestAllocProduceRequest(t *testing.T) {
	s, err := Open(quietConfig(t.TempDir()))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Shutdown(context.Background())
	cfg, _ := newTopicConfig(nil)
	if _, err := s.cluster.createTopic("alloc", 1, cfg, false); err != nil {
		t.Fatal(err)
	}
	values := make([][]byte, 100)
	for i := range values {
		values[i] = make([]byte, 1000)
	}
	batch := encodeBatch(t, 0, -1, -1, values...)
	preq := produceRequest(9, "alloc", 0, batch)
	preq.Acks = 1
	frame := appendRequestFrame(nil, preq, 1, "alloc")[4:]
	_, e, req, err := decodeFrame(frame)
	if err != nil {
		t.Fatal(err)
	}
	body := append([]byte(nil), req.Body...)
	ctx := context.Background()
	run := func() {
		copy(req.Body, body) // normal mode stamps the batch in place
		reply, err := e.handler(ctx, s, req)
		if err != nil {
			t.Fatal(err)
		}
		if d, ok := reply.(deferredAdapter); ok {
			if reply, err = d.Await(ctx); err != nil {
				t.Fatal(err)
			}
		}
		if reply.(produceReply).Topics[0].Partitions[0].ErrorCode != 0 {
			t.Fatal("produce failed")
		}
	}
	run()
	// The broker compiles its default WASM policies in the background
	// after Open; AllocsPerRun counts every goroutine, so take the best
	// of several rounds (the compile ends within the first ones).
	allocs := testing.AllocsPerRun(200, run)
	for i := 0; i < 20 && allocs > 10; i++ {
		allocs = min(allocs, testing.AllocsPerRun(200, run))
	}
	t.Logf("%.1f allocations per produce request (%d record bytes)", allocs, len(batch))
	if allocs > 10 {
		t.Fatalf("%.1f allocations per produce request, want <= 10", allocs)
	}
}

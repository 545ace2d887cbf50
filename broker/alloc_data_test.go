//go:build !race

package broker

import (
	"bytes"
	"context"
	"encoding/binary"
	"testing"
)

// maxHandlerProduceAllocs bounds the allocations of one produce request
// through the handler, the partition queue and storage, as the connection
// writer resolves and releases it: none.
const maxHandlerProduceAllocs = 0

// maxProduceAllocs bounds a whole produce request over a connection
// (conn_alloc_test.go): the handler's none and the pending entry the
// connection makes as it decodes the frame, which carries the request to
// the writer.
const maxProduceAllocs = 1

// TestAllocProduceRequest bounds the allocations of one single-partition
// Produce request through the handler, the partition queue and storage:
// the per-request state is pooled (produceOp, its validation options
// included), so nothing proportional to the record bytes and at most
// maxHandlerProduceAllocs of anything. Normal and
// mirror produce, acks=1 and acks=-1 under --flush always.
func TestAllocProduceRequest(t *testing.T) {
	for _, c := range []struct {
		name   string
		mirror bool
		acks   int16
		flush  string
	}{
		{"acks=1", false, 1, ""},
		{"acks=-1/flush=always", false, -1, "always"},
		{"mirror/acks=1", true, 1, ""},
		{"mirror/acks=-1/flush=always", true, -1, "always"},
	} {
		t.Run(c.name, func(t *testing.T) {
			s, l := openProduceServer(t, c.flush, "alloc", c.mirror)
			defer s.Shutdown(context.Background())
			n, size := 100, 1000
			if c.mirror {
				n, size = 10, 100 // every round appends at the log end
			}
			values := make([][]byte, n)
			for i := range values {
				values[i] = make([]byte, size)
			}
			batch := encodeBatch(t, 0, -1, -1, values...)
			preq := produceRequest(9, "alloc", 0, batch)
			const sentinel = 0x5a5a5a5a5a5a5a5a
			if c.mirror {
				preq = mirrorProduce(11, "alloc", 0, batch, sentinel, -1)
			}
			preq.Acks = c.acks
			frame := appendRequestFrame(nil, preq, 1, "alloc")[4:]
			_, e, req, err := decodeFrame(frame)
			if err != nil {
				t.Fatal(err)
			}
			body := append([]byte(nil), req.Body...)
			at := bytes.Index(body, batch)
			exp := bytes.Index(body, binary.BigEndian.AppendUint64(nil, sentinel))
			if at < 0 || c.mirror && exp < 0 {
				t.Fatal("batch or expected log end not found in the request body")
			}
			ctx := context.Background()
			run := func() {
				copy(req.Body, body) // normal mode stamps the batch in place
				if c.mirror {
					leo := uint64(l.LogEndOffset())
					binary.BigEndian.PutUint64(req.Body[at:], leo) // the source's base offset
					binary.BigEndian.PutUint64(req.Body[exp:], leo)
				}
				reply, err := e.handler(ctx, s, req)
				if err != nil {
					t.Fatal(err)
				}
				d := reply.(DeferredReply)
				answer, err := d.Await(ctx)
				if err != nil {
					t.Fatal(err)
				}
				pr := answer.(produceReply).op.resp.Topics[0].Partitions[0]
				if pr.ErrorCode != 0 {
					t.Fatalf("produce failed: %d %v", pr.ErrorCode, pr.ErrorMessage)
				}
				reply.(Releaser).Release() // as the connection writer does
			}
			run()
			// The broker compiles its default WASM policies in the
			// background after Open; AllocsPerRun counts every goroutine,
			// so take the best of several rounds (the compile ends within
			// the first ones).
			allocs := testing.AllocsPerRun(100, run)
			for i := 0; i < 10 && allocs > maxHandlerProduceAllocs; i++ {
				allocs = min(allocs, testing.AllocsPerRun(100, run))
			}
			t.Logf("%.1f allocations per produce request (%d record bytes)", allocs, len(batch))
			if allocs > maxHandlerProduceAllocs {
				t.Fatalf("%.1f allocations per produce request, want <= %d", allocs, maxHandlerProduceAllocs)
			}
		})
	}
}

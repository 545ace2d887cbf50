package broker

import (
	"context"
	"io"
	"net"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// fixedReply is a pre-encoded response body.
type fixedReply []byte

func (f fixedReply) AppendTo(dst []byte) []byte { return append(dst, f...) }
func (fixedReply) IsFlexible() bool             { return true }

// BenchmarkConnPipelinedRawRequests measures the connection machinery
// alone (framing, header parsing, ordering, response framing) with a
// raw-body handler that answers a constant, over loopback TCP with 64
// requests in flight. allocs/op is per request.
func BenchmarkConnPipelinedRawRequests(b *testing.B) {
	body := fixedReply(make([]byte, 32))
	var reply Reply = body // boxed once, not per request
	old := registry[kmsg.Produce.Int16()]
	registry[kmsg.Produce.Int16()] = newAPIEntry(kmsg.Produce.Int16(), 3, 13, func(context.Context, *Server, *Request) (Reply, error) { return reply, nil }, rawBody())
	defer func() { registry[kmsg.Produce.Int16()] = old }()

	s, err := Open(quietConfig(b.TempDir()))
	if err != nil {
		b.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	go func() { _ = s.Serve(ln) }()
	defer func() { _ = s.Shutdown(context.Background()) }()
	nc, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		b.Fatal(err)
	}
	defer nc.Close()

	req := kmsg.NewPtrProduceRequest()
	req.Version, req.Acks = 9, 1
	frame := appendRequestFrame(nil, req, 1, "bench")
	const window = 64
	respSize := 4 + 4 + 1 + len(body)
	done := make(chan error, 1)
	go func() {
		buf := make([]byte, respSize*window)
		left := b.N
		for left > 0 {
			n := min(left, window)
			if _, err := io.ReadFull(nc, buf[:n*respSize]); err != nil {
				done <- err
				return
			}
			left -= n
		}
		done <- nil
	}()
	batch := make([]byte, 0, len(frame)*window)
	for range window {
		batch = append(batch, frame...)
	}
	b.SetBytes(int64(len(frame)))
	b.ReportAllocs()
	b.ResetTimer()
	for sent := 0; sent < b.N; {
		n := min(b.N-sent, window)
		if _, err := nc.Write(batch[:n*len(frame)]); err != nil {
			b.Fatal(err)
		}
		sent += n
	}
	if err := <-done; err != nil {
		b.Fatal(err)
	}
}

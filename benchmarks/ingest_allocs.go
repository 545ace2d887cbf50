package benchmarks

// bench-ingest's allocation count: a broker run in this process (one per
// flush policy) and the heap allocations per produce request of a warm run
// against it, the load generator's included.

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"runtime/metrics"
	"time"

	"github.com/verbatim-kafka/verbatim/broker"
)

// inprocBroker is a broker run in this process for counting allocations,
// one per flush policy, shared by the scenarios (a fresh one would compile
// its WASM policies again each time).
type inprocBroker struct {
	srv  *broker.Server
	addr string
	dir  string
}

func (o *IngestOptions) inproc(ctx context.Context, flush string) (*inprocBroker, error) {
	if b := o.brokers[flush]; b != nil {
		return b, nil
	}
	dir, err := os.MkdirTemp(o.WorkDir, "allocs-")
	if err != nil {
		return nil, err
	}
	srv, err := broker.Open(broker.Config{DataDir: dir, Flush: flush,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), MaxInFlightBytes: int64(o.InFlightLimitMB) << 20})
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		_ = srv.Shutdown(ctx)
		os.RemoveAll(dir)
		return nil, err
	}
	go srv.Serve(ln)
	if o.brokers == nil {
		o.brokers = map[string]*inprocBroker{}
	}
	b := &inprocBroker{srv: srv, addr: ln.Addr().String(), dir: dir}
	o.brokers[flush] = b
	return b, nil
}

func (o *IngestOptions) closeInproc() {
	for k, b := range o.brokers {
		_ = b.srv.Shutdown(context.Background())
		os.RemoveAll(b.dir)
		delete(o.brokers, k)
	}
}

// countAllocs counts heap allocations per produce request over a warm run
// of the in-process broker, on a topic of its own.
func (o *IngestOptions) countAllocs(ctx context.Context, mode string, batch int, flush string) (float64, error) {
	b, err := o.inproc(ctx, flush)
	if err != nil {
		return 0, err
	}
	addr := b.addr
	o.topicSeq++
	topic := fmt.Sprintf("allocs-%d", o.topicSeq)
	if err := CreateTopic(ctx, addr, topic, int32(o.Conns), topicConfigs(mode, batch, false)); err != nil {
		return 0, err
	}
	warm := o.load(addr, mode, batch, min(o.AllocBytes/4, 16<<20))
	warm.Topic, warm.Register = topic, true
	wres, err := RunLoad(ctx, warm)
	if err != nil {
		return 0, err
	}
	// The default policies compile in the background after Open; wait
	// until the allocation counter stands still before counting.
	for i := 0; i < 240; i++ {
		a := heapAllocs()
		time.Sleep(250 * time.Millisecond)
		if heapAllocs()-a < 64 {
			break
		}
	}
	// At least 512 requests: fixed costs of a run (a GC cycle, timers,
	// the log's background work) are a few hundred allocations, which
	// over the 64 requests of 64 MiB of 1 MiB batches read as 3-6 per
	// request, and as 1.5-1.9 over 512.
	l := o.load(addr, mode, batch, max(o.AllocBytes, 512*int64(batch)))
	l.Topic, l.Register = topic, true
	l.StartOffsets = wres.EndOffsets
	var before uint64
	l.OnStart = func() { before = heapAllocs() } // request encoding is not counted
	res, err := RunLoad(ctx, l)
	if err != nil {
		return 0, err
	}
	return float64(heapAllocs()-before) / float64(res.Requests), nil
}

func heapAllocs() uint64 {
	s := []metrics.Sample{{Name: "/gc/heap/allocs:objects"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

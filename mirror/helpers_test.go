package mirror

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/verbatim-kafka/verbatim/broker"
	"github.com/verbatim-kafka/verbatim/internal/testwasm"
)

// dest is an in-process Verbatim broker.
type dest struct {
	srv  *broker.Server
	addr string
	dir  string
	done chan error
}

func startDest(t *testing.T, dir string) *dest {
	t.Helper()
	testwasm.LinkCache(t, dir)
	srv, err := broker.Open(broker.Config{DataDir: dir, NodeID: 1, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatalf("broker.Open: %v", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	d := &dest{srv: srv, addr: ln.Addr().String(), dir: dir, done: make(chan error, 1)}
	go func() { d.done <- srv.Serve(ln) }()
	t.Cleanup(d.stop)
	return d
}

func (d *dest) stop() {
	if d.srv == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_ = d.srv.Shutdown(ctx)
	<-d.done
	d.srv = nil
}

// startSource is a kfake cluster standing in for any Kafka source.
func startSource(t *testing.T, opts ...kfake.Opt) *kfake.Cluster {
	t.Helper()
	c, err := kfake.NewCluster(append([]kfake.Opt{kfake.NumBrokers(1)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

func client(t *testing.T, addr string, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(addr)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func produceN(t *testing.T, cl *kgo.Client, topic string, n int, keyed bool) {
	t.Helper()
	ctx := ctxT(t)
	for i := 0; i < n; i++ {
		r := &kgo.Record{Topic: topic, Value: bytes.Repeat([]byte{byte('a' + i%26)}, 10+i%50)}
		if keyed {
			r.Key = []byte{byte('k'), byte(i % 7)}
			r.Headers = []kgo.RecordHeader{{Key: "h", Value: []byte{byte(i)}}}
		}
		cl.Produce(ctx, r, func(_ *kgo.Record, err error) {
			if err != nil {
				t.Errorf("produce: %v", err)
			}
		})
	}
	if err := cl.Flush(ctx); err != nil {
		t.Fatal(err)
	}
}

// rawLog reads a whole partition with read_uncommitted as raw bytes.
func rawLog(t *testing.T, addr, topic string, part int32) []byte {
	t.Helper()
	ctx := ctxT(t)
	cl, err := NewCluster(addr, "test")
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	cn, _, err := cl.Leader(ctx, topic, part)
	if err != nil {
		t.Fatal(err)
	}
	end, err := ListOffset(ctx, cn, topic, part, Latest, ReadUncommitted)
	if err != nil {
		t.Fatal(err)
	}
	start, err := ListOffset(ctx, cn, topic, part, Earliest, ReadUncommitted)
	if err != nil {
		t.Fatal(err)
	}
	var out []byte
	for next := start.Offset; next < end.Offset; {
		res, err := FetchPartition(ctx, cn, FetchArgs{Topic: topic, Partition: part, Offset: next, MaxBytes: 1 << 20, CurrentEpoch: -1, LastFetchedEpoch: -1})
		if err == nil {
			err = res.Err
		}
		if err != nil {
			t.Fatal(err)
		}
		bs, span, _, err := Split(res.Records, next)
		if err != nil {
			t.Fatal(err)
		}
		if len(bs) == 0 {
			break
		}
		out = append(out, span...)
		next = LastOffset(bs[len(bs)-1]) + 1
	}
	return out
}

// produceBatches writes n batches of per records each (one ProduceSync per
// batch), so the source log has many small batches.
func produceBatches(t *testing.T, cl *kgo.Client, topic string, n, per int) {
	t.Helper()
	ctx := ctxT(t)
	for i := 0; i < n; i++ {
		rs := make([]*kgo.Record, per)
		for j := range rs {
			rs[j] = &kgo.Record{Topic: topic, Value: []byte{byte(i), byte(j)}}
		}
		if err := cl.ProduceSync(ctx, rs...).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
}

func kadmClient(t *testing.T, addr string) *kadm.Client {
	return kadm.NewClient(client(t, addr))
}

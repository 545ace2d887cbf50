package verify

import (
	"context"
	"io"
	"log/slog"
	"net"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/verbatim-kafka/verbatim/broker"
	"github.com/verbatim-kafka/verbatim/internal/testwasm"
	"github.com/verbatim-kafka/verbatim/mirror"
)

// startDest runs an in-process Verbatim broker and returns its address.
func startDest(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	testwasm.LinkCache(t, dir)
	srv, err := broker.Open(broker.Config{DataDir: dir, NodeID: 1, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatalf("broker.Open: %v", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
		<-done
	})
	return ln.Addr().String()
}

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

func produce(t *testing.T, cl *kgo.Client, rs ...*kgo.Record) {
	t.Helper()
	if err := cl.ProduceSync(ctxT(t), rs...).FirstErr(); err != nil {
		t.Fatalf("produce: %v", err)
	}
}

func push(t *testing.T, src, dst string, topics ...string) {
	t.Helper()
	if _, err := mirror.Push(ctxT(t), mirror.Options{Source: src, Dest: dst, Topics: topics, CreateTopics: true}); err != nil {
		t.Fatalf("push: %v (exit %d)", err, mirror.ExitCode(err))
	}
}

func run(t *testing.T, src, dst string, topics ...string) *Report {
	t.Helper()
	rep, err := Run(ctxT(t), Options{Source: src, Dest: dst, Topics: topics})
	if err != nil {
		t.Fatalf("verify could not run: %v", err)
	}
	return rep
}

func createTopicReq(name string) *kmsg.CreateTopicsRequest {
	req := kmsg.NewPtrCreateTopicsRequest()
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = name, 1, -1
	req.Topics = append(req.Topics, rt)
	return req
}

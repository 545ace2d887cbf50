package testkit

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/verbatim-kafka/verbatim/broker"
	"github.com/verbatim-kafka/verbatim/client"
	"github.com/verbatim-kafka/verbatim/internal/testwasm"
	"github.com/verbatim-kafka/verbatim/kbatch"
)

// Dest is an in-process Verbatim broker.
type Dest struct {
	Srv  *broker.Server
	Addr string
	Dir  string
	done chan error
}

// StartDest opens a broker on dir and serves it on a loopback port until
// the test ends (or Stop).
func StartDest(t *testing.T, dir string) *Dest {
	t.Helper()
	return StartDestConfig(t, broker.Config{DataDir: dir, NodeID: 1})
}

// StartDestConfig is StartDest with cfg (its DataDir; a nil Logger
// discards).
func StartDestConfig(t *testing.T, cfg broker.Config) *Dest {
	t.Helper()
	dir := cfg.DataDir
	testwasm.LinkCache(t, dir)
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	srv, err := broker.Open(cfg)
	if err != nil {
		t.Fatalf("broker.Open: %v", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	d := &Dest{Srv: srv, Addr: ln.Addr().String(), Dir: dir, done: make(chan error, 1)}
	go func() { d.done <- srv.Serve(ln) }()
	t.Cleanup(d.Stop)
	return d
}

// Stop shuts the broker down; a second Stop does nothing.
func (d *Dest) Stop() {
	if d.Srv == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_ = d.Srv.Shutdown(ctx)
	<-d.done
	d.Srv = nil
}

// StartSource is a one-broker kfake cluster (more with kfake.NumBrokers)
// standing in for any Kafka source.
func StartSource(t *testing.T, opts ...kfake.Opt) *kfake.Cluster {
	t.Helper()
	c, err := kfake.NewCluster(append([]kfake.Opt{kfake.NumBrokers(1)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

// Client is a kgo client seeded with addr, closed when the test ends.
func Client(t *testing.T, addr string, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(addr)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// Ctx is a context that ends after a minute or with the test.
func Ctx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// CommitStandalone commits offset for topic/partition as a standalone
// commit of group (generation -1, no member), as admin tools do; a
// refused partition is an error naming its code.
func CommitStandalone(ctx context.Context, cl *kgo.Client, group, topic string, partition int32, offset int64) error {
	req := kmsg.NewPtrOffsetCommitRequest()
	req.Group, req.Generation = group, -1
	rt := kmsg.NewOffsetCommitRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewOffsetCommitRequestTopicPartition()
	rp.Partition, rp.Offset = partition, offset
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return err
	}
	if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
		return fmt.Errorf("OffsetCommit %s: malformed answer", group)
	}
	return kerr.ErrorForCode(resp.Topics[0].Partitions[0].ErrorCode)
}

// ServeSASL serves srv on a SASL_PLAINTEXT listener on a loopback port
// until the test ends and returns its address.
func ServeSASL(t testing.TB, srv *broker.Server) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		done <- srv.ServeListener(ln, &broker.Listener{Name: "SASL_PLAINTEXT", Protocol: broker.ProtocolSASLPlaintext})
	}()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
		<-done
	})
	return ln.Addr().String()
}

// RawLog reads a whole partition of the cluster at addr, from its log
// start, with read_uncommitted, as the raw bytes of its whole batches.
func RawLog(t testing.TB, addr, topic string, part int32) []byte {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cl, err := client.NewCluster(addr, client.Options{ClientID: "test"})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	out, _ := ReadLog(t, ctx, cl, topic, part)
	return out
}

// ReadLog reads partition part of topic on cl from its log start to its
// high watermark (read_uncommitted, sessionless, over the cluster's
// connection to the leader) and returns the raw bytes of its whole
// batches and the high watermark. A fetch below the high watermark that
// yields no new whole batch fails the test.
func ReadLog(t testing.TB, ctx context.Context, cl *client.Cluster, topic string, part int32) ([]byte, int64) {
	t.Helper()
	cn, _, err := cl.Leader(ctx, topic, part)
	if err != nil {
		t.Fatal(err)
	}
	end, err := client.ListOffset(ctx, cn, topic, part, client.Latest, client.ReadUncommitted)
	if err != nil {
		t.Fatal(err)
	}
	start, err := client.ListOffset(ctx, cn, topic, part, client.Earliest, client.ReadUncommitted)
	if err != nil {
		t.Fatal(err)
	}
	var out []byte
	for next := start.Offset; next < end.Offset; {
		res, err := client.FetchPartition(ctx, cn, client.FetchArgs{Topic: topic, Partition: part, Offset: next, MaxBytes: 1 << 20, CurrentEpoch: -1, LastFetchedEpoch: -1})
		if err == nil {
			err = res.Err
		}
		if err != nil {
			t.Fatal(err)
		}
		n := len(out)
		for rest := res.Records; len(rest) > 0; {
			b, r, err := kbatch.Next(rest)
			if err != nil {
				break // a partial trailing batch
			}
			rest = r
			if last := kbatch.BaseOffset(b) + int64(kbatch.LastOffsetDelta(b)); last >= next {
				out = append(out, b...)
				next = last + 1
			}
		}
		if len(out) == n {
			t.Fatalf("%s/%d: a fetch at %d (high watermark %d) gave no whole batch", topic, part, next, end.Offset)
		}
	}
	return out, end.Offset
}

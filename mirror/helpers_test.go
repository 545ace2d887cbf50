package mirror

import (
	"bytes"
	"context"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/verbatim-kafka/verbatim/internal/testkit"
)

// startPushPair starts the usual fixture of a push test: a one-broker
// kfake source with a one-partition topic "t" (and its address) and an
// empty destination broker.
func startPushPair(t *testing.T) (*kfake.Cluster, string, *testkit.Dest) {
	t.Helper()
	src := testkit.StartSource(t, kfake.SeedTopics(1, "t"))
	return src, src.ListenAddrs()[0], testkit.StartDest(t, t.TempDir())
}

// followInBackground runs a pusher with o (a following one) until stop,
// which cancels the run and fails t unless it then ended without error.
func followInBackground(t *testing.T, o Options) (*Pusher, func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(testkit.Ctx(t))
	p, err := NewPusher(o)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { _, err := p.Run(ctx); done <- err }()
	return p, func() {
		t.Helper()
		cancel()
		if err := <-done; err != nil {
			t.Fatalf("follow ended with %v", err)
		}
	}
}

func produceN(t *testing.T, cl *kgo.Client, topic string, n int, keyed bool) {
	t.Helper()
	ctx := testkit.Ctx(t)
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
	return testkit.RawLog(t, addr, topic, part)
}

// produceBatches writes n batches of per records each (one ProduceSync per
// batch), so the source log has many small batches.
func produceBatches(t *testing.T, cl *kgo.Client, topic string, n, per int) {
	t.Helper()
	ctx := testkit.Ctx(t)
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
	return kadm.NewClient(testkit.Client(t, addr))
}

package mirror

import (
	"bytes"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/verbatim-kafka/verbatim/client"
	"github.com/verbatim-kafka/verbatim/internal/testkit"
)

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
	t.Helper()
	ctx := testkit.Ctx(t)
	cl, err := client.NewCluster(addr, client.Options{ClientID: "test"})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
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

package benchmarks

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/verbatim-kafka/verbatim/client"
	"github.com/verbatim-kafka/verbatim/internal/testkit"
)

// RefCopy, the link benchmark's reference, copies every partition from
// offset 0 to the end it was given into the write-only sink: the sink's
// file of each partition is the source's batches byte for byte, with fetch
// sizes small enough that every partition takes several requests and a
// response cuts batches.
func TestRefCopy(t *testing.T) {
	src := testkit.StartSource(t, kfake.SeedTopics(3, "a"), kfake.SeedTopics(2, "b"))
	addr := src.ListenAddrs()[0]
	cl := testkit.Client(t, addr, kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerBatchMaxBytes(4<<10))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	tps := []client.TopicPartition{{Topic: "a", Partition: 0}, {Topic: "a", Partition: 1}, {Topic: "a", Partition: 2}, {Topic: "b", Partition: 0}, {Topic: "b", Partition: 1}}
	for i, tp := range tps[:4] { // b/1 stays empty
		for j := range 200 * (i + 1) {
			cl.Produce(ctx, &kgo.Record{Topic: tp.Topic, Partition: tp.Partition, Value: fmt.Appendf(nil, "%s-%d-%d-%0100d", tp.Topic, tp.Partition, j, j)}, nil)
		}
	}
	if err := cl.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	sc, err := client.NewCluster(addr, client.Options{ClientID: "test"})
	if err != nil {
		t.Fatal(err)
	}
	defer sc.Close()
	ends := map[client.TopicPartition]int64{}
	for _, tp := range tps {
		cn, _, err := sc.Leader(ctx, tp.Topic, tp.Partition)
		if err != nil {
			t.Fatal(err)
		}
		e, err := client.ListOffset(ctx, cn, tp.Topic, tp.Partition, client.Latest, client.ReadUncommitted)
		if err != nil {
			t.Fatal(err)
		}
		ends[tp] = e.Offset
	}
	dir := t.TempDir()
	sink := &Sink{Dir: dir}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go sink.Serve(ln)
	res, err := RefCopy(ctx, RefCopyOptions{Cluster: sc, Ends: ends, Sink: ln.Addr().String(), PartitionBytes: 8 << 10, ResponseBytes: 20 << 10, InFlight: 2})
	ln.Close()
	sink.Close()
	if err != nil {
		t.Fatal(err)
	}
	var total int64
	for _, tp := range tps {
		want := testkit.RawLog(t, addr, tp.Topic, tp.Partition)
		got, err := os.ReadFile(filepath.Join(dir, fmt.Sprintf("%s-%d.log", tp.Topic, tp.Partition)))
		if len(want) == 0 {
			if err == nil && len(got) > 0 {
				t.Fatalf("%s: the sink got %d bytes of an empty partition", tp, len(got))
			}
			continue
		}
		if err != nil || !bytes.Equal(got, want) {
			t.Fatalf("%s: the sink holds %d bytes (%v), the source %d, or they differ", tp, len(got), err, len(want))
		}
		total += int64(len(want))
	}
	if res.Bytes != total {
		t.Fatalf("RefCopy reports %d bytes, the partitions hold %d", res.Bytes, total)
	}
}

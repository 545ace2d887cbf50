package interop

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// TestKafka3NodeCluster starts three combined KRaft nodes, creates an RF=3
// topic and moves 100 records through it with franz-go.
func TestKafka3NodeCluster(t *testing.T) {
	const topic = "replicated"
	const n = 100
	start := time.Now()
	k := StartKafkaCluster(t, 3, KafkaOptions{HeapMB: 320})
	t.Logf("3 nodes ready in %v: %s", time.Since(start).Round(time.Millisecond), k.Bootstrap())
	if len(k.Nodes) != 3 {
		t.Fatalf("got %d nodes", len(k.Nodes))
	}
	k.CreateTopic(t, topic, 1, 3, map[string]string{"min.insync.replicas": "2"})

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	adm := k.Admin(t)
	var replicas, isr int
	for {
		md, err := adm.Metadata(ctx, topic)
		if err != nil {
			t.Fatalf("metadata: %v", err)
		}
		if len(md.Brokers) != 3 {
			t.Fatalf("metadata lists %d brokers, want 3", len(md.Brokers))
		}
		p := md.Topics[topic].Partitions[0]
		replicas, isr = len(p.Replicas), len(p.ISR)
		if replicas == 3 && isr == 3 {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatalf("partition never reached 3 replicas in sync: replicas=%d isr=%d", replicas, isr)
		case <-time.After(200 * time.Millisecond):
		}
	}

	prod := k.Client(t, kgo.RequiredAcks(kgo.AllISRAcks()), kgo.DefaultProduceTopic(topic))
	var recs []*kgo.Record
	for i := 0; i < n; i++ {
		recs = append(recs, &kgo.Record{Key: []byte(fmt.Sprintf("k%03d", i)), Value: []byte(fmt.Sprintf("v%03d", i))})
	}
	if err := prod.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatalf("produce: %v", err)
	}
	for i, r := range recs {
		if r.Offset != int64(i) {
			t.Fatalf("record %d acknowledged at offset %d", i, r.Offset)
		}
	}

	cons := k.Client(t, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{
		topic: {0: kgo.NewOffset().AtStart()},
	}))
	got := 0
	for got < n {
		fs := cons.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("consumed %d of %d records before timeout", got, n)
		}
		fs.EachError(func(tp string, p int32, err error) { t.Fatalf("fetch %s/%d: %v", tp, p, err) })
		fs.EachRecord(func(r *kgo.Record) {
			if r.Offset != int64(got) || string(r.Key) != fmt.Sprintf("k%03d", got) || string(r.Value) != fmt.Sprintf("v%03d", got) {
				t.Fatalf("record %d: offset %d key %q value %q", got, r.Offset, r.Key, r.Value)
			}
			got++
		})
	}

	offs, err := adm.ListEndOffsets(ctx, topic)
	if err != nil {
		t.Fatalf("list end offsets: %v", err)
	}
	if o, _ := offs.Lookup(topic, 0); o.Offset != n {
		t.Fatalf("end offset %d, want %d", o.Offset, n)
	}

	// acks=all with all three in sync: every node's replica holds the same
	// segment bytes.
	var sizes []int64
	for _, node := range k.Nodes {
		fi, err := os.Stat(filepath.Join(node.DataDir, topic+"-0", "00000000000000000000.log"))
		if err != nil {
			t.Fatalf("node %d replica: %v", node.ID, err)
		}
		sizes = append(sizes, fi.Size())
	}
	if sizes[0] == 0 || sizes[0] != sizes[1] || sizes[0] != sizes[2] {
		t.Fatalf("replica segment sizes differ or are empty: %v", sizes)
	}

	start = time.Now()
	k.Stop()
	t.Logf("3 nodes stopped in %v", time.Since(start).Round(time.Millisecond))
	for _, node := range k.Nodes {
		if node.Running() {
			t.Errorf("node %d still running after Stop", node.ID)
		}
	}
}

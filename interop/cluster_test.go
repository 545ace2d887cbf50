package interop

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
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

// TestVerbatimCluster is the replicated cluster's acceptance against three
// `verbatim serve` brokers with embedded etcd members started by
// scripts/cluster.sh: topics with replication factor 3 through Kafka's
// tools and the real clients, the SIGKILL of partition leaders under
// idempotent acks=all producers losing and duplicating nothing, and a
// restarted broker catching up into the ISR.
func TestVerbatimCluster(t *testing.T) {
	bin := BuildVerbatim(t)
	start := time.Now()
	c := StartVCluster(t, bin, 3, VClusterOptions{Props: []string{
		// Failure detection in about 3 s: the failover below waits for it.
		"broker.session.timeout.ms=3000",
		"replica.lag.time.max.ms=5000",
		"group.initial.rebalance.delay.ms=0",
	}})
	t.Logf("3 brokers ready in %v: %s", time.Since(start).Round(time.Millisecond), c.Bootstrap())
	bs := c.Bootstrap()
	cl := verbatimClient(t, bs)
	rc := realClients{bs: bs, cl: cl, adm: kadm.NewClient(cl), rf: 3}

	t.Run("kafka-topics-rf3-on-every-broker", func(t *testing.T) {
		const topic = "tool-rf3"
		JavaTool(t, "kafka-topics", "--bootstrap-server", bs, "--create", "--topic", topic,
			"--partitions", "3", "--replication-factor", "3", "--config", "min.insync.replicas=2")
		// Every broker answers with every broker, three replicas and an
		// ISR of three per partition, and they agree on the leaders.
		waitInSync(t, c, cl, topic, 3, 3)
		res := JavaTool(t, "kafka-topics", "--bootstrap-server", bs, "--describe", "--topic", topic)
		parts := 0
		for _, l := range strings.Split(res.Stdout, "\n") {
			f := dumpFields(l)
			if f["Partition"] == "" {
				continue
			}
			if len(strings.Split(f["Replicas"], ",")) == 3 && len(strings.Split(f["Isr"], ",")) == 3 && f["Leader"] != "" && f["Leader"] != "none" {
				parts++
			}
		}
		if parts != 3 || !strings.Contains(res.Stdout, "ReplicationFactor: 3") {
			t.Errorf("kafka-topics --describe: %d partitions with 3 replicas in sync and a leader, want 3:\n%s", parts, res.Stdout)
		}
	})
	t.Run("kcat-every-codec", rc.kcatEveryCodec)
	t.Run("java-console", rc.javaConsole)
	t.Run("confluent-kafka", rc.confluentKafka)
	t.Run("franz-go", rc.franzGo)
	t.Run("leader-sigkill-failover", func(t *testing.T) { clusterFailover(t, c, cl) })
	t.Run("restarted-broker-rejoins-isr", func(t *testing.T) { clusterRejoin(t, c, cl) })
	t.Run("controlled-shutdown-moves-leadership", func(t *testing.T) { clusterControlledShutdown(t, c, cl) })
	t.Run("kafka-leader-election", func(t *testing.T) { clusterLeaderElection(t, c, cl) })
}

// partitionView is one broker's Metadata answer for one partition.
type partitionView struct {
	leader, epoch int32
	replicas, isr []int32
}

// brokerView is BrokerPartitions in the tests' own type.
func brokerView(ctx context.Context, cl *kgo.Client, node int32, topic string) ([]partitionView, int, error) {
	v, brokers, err := BrokerPartitions(ctx, cl, node, topic)
	return partitionViews(v), brokers, err
}

func partitionViews(v []PartitionView) []partitionView {
	out := make([]partitionView, len(v))
	for i, pv := range v {
		out[i] = partitionView{leader: pv.Leader, epoch: pv.Epoch, replicas: pv.Replicas, isr: pv.ISR}
	}
	return out
}

// waitInSync waits (bounded) until every broker of c answers Metadata for
// topic with its partitions count, three brokers, rf replicas and rf in
// sync per partition, the same leader and leader epoch as the others, and
// returns that view (WaitInSync).
func waitInSync(t testing.TB, c *VCluster, cl *kgo.Client, topic string, partitions, rf int) []partitionView {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 45*time.Second)
	defer cancel()
	nodes := make([]int32, len(c.Nodes))
	for i, nd := range c.Nodes {
		nodes[i] = nd.ID
	}
	v, err := WaitInSync(ctx, cl, nodes, topic, partitions, rf)
	if err != nil {
		t.Fatalf("%s: %v", topic, err)
	}
	return partitionViews(v)
}

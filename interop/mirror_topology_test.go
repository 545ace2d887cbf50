package interop

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/verbatim-kafka/verbatim/internal/testkit"
	"github.com/verbatim-kafka/verbatim/kbatch"
)

// TestMirrorTopologies runs the mirror topologies of issue #8 with a real
// Apache Kafka 4.4 at the head: a confluent-kafka consumer group re-pointed
// from Kafka to Verbatim, fan-out (one source, two Verbatim destinations),
// fan-in (two Kafka clusters into one Verbatim) and a chain Kafka ->
// Verbatim B -> Verbatim C with a failover of B in the middle. One Kafka
// node serves every subtest (fan-in starts a second one); one restart of it
// gives every source topic two leader epochs.
func TestMirrorTopologies(t *testing.T) {
	bin := BuildVerbatim(t)
	k := StartKafka(t, KafkaOptions{})
	src := k.Bootstrap()
	cl := k.Client(t, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	txn := k.Client(t, kgo.TransactionalID("topology-txn"), kgo.RecordPartitioner(kgo.ManualPartitioner()))

	k.CreateTopic(t, "rp", 2, 1, nil)
	k.CreateTopic(t, "fan", 2, 1, nil)
	k.CreateTopic(t, "fanin-a", 1, 1, nil)
	k.CreateTopic(t, "chain", 1, 1, nil)
	for round := 0; round < 2; round++ {
		tag := fmt.Sprintf("r%d", round)
		for p := int32(0); p < 2; p++ {
			produceSync(t, cl, onPartition(keyed("rp", 100, tag), p)...)
			produceSync(t, cl, onPartition(keyed("fan", 30, tag), p)...)
		}
		produceSync(t, cl, keyed("fanin-a", 40, tag)...)
		produceSync(t, cl, keyed("chain", 25, tag)...)
		runTxn(t, txn, true, onPartition(keyed("chain", 5, tag+"-commit"), 0), onPartition(keyed("fan", 4, tag+"-commit"), 1))
		runTxn(t, txn, false, onPartition(keyed("chain", 5, tag+"-abort"), 0), onPartition(keyed("fan", 4, tag+"-abort"), 0))
		if round == 0 {
			k.Nodes[0].Restart(t) // every partition gets a new leader epoch
		}
	}

	t.Run("repoint-confluent", func(t *testing.T) {
		v := StartVerbatim(t, bin, VerbatimOptions{})
		// Partition 0 stops inside the first epoch, partition 1 inside the
		// second.
		testRepointConfluent(t, bin, k, v.Addr, "rp", []int64{70, 130}, []int64{200, 200})
	})

	t.Run("fan-out", func(t *testing.T) {
		// One source topic set, two destinations: one by a follower that
		// keeps tailing the source while more data arrives, one by
		// repeated one-shot pushes. Both are exact.
		v1 := StartVerbatim(t, bin, VerbatimOptions{})
		v2 := StartVerbatim(t, bin, VerbatimOptions{})
		topics := "fan,rp"
		follower := StartProc(t, "pusher-follow", filepath.Join(t.TempDir(), "push.log"), t.TempDir(), nil,
			bin, "mirror", "push", "--source", src, "--dest", v2.Addr, "--topics", topics, "--create-topics", "--follow", "--log-format", "json")
		runPush(t, bin, src, v1.Addr, 0, "--topics", topics, "--create-topics")
		for p := int32(0); p < 2; p++ {
			produceSync(t, cl, onPartition(keyed("fan", 20, "late"), p)...)
		}
		runTxn(t, txn, true, onPartition(keyed("fan", 6, "late-commit"), 0))
		runTxn(t, txn, false, onPartition(keyed("fan", 6, "late-abort"), 1))
		runPush(t, bin, src, v1.Addr, 0, "--topics", topics)
		for _, topic := range []string{"fan", "rp"} {
			waitSameEnds(t, follower, src, v2.Addr, topic)
		}
		follower.Signal(syscall.SIGTERM)
		if !follower.Wait(30*time.Second) || follower.ExitCode() != 0 {
			t.Fatalf("the following pusher after SIGTERM: exit %d\n%s", follower.ExitCode(), follower.LogTail(20))
		}
		for _, dst := range []string{v1.Addr, v2.Addr} {
			expectIdentical(t, runVerify(t, bin, src, dst, topics, 0), 4)
		}
		// And the two copies are identical to each other.
		expectIdentical(t, runVerify(t, bin, v1.Addr, v2.Addr, topics, 0), 4)
	})

	t.Run("fan-in", func(t *testing.T) {
		// Topics of two Kafka clusters into one Verbatim: each is exact
		// against its own source and records its own source cluster id.
		k2 := StartKafka(t, KafkaOptions{})
		src2 := k2.Bootstrap()
		if k2.ClusterID == k.ClusterID {
			t.Fatal("the two Kafka clusters share a cluster id")
		}
		k2.CreateTopic(t, "fanin-b", 2, 1, nil)
		cl2 := k2.Client(t, kgo.RecordPartitioner(kgo.ManualPartitioner()))
		tx2 := k2.Client(t, kgo.TransactionalID("fanin-b-txn"), kgo.RecordPartitioner(kgo.ManualPartitioner()))
		for p := int32(0); p < 2; p++ {
			produceSync(t, cl2, onPartition(keyed("fanin-b", 30, "b"), p)...)
		}
		runTxn(t, tx2, false, onPartition(keyed("fanin-b", 5, "b-abort"), 0), onPartition(keyed("fanin-b", 5, "b-abort"), 1))
		runTxn(t, tx2, true, onPartition(keyed("fanin-b", 5, "b-commit"), 1))

		v := StartVerbatim(t, bin, VerbatimOptions{})
		runPush(t, bin, src, v.Addr, 0, "--topics", "fanin-a", "--create-topics")
		runPush(t, bin, src2, v.Addr, 0, "--topics", "fanin-b", "--create-topics")
		expectIdentical(t, runVerify(t, bin, src, v.Addr, "fanin-a", 0), 1)
		expectIdentical(t, runVerify(t, bin, src2, v.Addr, "fanin-b", 0), 2)
		cfg := topicConfigs(t, v.Addr, "fanin-a", "fanin-b")
		for topic, want := range map[string]string{"fanin-a": k.ClusterID, "fanin-b": k2.ClusterID} {
			if got := cfg[topic]["mirror.source.cluster.id"]; got != want || cfg[topic]["mirror.mode"] != "push" {
				t.Errorf("%s on Verbatim: mirror.source.cluster.id %q, mirror.mode %q; want %q, push", topic, got, cfg[topic]["mirror.mode"], want)
			}
		}
	})

	t.Run("chain-failover", func(t *testing.T) {
		testChainFailover(t, bin, k)
	})
}

// testChainFailover: Kafka -> Verbatim B -> Verbatim C; C is exact against
// Kafka and every hop has the source's producer state. Then B fails over
// (`mirror stop`: the open transaction is aborted, the type-7 barrier
// written, producer state cleared), local idempotent and transactional
// producers write to B, and B -> C goes on: C is exact against B, holds B's
// barrier, and has B's producer state.
func testChainFailover(t *testing.T, bin string, k *Kafka) {
	src := k.Bootstrap()
	b := StartVerbatim(t, bin, VerbatimOptions{})
	c := StartVerbatim(t, bin, VerbatimOptions{})
	runPush(t, bin, src, b.Addr, 0, "--topics", "chain", "--create-topics")
	runPush(t, bin, b.Addr, c.Addr, 0, "--topics", "chain", "--create-topics")
	// A transaction left open on the source, copied along the chain by a
	// second round of pushes (as a following mirror would): the failover
	// of B must abort it. The long timeout keeps the source coordinator
	// from aborting it first. (The case of an open transaction copied in
	// the same append as earlier ABORT markers has its own test,
	// TestMirrorTxnIndexOneAppend.)
	open := k.Client(t, kgo.TransactionalID("chain-open"), kgo.TransactionTimeout(10*time.Minute),
		kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err := open.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	produceSync(t, open, keyed("chain", 3, "open")...)
	runPush(t, bin, src, b.Addr, 0, "--topics", "chain")
	expectIdentical(t, runVerify(t, bin, src, b.Addr, "chain", 0), 1)
	runPush(t, bin, b.Addr, c.Addr, 0, "--topics", "chain")
	expectIdentical(t, runVerify(t, bin, src, c.Addr, "chain", 0), 1)
	kp := describeProducers(t, src, "chain")
	if len(kp) < 3 {
		t.Fatalf("the source knows %d producers of chain/0, want at least 3 (idempotent, transactional, open)", len(kp))
	}
	sameProducers(t, "B (mirror of Kafka)", describeProducers(t, b.Addr, "chain"), "Kafka", kp)
	sameProducers(t, "C (mirror of B)", describeProducers(t, c.Addr, "chain"), "Kafka", kp)
	// C's source is B: its topic records B's cluster id, not Kafka's.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	md, err := kadm.NewClient(testkit.Client(t, b.Addr)).BrokerMetadata(ctx)
	if err != nil {
		t.Fatal(err)
	}
	cfg := topicConfigs(t, c.Addr, "chain")
	if id := cfg["chain"]["mirror.source.cluster.id"]; id != md.Cluster || id == k.ClusterID {
		t.Fatalf("C's chain has mirror.source.cluster.id %q, want B's cluster id %q", id, md.Cluster)
	}

	end := destEnd(t, b.Addr, "chain")
	res, _ := RunTool(t, Cmd{}, bin, "mirror", "stop", "--dest", b.Addr, "--topics", "chain")
	if res.ExitCode != 0 || !strings.Contains(res.Stdout, fmt.Sprintf("chain/0: last mirrored offset %d", end-1)) ||
		!strings.Contains(res.Stdout, "1 transactions aborted, barrier true") {
		t.Fatalf("mirror stop on B: exit %d\n%s%s", res.ExitCode, res.Stdout, res.Stderr)
	}
	if ps := describeProducers(t, b.Addr, "chain"); len(ps) != 0 {
		t.Fatalf("B after the stop still has producer state: %v", ps)
	}

	// Local producers on B.
	idem := testkit.Client(t, b.Addr, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	produceSync(t, idem, keyed("chain", 20, "b-idem")...)
	tx := testkit.Client(t, b.Addr, kgo.TransactionalID("chain-b-txn"), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	runTxn(t, tx, true, keyed("chain", 7, "b-commit"))
	runTxn(t, tx, false, keyed("chain", 7, "b-abort"))
	produceSync(t, idem, keyed("chain", 5, "b-idem-last")...)
	idemID, _, err := idem.ProducerID(ctx)
	if err != nil {
		t.Fatal(err)
	}
	txID, _, err := tx.ProducerID(ctx)
	if err != nil {
		t.Fatal(err)
	}

	runPush(t, bin, b.Addr, c.Addr, 0, "--topics", "chain")
	expectIdentical(t, runVerify(t, bin, b.Addr, c.Addr, "chain", 0), 1)
	// C holds B's barrier: one type-7 control batch, right after the stop's
	// ABORT marker, whose MirrorPidResetRecord (version 0, flexible) names
	// the cluster B mirrored, Kafka.
	wantValue := binary.AppendUvarint([]byte{0, 0}, uint64(len(k.ClusterID))+1)
	wantValue = append(append(wantValue, k.ClusterID...), 0)
	for _, who := range []struct{ name, addr string }{{"B", b.Addr}, {"C", c.Addr}} {
		bs := controlBatches(t, who.addr, "chain", 7)
		if len(bs) != 1 {
			t.Fatalf("%s holds %d MIRROR_PID_RESET barriers, want 1", who.name, len(bs))
		}
		recs, err := kbatch.Records(bs[0])
		if err != nil || len(recs) != 1 {
			t.Fatalf("%s's barrier: %d records, %v", who.name, len(recs), err)
		}
		if at := kbatch.BaseOffset(bs[0]); at != end+1 || !bytes.Equal(recs[0].Value, wantValue) {
			t.Fatalf("%s's barrier at %d has value %x; want it at %d with value %x", who.name, at, recs[0].Value, end+1, wantValue)
		}
	}
	// ABORT markers: the source's two aborted transactions, the stop's
	// abort of the open one and B's local abort.
	if nb, nc := countMarkers(t, b.Addr, "chain", 0), countMarkers(t, c.Addr, "chain", 0); nb != 4 || nc != 4 {
		t.Fatalf("ABORT markers: %d on B, %d on C; want 4 each", nb, nc)
	}
	bp := describeProducers(t, b.Addr, "chain")
	sameProducers(t, "C after B's failover", describeProducers(t, c.Addr, "chain"), "B", bp)
	var ids []int64
	for _, p := range bp {
		ids = append(ids, p.ProducerID)
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	want := []int64{min(idemID, txID), max(idemID, txID)}
	if fmt.Sprint(ids) != fmt.Sprint(want) {
		t.Fatalf("B's producers after the failover: %v, want only the local ones %v", ids, want)
	}
}

func onPartition(rs []*kgo.Record, p int32) []*kgo.Record {
	for _, r := range rs {
		r.Partition = p
	}
	return rs
}

// runTxn produces each record set in one transaction of tx and commits or
// aborts it.
func runTxn(t *testing.T, tx *kgo.Client, commit bool, sets ...[]*kgo.Record) {
	t.Helper()
	if err := tx.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	for _, rs := range sets {
		produceSync(t, tx, rs...)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := tx.EndTransaction(ctx, kgo.TransactionEndTry(commit)); err != nil {
		t.Fatal(err)
	}
}

// expectIdentical fails unless verify reported partitions partitions, all
// identical with data.
func expectIdentical(t *testing.T, v verifyJSON, partitions int) {
	t.Helper()
	if !*v.Exact || len(v.Partitions) != partitions {
		t.Fatalf("verify: exact %v over %d partitions, want exact over %d: %+v", *v.Exact, len(v.Partitions), partitions, v)
	}
	for _, p := range v.Partitions {
		if p.Status != "identical" || p.FirstMismatch != nil || *p.Batches == 0 {
			t.Fatalf("verify %s/%d: status %s, %d batches", p.Topic, *p.Partition, p.Status, *p.Batches)
		}
	}
}

// endOffsets lists topic's partition end offsets on addr.
func endOffsets(t *testing.T, addr, topic string) map[int32]int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	lo, err := kadm.NewClient(cl).ListEndOffsets(ctx, topic)
	out := map[int32]int64{}
	if err != nil {
		return out
	}
	lo.Each(func(o kadm.ListedOffset) {
		if o.Err == nil {
			out[o.Partition] = o.Offset
		}
	})
	return out
}

// waitSameEnds waits until every partition of topic on dst has the
// source's end offset, as long as the following pusher runs.
func waitSameEnds(t *testing.T, follower *Proc, src, dst, topic string) {
	t.Helper()
	want := endOffsets(t, src, topic)
	for deadline := time.Now().Add(60 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if err := follower.Alive(); err != nil {
			t.Fatalf("the following pusher ended: %v\n%s", err, follower.LogTail(20))
		}
		if got := endOffsets(t, dst, topic); fmt.Sprint(got) == fmt.Sprint(want) {
			return
		}
	}
	t.Fatalf("%s: the follower did not reach the source ends %v within 60s (destination %v)\n%s", topic, want, endOffsets(t, dst, topic), follower.LogTail(20))
}

// topicConfigs returns the configs (name -> value) of topics on addr.
func topicConfigs(t *testing.T, addr string, topics ...string) map[string]map[string]string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cl := testkit.Client(t, addr)
	rcs, err := kadm.NewClient(cl).DescribeTopicConfigs(ctx, topics...)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]map[string]string{}
	for _, rc := range rcs {
		if rc.Err != nil {
			t.Fatalf("DescribeConfigs %s on %s: %v", rc.Name, addr, rc.Err)
		}
		m := map[string]string{}
		for _, c := range rc.Configs {
			if c.Value != nil {
				m[c.Key] = *c.Value
			}
		}
		out[rc.Name] = m
	}
	return out
}

// describeProducers returns DescribeProducers for partition 0 of topic,
// keyed by producer id, without the answering broker's id.
func describeProducers(t *testing.T, addr, topic string) map[int64]kadm.DescribedProducer {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cl := testkit.Client(t, addr)
	d, err := kadm.NewClient(cl).DescribeProducers(ctx, kadm.TopicsSet{topic: {0: {}}})
	if err != nil {
		t.Fatalf("DescribeProducers %s on %s: %v", topic, addr, err)
	}
	p, ok := d[topic].Partitions[0]
	if !ok || p.Err != nil {
		t.Fatalf("DescribeProducers %s/0 on %s: %+v", topic, addr, p)
	}
	out := map[int64]kadm.DescribedProducer{}
	for id, dp := range p.ActiveProducers {
		dp.Leader = 0
		out[id] = dp
	}
	return out
}

func sameProducers(t *testing.T, who string, got map[int64]kadm.DescribedProducer, than string, want map[int64]kadm.DescribedProducer) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d producers, %s has %d\n got %+v\nwant %+v", who, len(got), than, len(want), got, want)
	}
	for id, w := range want {
		if g, ok := got[id]; !ok || g != w {
			t.Fatalf("%s: producer %d is %+v, on %s %+v", who, id, g, than, w)
		}
	}
}

// controlBatches returns partition 0's control batches of type typ on addr.
func controlBatches(t *testing.T, addr, topic string, typ int16) [][]byte {
	t.Helper()
	var out [][]byte
	eachBatch(t, addr, topic, func(b []byte) {
		if got, ok := kbatch.ControlType(b); ok && got == typ {
			out = append(out, append([]byte(nil), b...))
		}
	})
	return out
}

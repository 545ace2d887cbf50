package interop

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestVerbatimClusterReassign moves a partition of a 4-broker Verbatim
// cluster with Kafka 4.4's kafka-reassign-partitions.sh while an
// idempotent acks=all producer writes to it: --generate proposes a plan,
// --execute --throttle starts the move (one replica to the broker that had
// none, the leader's replica away) and sets the replication throttles,
// --verify is repeated until the move is complete and then clears the
// throttles. Afterwards the partition is on the target brokers, the
// removed replica's directory is gone, every acknowledged record is read
// back exactly once in order, and no throttle is left on any broker or the
// topic.
func TestVerbatimClusterReassign(t *testing.T) {
	const topic = "moving"
	bin := BuildVerbatim(t)
	start := time.Now()
	c := StartVCluster(t, bin, 4, VClusterOptions{Props: []string{"replica.lag.time.max.ms=5000"}})
	bs := c.Bootstrap()
	cl := verbatimClient(t, bs)
	adm := kadm.NewClient(cl)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	createTopicRF(t, adm, topic, 1, 3, map[string]string{"min.insync.replicas": "2"})
	view := waitInSync(t, c, cl, topic, 1, 3)[0]
	t.Logf("4 brokers and the topic ready in %v: leader %d replicas %v", time.Since(start).Round(time.Millisecond), view.leader, view.replicas)

	// The target: the broker without a replica joins, the leader's
	// replica leaves.
	var target []int32
	for id := int32(1); id <= 4; id++ {
		if !slices.Contains(view.replicas, id) {
			target = append(target, id)
		}
	}
	for _, id := range view.replicas {
		if id != view.leader {
			target = append(target, id)
		}
	}

	// The producer under load.
	var (
		mu      sync.Mutex
		acked   []string
		prodErr error
		wg      sync.WaitGroup
	)
	stop := make(chan struct{})
	pcl := verbatimClient(t, bs, kgo.DefaultProduceTopic(topic), kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.RecordDeliveryTimeout(60*time.Second), kgo.ProducerLinger(0))
	wg.Add(1)
	go func() {
		defer wg.Done()
		for seq := 0; ; {
			select {
			case <-stop:
				return
			case <-time.After(20 * time.Millisecond):
			}
			recs := make([]*kgo.Record, 10)
			for i := range recs {
				recs[i] = &kgo.Record{Value: []byte(fmt.Sprintf("r-%06d", seq))}
				seq++
			}
			res := pcl.ProduceSync(ctx, recs...)
			mu.Lock()
			for _, r := range res {
				if r.Err != nil {
					prodErr = fmt.Errorf("record %q: %w", r.Record.Value, r.Err)
					break
				}
				acked = append(acked, string(r.Record.Value))
			}
			failed := prodErr != nil
			mu.Unlock()
			if failed {
				return
			}
		}
	}()
	stopProducer := func() {
		select {
		case <-stop:
		default:
			close(stop)
		}
		wg.Wait()
	}
	defer stopProducer()
	ackCount := func() int {
		mu.Lock()
		defer mu.Unlock()
		return len(acked)
	}
	for deadline := time.Now().Add(20 * time.Second); ackCount() < 100; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d records acknowledged before the move", ackCount())
		}
	}

	dir := t.TempDir()
	writeJSON := func(name string, v any) string {
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	moveFile := writeJSON("topics.json", map[string]any{"version": 1, "topics": []map[string]string{{"topic": topic}}})
	gen := JavaTool(t, "kafka-reassign-partitions", "--bootstrap-server", bs, "--generate",
		"--topics-to-move-json-file", moveFile, "--broker-list", "1,2,3,4")
	if !strings.Contains(gen.Stdout, "Current partition replica assignment") || !strings.Contains(gen.Stdout, "Proposed partition reassignment configuration") ||
		!strings.Contains(gen.Stdout, fmt.Sprintf(`"replicas":[%s]`, joinIDs(view.replicas))) {
		t.Fatalf("--generate:\n%s", gen.Stdout)
	}
	planFile := writeJSON("plan.json", map[string]any{"version": 1, "partitions": []map[string]any{{"topic": topic, "partition": 0, "replicas": target}}})

	moved := time.Now()
	exec := JavaTool(t, "kafka-reassign-partitions", "--bootstrap-server", bs, "--execute",
		"--reassignment-json-file", planFile, "--throttle", "50000000")
	if !strings.Contains(exec.Stdout, "Successfully started partition reassignment") {
		t.Fatalf("--execute:\n%s\n%s", exec.Stdout, exec.Stderr)
	}
	if !strings.Contains(exec.Stdout, "inter-broker throttle limit") {
		t.Errorf("--execute set no throttle:\n%s", exec.Stdout)
	}
	// The throttles are set: the rate on the brokers, the replicas on
	// the topic.
	if v := brokerConfig(t, ctx, cl, target[0], "follower.replication.throttled.rate"); v != "50000000" {
		t.Errorf("follower.replication.throttled.rate of broker %d after --execute: %q", target[0], v)
	}
	if v := topicConfig(t, ctx, adm, topic, "follower.replication.throttled.replicas"); v == "" {
		t.Errorf("no follower.replication.throttled.replicas on %s after --execute", topic)
	}

	var verify *Result
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(500 * time.Millisecond) {
		verify = JavaTool(t, "kafka-reassign-partitions", "--bootstrap-server", bs, "--verify", "--reassignment-json-file", planFile)
		if strings.Contains(verify.Stdout, "is completed") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("--verify never reported the move completed:\n%s\n%s", verify.Stdout, verify.Stderr)
		}
	}
	t.Logf("move completed (per --verify) in %v, %d records acknowledged so far", time.Since(moved).Round(time.Millisecond), ackCount())
	if !strings.Contains(verify.Stdout, "Clearing broker-level throttles") || !strings.Contains(verify.Stdout, "Clearing topic-level throttles") {
		t.Errorf("--verify did not clear the throttles:\n%s", verify.Stdout)
	}
	// More writes after the move, then stop.
	for n, deadline := ackCount(), time.Now().Add(20*time.Second); ackCount() < n+100; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d records acknowledged after the move", ackCount()-n)
		}
	}
	stopProducer()
	if prodErr != nil {
		t.Fatalf("producer: %v", prodErr)
	}

	final := waitInSync(t, c, cl, topic, 1, 3)[0]
	if got, want := slices.Sorted(slices.Values(final.replicas)), slices.Sorted(slices.Values(target)); !slices.Equal(got, want) || !slices.Contains(target, final.leader) {
		t.Fatalf("after the move: replicas %v leader %d, want the replicas of %v", final.replicas, final.leader, target)
	}
	if _, err := os.Stat(filepath.Join(c.Nodes[view.leader-1].Dir, "data", topic+"-0")); !os.IsNotExist(err) {
		t.Errorf("the removed replica's directory on broker %d: %v", view.leader, err)
	}
	for _, nd := range c.Nodes {
		for _, name := range []string{"leader.replication.throttled.rate", "follower.replication.throttled.rate"} {
			if v := brokerConfig(t, ctx, cl, nd.ID, name); v != "9223372036854775807" {
				t.Errorf("broker %d: %s %q after --verify", nd.ID, name, v)
			}
		}
	}
	for _, name := range []string{"leader.replication.throttled.replicas", "follower.replication.throttled.replicas"} {
		if v := topicConfig(t, ctx, adm, topic, name); v != "" {
			t.Errorf("topic %s: %s %q after --verify", topic, name, v)
		}
	}

	// Every acknowledged record once, in order (one idempotent producer:
	// record n at offset n).
	ccl := verbatimClient(t, bs, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {0: kgo.NewOffset().AtStart()}}))
	next := 0
	for next < len(acked) {
		fs := ccl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("read back %d of %d records", next, len(acked))
		}
		fs.EachError(func(tp string, p int32, err error) { t.Fatalf("consume %s/%d: %v", tp, p, err) })
		fs.EachRecord(func(r *kgo.Record) {
			if want := fmt.Sprintf("r-%06d", r.Offset); r.Offset != int64(next) || string(r.Value) != want || next >= len(acked) || acked[next] != want {
				t.Fatalf("offset %d holds %q; want offset %d, the acknowledged record %d", r.Offset, r.Value, next, next)
			}
			next++
		})
	}
	ends, err := adm.ListEndOffsets(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	if o, _ := ends.Lookup(topic, 0); o.Offset != int64(len(acked)) {
		t.Fatalf("log end %d after %d acknowledged records", o.Offset, len(acked))
	}
	t.Logf("%d acknowledged records read back in order; whole test %v", len(acked), time.Since(start).Round(time.Millisecond))
}

func joinIDs(ids []int32) string {
	s := make([]string, len(ids))
	for i, id := range ids {
		s[i] = fmt.Sprint(id)
	}
	return strings.Join(s, ",")
}

// brokerConfig is a broker's value of a config, asked of that broker.
func brokerConfig(t *testing.T, ctx context.Context, cl *kgo.Client, node int32, name string) string {
	t.Helper()
	req := kmsg.NewPtrDescribeConfigsRequest()
	rr := kmsg.NewDescribeConfigsRequestResource()
	rr.ResourceType, rr.ResourceName, rr.ConfigNames = kmsg.ConfigResourceTypeBroker, fmt.Sprint(node), []string{name}
	req.Resources = append(req.Resources, rr)
	resp, err := req.RequestWith(ctx, cl.Broker(int(node)))
	if err != nil {
		t.Fatalf("describe configs of broker %d: %v", node, err)
	}
	for _, r := range resp.Resources {
		for _, c := range r.Configs {
			if c.Name == name && c.Value != nil {
				return *c.Value
			}
		}
	}
	return ""
}

// topicConfig is a topic's override of a config ("" when none).
func topicConfig(t *testing.T, ctx context.Context, adm *kadm.Client, topic, name string) string {
	t.Helper()
	rcs, err := adm.DescribeTopicConfigs(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	for _, rc := range rcs {
		for _, c := range rc.Configs {
			if c.Key == name && c.Source == kmsg.ConfigSourceDynamicTopicConfig {
				return c.MaybeValue()
			}
		}
	}
	return ""
}

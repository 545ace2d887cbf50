package interop

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// failoverAck is one record a producer had acknowledged.
type failoverAck struct {
	offset int64
	value  string
	at     time.Time
}

// clusterFailover: two idempotent acks=all franz-go producers, one per
// partition of a topic with replication factor 3 and min.insync.replicas
// 2, write continuously while the leader of a partition is SIGKILLed (and
// restarted once the partition has a new leader and took more writes),
// three times. Afterwards every partition holds exactly what was
// acknowledged: record n of producer p at offset n (nothing lost, nothing
// duplicated, in order), and the leader epochs grew with the kills.
func clusterFailover(t *testing.T, c *VCluster, cl *kgo.Client) {
	const (
		topic          = "failover"
		kills          = 3
		maxPerProducer = 4000
		batch          = 20
	)
	createTopicRF(t, kadm.NewClient(cl), topic, 2, 3, map[string]string{"min.insync.replicas": "2"})
	initial := waitInSync(t, c, cl, topic, 2, 3)

	var (
		mu      sync.Mutex
		acked   [2][]failoverAck
		prodErr [2]error
		wg      sync.WaitGroup
	)
	stop := make(chan struct{})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for p := range 2 {
		pcl := verbatimClient(t, c.Bootstrap(), kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.ManualPartitioner()),
			kgo.RequiredAcks(kgo.AllISRAcks()), kgo.RecordDeliveryTimeout(90*time.Second), kgo.ProducerLinger(0))
		wg.Add(1)
		go func() {
			defer wg.Done()
			for seq := 0; seq < maxPerProducer; {
				select {
				case <-stop:
					return
				case <-time.After(40 * time.Millisecond):
				}
				recs := make([]*kgo.Record, batch)
				for i := range recs {
					recs[i] = &kgo.Record{Partition: int32(p), Value: []byte(fmt.Sprintf("p%d-%06d", p, seq))}
					seq++
				}
				res := pcl.ProduceSync(ctx, recs...)
				now := time.Now()
				mu.Lock()
				for _, r := range res {
					if r.Err != nil {
						prodErr[p] = fmt.Errorf("record %q: %w", r.Record.Value, r.Err)
						break
					}
					acked[p] = append(acked[p], failoverAck{r.Record.Offset, string(r.Record.Value), now})
				}
				failed := prodErr[p] != nil
				mu.Unlock()
				if failed {
					return
				}
			}
		}()
	}
	stopProducers := func() {
		select {
		case <-stop:
		default:
			close(stop)
		}
		wg.Wait()
	}
	defer stopProducers()
	// acksAfter counts partition p's acknowledgements after since and
	// returns the first one's time.
	acksAfter := func(p int, since time.Time) (int, time.Time, error) {
		mu.Lock()
		defer mu.Unlock()
		n, first := 0, time.Time{}
		for _, a := range acked[p] {
			if a.at.After(since) {
				if n == 0 {
					first = a.at
				}
				n++
			}
		}
		return n, first, prodErr[p]
	}

	killsOf := [2]int{}
	var failovers []time.Duration
	for k := range kills {
		p := k % 2
		view := waitInSync(t, c, cl, topic, 2, 3) // every replica back in sync: the kill leaves two
		leader := view[p].leader
		for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
			n, _, err := acksAfter(p, time.Time{})
			if err != nil || time.Now().After(deadline) {
				t.Fatalf("partition %d: %d acknowledged writes before kill %d (%v)", p, n, k+1, err)
			}
			if n >= 20 {
				break
			}
		}
		killed := time.Now()
		c.Kill(t, leader)
		killsOf[p]++
		deadline := time.Now().Add(45 * time.Second)
		for {
			n, first, err := acksAfter(p, killed)
			if err != nil {
				t.Fatalf("producer of partition %d failed after the kill of node %d: %v", p, leader, err)
			}
			if n >= 50 {
				failovers = append(failovers, first.Sub(killed))
				t.Logf("kill %d: node %d, leader of %s/%d at epoch %d: next acknowledged write after %v",
					k+1, leader, topic, p, view[p].epoch, first.Sub(killed).Round(time.Millisecond))
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("partition %d: %d writes acknowledged in 45 s after SIGKILL of its leader %d", p, n, leader)
			}
			time.Sleep(50 * time.Millisecond)
		}
		c.Restart(t, leader)
	}
	stopProducers()
	for p, err := range prodErr {
		if err != nil {
			t.Fatalf("producer of partition %d: %v", p, err)
		}
	}
	final := waitInSync(t, c, cl, topic, 2, 3)
	for p := range 2 {
		if final[p].epoch < initial[p].epoch+int32(killsOf[p]) {
			t.Errorf("partition %d: leader epoch %d -> %d after %d kills of its leader", p, initial[p].epoch, final[p].epoch, killsOf[p])
		}
	}

	// Read back: exactly the acknowledged records, in order.
	adm := kadm.NewClient(cl)
	rctx, rcancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer rcancel()
	ends, err := adm.ListEndOffsets(rctx, topic)
	if err != nil {
		t.Fatalf("list end offsets: %v", err)
	}
	total := 0
	for p := range 2 {
		o, _ := ends.Lookup(topic, int32(p))
		if o.Err != nil || o.Offset != int64(len(acked[p])) {
			t.Fatalf("partition %d: log end %d (%v) after %d acknowledged records of one idempotent producer (want equal: nothing lost, nothing duplicated)",
				p, o.Offset, o.Err, len(acked[p]))
		}
		for _, a := range acked[p] {
			if want := fmt.Sprintf("p%d-%06d", p, a.offset); a.value != want {
				t.Fatalf("partition %d: %q acknowledged at offset %d (want %q there)", p, a.value, a.offset, want)
			}
		}
		total += len(acked[p])
	}
	ccl := verbatimClient(t, c.Bootstrap(), kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{
		topic: {0: kgo.NewOffset().AtStart(), 1: kgo.NewOffset().AtStart()}}))
	next := [2]int64{}
	epochs := [2][]int32{}
	for int(next[0]+next[1]) < total {
		fs := ccl.PollFetches(rctx)
		if rctx.Err() != nil {
			t.Fatalf("read back %v of %d records", next, total)
		}
		fs.EachError(func(tp string, p int32, err error) { t.Fatalf("consume %s/%d: %v", tp, p, err) })
		fs.EachRecord(func(r *kgo.Record) {
			p := r.Partition
			if want := fmt.Sprintf("p%d-%06d", p, next[p]); r.Offset != next[p] || string(r.Value) != want {
				t.Fatalf("partition %d: offset %d holds %q; want offset %d holding %q", p, r.Offset, r.Value, next[p], want)
			}
			if e := epochs[p]; len(e) == 0 || e[len(e)-1] != r.LeaderEpoch {
				if len(e) > 0 && r.LeaderEpoch < e[len(e)-1] {
					t.Fatalf("partition %d: offset %d written at leader epoch %d after epoch %d", p, r.Offset, r.LeaderEpoch, e[len(e)-1])
				}
				epochs[p] = append(epochs[p], r.LeaderEpoch)
			}
			next[p]++
		})
	}
	for p := range 2 {
		if len(epochs[p]) < 1+killsOf[p] {
			t.Errorf("partition %d: records written at leader epochs %v, want %d or more epochs after %d leader kills", p, epochs[p], 1+killsOf[p], killsOf[p])
		}
	}
	sort.Slice(failovers, func(i, j int) bool { return failovers[i] < failovers[j] })
	t.Logf("%d leader kills, %d acknowledged records read back exactly once in order (%d + %d), leader epochs %v; failover to the next acknowledged write: %v",
		kills, total, next[0], next[1], epochs, failovers)
}

// clusterRejoin: a follower is SIGKILLed, the partition takes acks=all
// writes without it (min.insync.replicas 2), and once restarted it
// catches up, every broker shows it in the ISR again, and its log holds
// the leader's bytes.
func clusterRejoin(t *testing.T, c *VCluster, cl *kgo.Client) {
	const topic, n = "rejoin", 1000
	createTopicRF(t, kadm.NewClient(cl), topic, 1, 3, map[string]string{"min.insync.replicas": "2"})
	view := waitInSync(t, c, cl, topic, 1, 3)
	leader, follower := view[0].leader, int32(-1)
	for _, r := range view[0].replicas {
		if r != leader {
			follower = r
			break
		}
	}
	c.Kill(t, follower)
	pcl := verbatimClient(t, c.Bootstrap(), kgo.DefaultProduceTopic(topic), kgo.RequiredAcks(kgo.AllISRAcks()))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	recs := make([]*kgo.Record, n)
	for i := range recs {
		recs[i] = &kgo.Record{Key: []byte(fmt.Sprintf("k%d", i%17)), Value: []byte(fmt.Sprintf("rejoin %d", i))}
	}
	if err := pcl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatalf("acks=all produce with follower %d down: %v", follower, err)
	}
	// The acknowledgement needed the ISR without the follower; the leader's
	// Metadata shows it once its snapshot has the change.
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		v, _, err := brokerView(ctx, cl, leader, topic)
		if err == nil && len(v) == 1 && len(v[0].isr) == 2 && !slices.Contains(v[0].isr, follower) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("leader %d's view with follower %d down: %+v %v (want an ISR of the other 2)", leader, follower, v, err)
		}
	}
	start := time.Now()
	c.Restart(t, follower)
	waitInSync(t, c, cl, topic, 1, 3)
	t.Logf("node %d back in the ISR %v after its restart", follower, time.Since(start).Round(time.Millisecond))
	lead, foll := c.Node(t, leader), c.Node(t, follower)
	var a, b []byte
	for deadline := time.Now().Add(10 * time.Second); ; {
		a, b = partitionLogBytes(t, lead, topic+"-0"), partitionLogBytes(t, foll, topic+"-0")
		if len(a) > 0 && bytes.Equal(a, b) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("follower %d's log (%d bytes) differs from leader %d's (%d bytes) after rejoining the ISR", follower, len(b), leader, len(a))
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Logf("node %d's replica holds the leader's %d bytes", follower, len(a))
}

// clusterControlledShutdown: a broker leading partitions is stopped with
// SIGTERM (cluster.sh restart): before it exits, its leaderships move to
// other in-sync replicas (controlled.shutdown.enable's default): its log
// says so, and every partition it led changed leader (a higher epoch);
// started again, it is back in every ISR.
func clusterControlledShutdown(t *testing.T, c *VCluster, cl *kgo.Client) {
	const topic = "controlled"
	createTopicRF(t, kadm.NewClient(cl), topic, 3, 3, nil)
	before := waitInSync(t, c, cl, topic, 3, 3)
	node := before[0].leader
	nd := c.Node(t, node)
	logBefore, _ := os.ReadFile(nd.LogPath)
	c.Restart(t, node)
	logAfter, _ := os.ReadFile(nd.LogPath)
	if !bytes.Contains(logAfter[len(logBefore):], []byte(`msg="controlled shutdown: this broker leads no partition another replica could"`)) {
		t.Fatalf("node %d's log has no completed controlled shutdown:\n%s", node, tail(string(logAfter[len(logBefore):]), 30))
	}
	after := waitInSync(t, c, cl, topic, 3, 3)
	for p, v := range before {
		if v.leader == node && after[p].epoch <= v.epoch {
			t.Errorf("partition %d: led by %d at epoch %d before its controlled shutdown, by %d at epoch %d after", p, node, v.epoch, after[p].leader, after[p].epoch)
		}
	}
}

// partitionLogBytes is the concatenation of a replica's segment files.
func partitionLogBytes(t testing.TB, nd VNode, dir string) []byte {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(nd.Dir, "data", dir, "*.log"))
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(files)
	var out []byte
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatalf("node %d: %v", nd.ID, err)
		}
		out = append(out, b...)
	}
	return out
}

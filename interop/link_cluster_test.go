package interop

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/verbatim-kafka/verbatim/client"
)

// TestLinkIntoVerbatimCluster runs a cluster link from Apache Kafka 4.4
// into a 3-broker Verbatim cluster (replication factor 3,
// min.insync.replicas 2) while the source grows with idempotent and
// transactional batches (aborts among them) in two codecs: the link is
// created through one broker and is every broker's; its pull-mode topic
// gets replication factor 3; the destination leader of a mirrored
// partition is SIGKILLed mid-copy and the copy goes on on the new leader;
// afterwards the destination ends where the source does, `verify` is
// exact and every replica holds the same bytes. Then `mirror stop` runs
// while a preferred election moves a partition's leadership: it completes
// once (one MIRROR_PID_RESET barrier per partition at the source's log
// end, on every replica), the topic is writable, the link shows it
// STOPPED and copies nothing more.
func TestLinkIntoVerbatimCluster(t *testing.T) {
	bin := BuildVerbatim(t)
	k := StartKafka(t, KafkaOptions{})
	// The stop's leader change is a preferred election: the leaderships
	// the kill moved must stay where they went.
	c := startMirrorVCluster(t, bin, "default.replication.factor=3", "auto.leader.rebalance.enable=false")
	src, dst := k.Bootstrap(), c.Bootstrap()
	const topic, link, parts = "lc-orders", "lc", 3
	gen := startLinkSourceTopic(t, k, topic, parts, 5)

	// Created through node 1; status and the link's definition are read
	// through the others.
	n1, n2 := c.Nodes[0].Addr, c.Nodes[1].Addr
	created := time.Now()
	linkCLI(t, bin, "link", "create", link, "--dest", n1, "--source", src, "--topics", "lc-.*", "--sync-interval", "1s")
	dcl := verbatimClient(t, dst)
	view := waitInSync(t, c, dcl, topic, parts, 3)
	wantTopicConfig(t, dcl, topic, "mirror.mode", "pull")
	waitLinkStates(t, bin, n2, link, topic, parts, "MIRRORING")
	t.Logf("every partition MIRRORING %v after link create", time.Since(created).Round(time.Millisecond))

	// SIGKILL the leader of partition 0 while the source grows and the
	// copy runs there.
	victim := view[0].leader
	waitDestPast(t, dst, topic, 0, 1)
	gen.waitRounds(t, gen.rounds()+3)
	c.Kill(t, victim)
	killed := time.Now()
	t.Logf("killed node %d, the leader of %s/0 at epoch %d", victim, topic, view[0].epoch)
	survivor := c.Node(t, victim%3+1)
	after := newLeader(t, dcl, survivor.ID, topic, 0, victim)
	elected := time.Since(killed)
	gen.waitRounds(t, gen.rounds()+3)
	mid := sourceEnds(t, src, topic, parts)
	waitDestPast(t, dst, topic, 0, mid[0])
	t.Logf("%s/0: node %d leads it %v after the kill; the copy reached the source's %d there %v after the kill",
		topic, after, elected.Round(time.Millisecond), mid[0], time.Since(killed).Round(time.Millisecond))
	c.Restart(t, victim)
	gen.stop(t)
	ends := settledSourceEnds(t, src, topic, parts)
	for p := range int32(parts) {
		waitDestExactly(t, dst, topic, p, ends[p])
	}
	t.Logf("source and destination end at %v after %d rounds of writes (%d transactions aborted), %v after the kill", ends, gen.rounds(), gen.aborted(), time.Since(killed).Round(time.Millisecond))
	verifyExact(t, bin, src, dst, []string{topic})
	view = waitInSync(t, c, dcl, topic, parts, 3)
	for p := range int32(parts) {
		waitReplicasEqual(t, c, topic, p)
	}
	waitLinkStates(t, bin, c.Node(t, victim).Addr, link, topic, parts, "MIRRORING")
	for _, nd := range c.Nodes {
		wantLinkOn(t, bin, nd, link, topic)
	}

	// mirror stop while partition 0's leadership moves back to its
	// preferred replica (the restarted node): the stop is decided (the
	// DELETE of mirror.mode through the third broker) and the election
	// sent 5 ms later, so the leader change lands while the leaders
	// carry the stop out. `mirror stop` then finds the decision taken
	// and reports it.
	if view[0].replicas[0] != victim || view[0].leader == victim {
		t.Fatalf("%s/0: leader %d, replicas %v: want the restarted node %d preferred and not leading", topic, view[0].leader, view[0].replicas, victim)
	}
	var third VNode
	for _, nd := range c.Nodes {
		if nd.ID != victim && nd.ID != view[0].leader {
			third = nd
		}
	}
	stopped := time.Now()
	decided := make(chan error, 1)
	go func() { decided <- deleteMirrorModeVia(third.Addr, topic) }()
	time.Sleep(5 * time.Millisecond)
	electPreferred(t, dcl, topic, 0)
	t.Logf("preferred election of %s/0 (node %d to %d) during the stop: the DELETE through node %d was answered %v",
		topic, view[0].leader, victim, third.ID, <-decided)
	res := stopUntilDone(t, bin, dst, topic)
	t.Logf("mirror stop, %v after the decision:\n%s", time.Since(stopped).Round(time.Millisecond), res.Stdout)
	waitInSync(t, c, dcl, topic, parts, 3)
	wantStopBarriers(t, c, topic, ends)
	for _, nd := range c.Nodes { // each broker as the one asked
		waitLinkStates(t, bin, nd.Addr, link, topic, parts, "STOPPED")
	}
	t.Logf("barriers on every replica and STOPPED through every broker %v after the decision", time.Since(stopped).Round(time.Millisecond))
	if n := strings.Count(allLogs(c), "mirror stopped: the topic is writable"); n != 1 {
		t.Errorf("the brokers logged the topic's stop %d times, want once", n)
	}

	// Writable, and the link copies nothing more: the source grows, the
	// destination holds its barrier and the local record only.
	wcl := verbatimClient(t, dst, kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.RequiredAcks(kgo.AllISRAcks()))
	produceSync(t, wcl, &kgo.Record{Partition: 0, Value: []byte("after the stop")})
	scl := k.Client(t, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	for p := range int32(parts) {
		rs := keyed(topic, 5, "after-stop")
		for _, r := range rs {
			r.Partition = p
		}
		produceSync(t, scl, rs...)
	}
	time.Sleep(2500 * time.Millisecond) // more than two sync intervals of the link
	for p := range int32(parts) {
		want := ends[p] + 1 // the barrier
		if p == 0 {
			want++ // the local record
		}
		if got := clusterEnd(dst, topic, p); got != want {
			t.Errorf("%s/%d: the destination ends at %d after the stop, want %d (the source's %d, the barrier%s)", topic, p, got, want, ends[p], map[bool]string{true: ", the local record"}[p == 0])
		}
	}
}

// startLinkSourceTopic creates topic on k with parts partitions and
// returns its writers once they have written rounds rounds.
func startLinkSourceTopic(t *testing.T, k *Kafka, topic string, parts int32, rounds int) *linkSourceWriters {
	t.Helper()
	k.CreateTopic(t, topic, parts, 1, nil)
	gen := startLinkSourceWriters(t, k, topic, parts)
	gen.waitRounds(t, rounds)
	return gen
}

// linkSourceWriters writes to every partition of a source topic in
// rounds until stopped (at most 400 rounds): per round an idempotent lz4
// batch and an idempotent zstd batch per partition, and a transaction
// over all partitions (gzip), every third one aborted.
type linkSourceWriters struct {
	mu       sync.Mutex
	n, abort int
	err      error
	done     chan struct{}
	quit     chan struct{}
}

func startLinkSourceWriters(t *testing.T, k *Kafka, topic string, parts int32) *linkSourceWriters {
	t.Helper()
	manual := kgo.RecordPartitioner(kgo.ManualPartitioner())
	lz4 := k.Client(t, manual, kgo.ProducerBatchCompression(kgo.Lz4Compression()), kgo.ProducerLinger(0))
	zstd := k.Client(t, manual, kgo.ProducerBatchCompression(kgo.ZstdCompression()), kgo.ProducerLinger(0))
	tx := k.Client(t, manual, kgo.ProducerBatchCompression(kgo.GzipCompression()), kgo.TransactionalID("lc-writer"))
	w := &linkSourceWriters{done: make(chan struct{}), quit: make(chan struct{})}
	batch := func(tag string) []*kgo.Record {
		var rs []*kgo.Record
		for p := range parts {
			for _, r := range keyed(topic, 4, fmt.Sprintf("%s-p%d", tag, p)) {
				r.Partition = p
				rs = append(rs, r)
			}
		}
		return rs
	}
	round := func(i int) error {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		for _, cl := range []*kgo.Client{lz4, zstd} {
			if err := cl.ProduceSync(ctx, batch(fmt.Sprintf("idem-%d", i))...).FirstErr(); err != nil {
				return fmt.Errorf("round %d: idempotent produce: %w", i, err)
			}
		}
		if err := tx.BeginTransaction(); err != nil {
			return err
		}
		if err := tx.ProduceSync(ctx, batch(fmt.Sprintf("txn-%d", i))...).FirstErr(); err != nil {
			return fmt.Errorf("round %d: transactional produce: %w", i, err)
		}
		commit := i%3 != 2
		if err := tx.EndTransaction(ctx, kgo.TransactionEndTry(commit)); err != nil {
			return fmt.Errorf("round %d: end transaction: %w", i, err)
		}
		w.mu.Lock()
		w.n++
		if !commit {
			w.abort++
		}
		w.mu.Unlock()
		return nil
	}
	go func() {
		defer close(w.done)
		for i := 0; i < 400; i++ {
			select {
			case <-w.quit:
				return
			case <-time.After(50 * time.Millisecond):
			}
			if err := round(i); err != nil {
				w.mu.Lock()
				w.err = err
				w.mu.Unlock()
				return
			}
		}
	}()
	t.Cleanup(func() {
		select {
		case <-w.quit:
		default:
			close(w.quit)
		}
		<-w.done
	})
	return w
}

func (w *linkSourceWriters) rounds() int { w.mu.Lock(); defer w.mu.Unlock(); return w.n }

func (w *linkSourceWriters) aborted() int { w.mu.Lock(); defer w.mu.Unlock(); return w.abort }

// waitRounds waits until n rounds were written (bounded).
func (w *linkSourceWriters) waitRounds(t *testing.T, n int) {
	t.Helper()
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		w.mu.Lock()
		got, err := w.n, w.err
		w.mu.Unlock()
		select {
		case <-w.done:
			if err == nil && got < n {
				err = errors.New("the writers ended")
			}
		default:
		}
		switch {
		case err != nil:
			t.Fatalf("source writers after %d rounds: %v", got, err)
		case got >= n:
			return
		case time.Now().After(deadline):
			t.Fatalf("source writers: %d rounds after 60 s, want %d", got, n)
		}
	}
}

// stop ends the writers after their current round.
func (w *linkSourceWriters) stop(t *testing.T) {
	t.Helper()
	close(w.quit)
	<-w.done
	if w.err != nil {
		t.Fatalf("source writers: %v", w.err)
	}
}

// settledSourceEnds are the source's log ends once its last stable
// offsets reached them (every transaction's marker written: the source's
// markers are written after EndTxn is answered).
func settledSourceEnds(t *testing.T, addr, topic string, n int32) []int64 {
	t.Helper()
	out := make([]int64, n)
	for p := range n {
		for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
			end, lso := clusterEnd(addr, topic, p), clusterOffset(addr, topic, p, client.ReadCommitted)
			if end >= 0 && lso == end {
				out[p] = end
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("source %s/%d: last stable offset %d, log end %d after 30 s", topic, p, lso, end)
			}
		}
	}
	return out
}

// waitDestPast waits until the destination's log end of topic/p (on its
// leader) reaches end.
func waitDestPast(t *testing.T, dst, topic string, p int32, end int64) {
	t.Helper()
	last := int64(-1)
	for deadline := time.Now().Add(60 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if last = clusterEnd(dst, topic, p); last >= end {
			return
		}
	}
	t.Fatalf("%s/%d: the destination ends at %d after 60 s, want %d", topic, p, last, end)
}

// waitDestExactly waits until the destination's log end of topic/p is
// the source's end, and fails at once when it is past it.
func waitDestExactly(t *testing.T, dst, topic string, p int32, end int64) {
	t.Helper()
	waitDestPast(t, dst, topic, p, end)
	if got := clusterEnd(dst, topic, p); got != end {
		t.Fatalf("%s/%d: the destination ends at %d, the source at %d", topic, p, got, end)
	}
}

// newLeader waits until node's Metadata names a live leader of topic/p
// other than old and returns it.
func newLeader(t *testing.T, cl *kgo.Client, node int32, topic string, p int32, old int32) int32 {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		v, _, err := brokerView(ctx, cl, node, topic)
		cancel()
		if err == nil && int(p) < len(v) && v[p].leader >= 0 && v[p].leader != old {
			return v[p].leader
		}
	}
	t.Fatalf("%s/%d: node %d names no leader but %d after 30 s", topic, p, node, old)
	return -1
}

// waitReplicasEqual waits until every node's replica of topic/p holds the
// same segment bytes (the followers catch up).
func waitReplicasEqual(t *testing.T, c *VCluster, topic string, p int32) {
	t.Helper()
	dir := fmt.Sprintf("%s-%d", topic, p)
	var differ int32
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		want := partitionLogBytes(t, c.Nodes[0], dir)
		differ = 0
		for _, nd := range c.Nodes[1:] {
			if string(partitionLogBytes(t, nd, dir)) != string(want) {
				differ = nd.ID
			}
		}
		if differ == 0 && len(want) > 0 {
			return
		}
	}
	t.Fatalf("%s/%d: node %d's log differs from node 1's after 30 s", topic, p, differ)
}

// waitLinkStates waits until `mirror status --link` through addr lists
// parts partitions of topic, all in state.
func waitLinkStates(t *testing.T, bin, addr, link, topic string, parts int, state string) {
	t.Helper()
	var last mirrorStatusJSON
	for deadline := time.Now().Add(60 * time.Second); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		last = mirrorStatus(t, bin, addr, "--link", link)
		n := 0
		for _, p := range last.Partitions {
			if p.Topic != topic {
				continue
			}
			if p.State == "FAILED" {
				t.Fatalf("%s/%d FAILED: %s", p.Topic, *p.Partition, p.Reason)
			}
			if p.State == state && p.Link == link {
				n++
			}
		}
		if n == parts {
			return
		}
	}
	var rows []string
	for _, p := range last.Partitions {
		rows = append(rows, fmt.Sprintf("%s/%d %s (%s) end %d source %d", p.Topic, *p.Partition, p.State, p.Reason, *p.LogEndOffset, *p.SourceHighWatermark))
	}
	t.Fatalf("mirror status through %s: not %d partitions of %s %s within 60 s: %s", addr, parts, topic, state, strings.Join(rows, "; "))
}

// wantLinkOn checks that node's own answer (link list and link describe
// through it alone) holds the link with topic among its mirror topics.
func wantLinkOn(t *testing.T, bin string, nd VNode, link, topic string) {
	t.Helper()
	var ls []struct {
		Name   string `json:"name"`
		Source string `json:"source"`
	}
	out := linkCLI(t, bin, "link", "list", "--dest", nd.Addr, "--json").Stdout
	if err := json.Unmarshal([]byte(out), &ls); err != nil {
		t.Fatalf("link list --json through node %d: %v\n%s", nd.ID, err, out)
	}
	if len(ls) != 1 || ls[0].Name != link {
		t.Fatalf("link list through node %d: %s, want the link %s only", nd.ID, out, link)
	}
	var d struct {
		Name         string `json:"name"`
		MirrorTopics []struct {
			Topic string `json:"topic"`
			State string `json:"state"`
		} `json:"mirror_topics"`
	}
	out = linkCLI(t, bin, "link", "describe", link, "--dest", nd.Addr, "--json").Stdout
	if err := json.Unmarshal([]byte(out), &d); err != nil {
		t.Fatalf("link describe --json through node %d: %v\n%s", nd.ID, err, out)
	}
	for _, mt := range d.MirrorTopics {
		if mt.Topic == topic {
			return
		}
	}
	t.Fatalf("link describe through node %d lists no mirror topic %s:\n%s", nd.ID, topic, out)
}

// wantTopicConfig checks one of topic's configs on the destination.
func wantTopicConfig(t *testing.T, cl *kgo.Client, topic, name, want string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	rcs, err := kadm.NewClient(cl).DescribeTopicConfigs(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	rc, err := rcs.On(topic, nil)
	if err == nil {
		err = rc.Err
	}
	if err != nil {
		t.Fatalf("describe %s's configs: %v", topic, err)
	}
	for _, c := range rc.Configs {
		if c.Key == name {
			if got := c.MaybeValue(); got != want {
				t.Fatalf("%s: %s=%s, want %s", topic, name, got, want)
			}
			return
		}
	}
	t.Fatalf("%s: no config %s", topic, name)
}

// deleteMirrorModeVia sends the stop's decision (the DELETE of
// mirror.mode) to the broker at addr alone.
func deleteMirrorModeVia(addr, topic string) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		return err
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	rs, err := kadm.NewClient(cl).AlterTopicConfigs(ctx, []kadm.AlterConfig{{Op: kadm.DeleteConfig, Name: "mirror.mode"}}, topic)
	if err == nil {
		err = rs[0].Err
	}
	return err
}

// electPreferred runs a preferred leader election of topic/p (what
// kafka-leader-election --election-type PREFERRED sends).
func electPreferred(t *testing.T, cl *kgo.Client, topic string, p int32) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := kadm.NewClient(cl).ElectLeaders(ctx, kadm.ElectPreferredReplica, kadm.TopicsSet{topic: {p: {}}})
	if err != nil {
		t.Fatalf("elect %s/%d: %v", topic, p, err)
	}
	for _, ps := range res {
		for _, r := range ps {
			if r.Err != nil {
				t.Fatalf("elect %s/%d: %v", r.Topic, r.Partition, r.Err)
			}
		}
	}
}

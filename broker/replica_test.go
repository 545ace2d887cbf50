package broker

import (
	"bytes"
	"crypto/tls"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/verbatim-kafka/verbatim/client"
	"github.com/verbatim-kafka/verbatim/clustermeta"
)

// produceAsync sends one produce of values to node with acks and timeout
// and delivers its partition answer (or the transport error).
type produceResult struct {
	pr  kmsg.ProduceResponseTopicPartition
	err error
}

func (c *replCluster) produceAsync(node int32, topic string, acks int16, timeoutMs int32, values ...string) <-chan produceResult {
	c.t.Helper()
	var vs [][]byte
	for _, v := range values {
		vs = append(vs, []byte(v))
	}
	req := produceRequest(9, topic, 0, encodeBatch(c.t, 0, -1, -1, vs...))
	req.Acks, req.TimeoutMillis = acks, timeoutMs
	return c.sendProduce(node, req)
}

// sendProduce sends req to node and delivers its first partition answer
// (or the transport error).
func (c *replCluster) sendProduce(node int32, req *kmsg.ProduceRequest) <-chan produceResult {
	addr := c.nodes[node].b.addr
	out := make(chan produceResult, 1)
	go func() {
		resp, err := rawRoundTrip(addr, req)
		if err != nil {
			out <- produceResult{err: err}
			return
		}
		out <- produceResult{pr: resp.(*kmsg.ProduceResponse).Topics[0].Partitions[0]}
	}()
	return out
}

func (c *replCluster) produce(node int32, topic string, acks int16, values ...string) kmsg.ProduceResponseTopicPartition {
	c.t.Helper()
	return awaitProduce(c.t, c.produceAsync(node, topic, acks, 10000, values...))
}

func awaitProduce(t *testing.T, ch <-chan produceResult) kmsg.ProduceResponseTopicPartition {
	t.Helper()
	select {
	case r := <-ch:
		if r.err != nil {
			t.Fatal(r.err)
		}
		return r.pr
	case <-time.After(20 * time.Second):
		t.Fatal("produce not answered")
	}
	return kmsg.ProduceResponseTopicPartition{}
}

// notAnswered asserts that a produce has no answer yet; it is called only
// where nothing could have completed it (no follower fetched).
func notAnswered(t *testing.T, ch <-chan produceResult, why string) {
	t.Helper()
	select {
	case r := <-ch:
		t.Fatalf("produce answered %+v (err %v) %s", r.pr, r.err, why)
	default:
	}
}

func (c *replCluster) waitLEO(node int32, topic string, leo int64) {
	c.t.Helper()
	waitUntil(c.t, "the leader's log end", func() bool { return c.handle(node, topic).log.LogEndOffset() >= leo })
}

func (c *replCluster) latest(node int32, topic string) int64 {
	c.t.Helper()
	return listOffsetT(c.t, c.nodes[node].b, topic, 0, tsLatest)
}

// consumerFetch is a consumer's fetch of partition 0 from offset.
func (c *replCluster) consumerFetch(node int32, topic string, offset int64) kmsg.FetchResponseTopicPartition {
	c.t.Helper()
	resp := rawRequest[*kmsg.FetchResponse](c.t, c.nodes[node].b, fetchReq(12, topic, 0, offset))
	return resp.Topics[0].Partitions[0]
}

// markShuttingDown sets node's registration's ShuttingDown and waits
// until every broker saw it.
func (c *replCluster) markShuttingDown(node int32, down bool) {
	c.t.Helper()
	sess := c.nodes[node].srv().clusterSession()
	info := sess.Info
	info.ShuttingDown = down
	if err := sess.Update(ctxT(c.t), info); err != nil {
		c.t.Fatal(err)
	}
	for _, n := range c.nodes {
		waitUntil(c.t, "the registration's update applied", func() bool {
			snap := n.srv().clusterSnapshot()
			return snap != nil && snap.Brokers[node].ShuttingDown == down
		})
	}
}

func TestReplicationAcksAllCompletesAtTheHighWatermark(t *testing.T) {
	c := newReplCluster(t, 3, nil)
	c.createTopic("acks", []int32{1, 2, 3}, nil)
	done := c.produceAsync(1, "acks", -1, 30000, "a", "b")
	c.waitLEO(1, "acks", 2)
	// Appended on the leader only: nothing is visible to consumers and
	// the produce waits.
	if got := c.latest(1, "acks"); got != 0 {
		t.Fatalf("latest offset before replication %d, want 0", got)
	}
	if fr := c.consumerFetch(1, "acks", 0); fr.ErrorCode != 0 || fr.HighWatermark != 0 || len(fr.RecordBatches) != 0 {
		t.Fatalf("consumer fetch before replication: code %d hw %d %d bytes", fr.ErrorCode, fr.HighWatermark, len(fr.RecordBatches))
	}
	notAnswered(t, done, "before any follower fetched")
	// A replica asking for the latest offset gets the log end (Kafka's
	// answer to its fetcher).
	lreq := kmsg.NewPtrListOffsetsRequest()
	lreq.Version, lreq.ReplicaID = 9, 2
	lt := kmsg.NewListOffsetsRequestTopic()
	lt.Topic = "acks"
	lp := kmsg.NewListOffsetsRequestTopicPartition()
	lp.Partition, lp.Timestamp, lp.CurrentLeaderEpoch = 0, tsLatest, -1
	lt.Partitions = append(lt.Partitions, lp)
	lreq.Topics = append(lreq.Topics, lt)
	if r := rawRequest[*kmsg.ListOffsetsResponse](t, c.nodes[1].b, lreq).Topics[0].Partitions[0]; r.ErrorCode != 0 || r.Offset != 2 {
		t.Fatalf("replica's latest offset: code %d offset %d, want the log end 2", r.ErrorCode, r.Offset)
	}
	// First round: the followers get the batch; their log ends reach the
	// leader with the next fetch.
	c.replicate(1)
	if got := c.latest(1, "acks"); got != 0 {
		t.Fatalf("latest offset after the followers' first fetch %d, want 0", got)
	}
	notAnswered(t, done, "before the followers reported their log end")
	c.replicate(1)
	if pr := awaitProduce(t, done); pr.ErrorCode != 0 || pr.BaseOffset != 0 {
		t.Fatalf("acks=all produce: code %d base %d", pr.ErrorCode, pr.BaseOffset)
	}
	if got := c.latest(1, "acks"); got != 2 {
		t.Fatalf("latest offset after replication %d, want 2", got)
	}
	if fr := c.consumerFetch(1, "acks", 0); fr.ErrorCode != 0 || fr.HighWatermark != 2 || len(fr.RecordBatches) == 0 {
		t.Fatalf("consumer fetch after replication: code %d hw %d %d bytes", fr.ErrorCode, fr.HighWatermark, len(fr.RecordBatches))
	}
	c.replicate(1) // the followers learn the high watermark
	want := c.logBytes(1, "acks")
	for _, id := range []int32{2, 3} {
		if got := c.logBytes(id, "acks"); !bytes.Equal(got, want) {
			t.Fatalf("follower %d's log differs from the leader's (%d vs %d bytes)", id, len(got), len(want))
		}
		if hw := highWatermark(c.handle(id, "acks")); hw != 2 {
			t.Fatalf("follower %d high watermark %d, want 2", id, hw)
		}
	}
	// acks=1 is answered at once, acks=0 unchanged.
	if pr := c.produce(1, "acks", 1, "c"); pr.ErrorCode != 0 || pr.BaseOffset != 2 {
		t.Fatalf("acks=1 produce: code %d base %d", pr.ErrorCode, pr.BaseOffset)
	}
}

func TestReplicationMinInsyncReplicas(t *testing.T) {
	c := newReplCluster(t, 3, nil)
	c.createTopic("minisr", []int32{1, 2, 3}, map[string]string{"min.insync.replicas": "2"})
	c.setISR("minisr", []int32{1})
	if pr := c.produce(1, "minisr", -1, "x"); pr.ErrorCode != kerr.NotEnoughReplicas.Code {
		t.Fatalf("acks=all with ISR 1 < min 2: code %d, want NOT_ENOUGH_REPLICAS", pr.ErrorCode)
	}
	if leo := c.handle(1, "minisr").log.LogEndOffset(); leo != 0 {
		t.Fatalf("refused produce appended: log end %d", leo)
	}
	if pr := c.produce(1, "minisr", 1, "y"); pr.ErrorCode != 0 {
		t.Fatalf("acks=1 with a small ISR: code %d", pr.ErrorCode)
	}
	// The broker default applies without a topic override.
	d := newReplCluster(t, 2, func(cc *ClusterConfig) { cc.MinInsyncReplicas = 2 })
	d.createTopic("dflt", []int32{1, 2}, nil)
	d.setISR("dflt", []int32{1})
	if pr := d.produce(1, "dflt", -1, "x"); pr.ErrorCode != kerr.NotEnoughReplicas.Code {
		t.Fatalf("broker default min.insync.replicas: code %d", pr.ErrorCode)
	}
}

func TestReplicationAfterAppendErrors(t *testing.T) {
	c := newReplCluster(t, 3, nil)
	c.createTopic("after", []int32{1, 2, 3}, map[string]string{"min.insync.replicas": "2"})
	// The request's timeout: REQUEST_TIMED_OUT, the records stay.
	if pr := awaitProduce(t, c.produceAsync(1, "after", -1, 100, "t")); pr.ErrorCode != kerr.RequestTimedOut.Code {
		t.Fatalf("unreplicated acks=all past its timeout: code %d, want REQUEST_TIMED_OUT", pr.ErrorCode)
	}
	// The ISR shrinks below the minimum while the produce waits.
	done := c.produceAsync(1, "after", -1, 30000, "u")
	c.waitLEO(1, "after", 2)
	c.nodes[2].fetcher.stopped.Store(true)
	c.nodes[3].fetcher.stopped.Store(true)
	c.advance(replicaLagForTests + time.Minute)
	c.nodes[1].srv().checkISRLag()
	if isr := c.state("after").ISR; !slices.Equal(isr, []int32{1}) {
		t.Fatalf("ISR after both followers lagged: %v", isr)
	}
	if pr := awaitProduce(t, done); pr.ErrorCode != kerr.NotEnoughReplicasAfterAppend.Code {
		t.Fatalf("acks=all whose ISR shrank below min: code %d, want NOT_ENOUGH_REPLICAS_AFTER_APPEND", pr.ErrorCode)
	}
	// The leadership moves while a produce waits: NOT_LEADER_OR_FOLLOWER.
	c.setISR("after", []int32{1, 2, 3})
	done = c.produceAsync(1, "after", -1, 30000, "v")
	c.waitLEO(1, "after", 3)
	c.elect("after", 2, []int32{2, 3})
	if pr := awaitProduce(t, done); pr.ErrorCode != kerr.NotLeaderForPartition.Code {
		t.Fatalf("acks=all whose leader resigned: code %d, want NOT_LEADER_OR_FOLLOWER", pr.ErrorCode)
	}
}

func TestReplicationISRShrinkAndExpand(t *testing.T) {
	c := newReplCluster(t, 3, nil)
	c.createTopic("isr", []int32{1, 2, 3}, nil)
	c.nodes[3].fetcher.stopped.Store(true)
	if pr := c.produce(1, "isr", 1, "a"); pr.ErrorCode != 0 {
		t.Fatal(pr.ErrorCode)
	}
	c.replicate(2)
	if got := c.latest(1, "isr"); got != 0 {
		t.Fatalf("high watermark %d while an ISR member has nothing, want 0", got)
	}
	// Within replica.lag.time.max.ms nothing changes.
	c.advance(replicaLagForTests / 2)
	c.nodes[1].srv().checkISRLag()
	if isr := c.state("isr").ISR; len(isr) != 3 {
		t.Fatalf("ISR shrank within the lag time: %v", isr)
	}
	c.advance(replicaLagForTests)
	c.nodes[1].srv().checkISRLag()
	st := c.state("isr")
	if !slices.Equal(st.ISR, []int32{1, 2}) || st.PartitionEpoch != 1 {
		t.Fatalf("after follower 3 lagged: ISR %v partition epoch %d, want [1 2] 1", st.ISR, st.PartitionEpoch)
	}
	if got := c.latest(1, "isr"); got != 1 {
		t.Fatalf("high watermark after the shrink %d, want 1", got)
	}
	hs := httptest.NewServer(c.nodes[1].srv().MetricsHandler())
	defer hs.Close()
	gauges := func() (under, underMin float64) {
		mfs := scrape(t, hs.URL)
		return series(mfs, "kafka_server_replicamanager_underreplicatedpartitions", nil).GetGauge().GetValue(),
			series(mfs, "kafka_server_replicamanager_underminisrpartitioncount", nil).GetGauge().GetValue()
	}
	if under, underMin := gauges(); under != 1 || underMin != 0 {
		t.Fatalf("after the shrink: under-replicated %v, under min ISR %v; want 1 and 0", under, underMin)
	}
	// A follower shutting down (controlled shutdown) catches up but does
	// not rejoin (KIP-841): no change was even proposed.
	c.markShuttingDown(3, true)
	c.nodes[3].fetcher.stopped.Store(false)
	c.replicate(2)
	ls := c.nodes[1].srv().cluster.topic("isr").Partition(0).repl.Load().lead
	ls.mu.Lock()
	isr, pending := slices.Clone(ls.st.ISR), ls.pending
	ls.mu.Unlock()
	if !slices.Equal(isr, []int32{1, 2}) || pending != nil {
		t.Fatalf("a shutting-down follower caught up: ISR %v, change in flight %v", isr, pending)
	}
	// Once it is not shutting down, its next fetch at the high watermark
	// brings it back.
	c.markShuttingDown(3, false)
	c.replicate(1)
	waitUntil(t, "follower 3 back in the ISR", func() bool {
		return slices.Equal(c.state("isr").ISR, []int32{1, 2, 3})
	})
	if isr := c.nodes[1].srv().cluster.topic("isr").Partition(0).repl.Load().lead.isr(); !slices.Equal(isr, []int32{1, 2, 3}) {
		t.Fatalf("leader's ISR %v after the expansion", isr)
	}
	if under, _ := gauges(); under != 0 {
		t.Fatalf("after the expansion: under-replicated %v", under)
	}
	// A leader whose session is gone (a fence that no longer holds)
	// changes nothing.
	c.nodes[1].srv().repl.fence.Store(&clustermeta.Fence{Key: "/verbatim/brokers/gone", CreateRev: 1})
	c.nodes[2].fetcher.stopped.Store(true)
	c.produce(1, "isr", 1, "b")
	c.advance(2 * replicaLagForTests)
	c.nodes[1].srv().checkISRLag()
	if isr := c.state("isr").ISR; len(isr) != 3 {
		t.Fatalf("a fenced leader changed the ISR: %v", isr)
	}
	if isr := c.nodes[1].srv().cluster.topic("isr").Partition(0).repl.Load().lead.isr(); len(isr) != 3 {
		t.Fatalf("the leader adopted an ISR the store refused: %v", isr)
	}
}

func TestReplicationNotLeaderOrFollower(t *testing.T) {
	c := newReplCluster(t, 3, nil)
	c.createTopic("nl", []int32{1, 2}, nil) // broker 3 knows the topic but hosts no replica
	for _, id := range []int32{2, 3} {
		b := c.nodes[id].b
		if pr := c.produce(id, "nl", 1, "x"); pr.ErrorCode != kerr.NotLeaderForPartition.Code {
			t.Fatalf("produce to broker %d: code %d", id, pr.ErrorCode)
		}
		if fr := c.consumerFetch(id, "nl", 0); fr.ErrorCode != kerr.NotLeaderForPartition.Code {
			t.Fatalf("consumer fetch from broker %d: code %d", id, fr.ErrorCode)
		}
		if lo := listOffsetsPart(t, b, 9, "nl", 0, tsLatest, 0); lo.ErrorCode != kerr.NotLeaderForPartition.Code {
			t.Fatalf("list offsets on broker %d: code %d", id, lo.ErrorCode)
		}
		oreq := kmsg.NewPtrOffsetForLeaderEpochRequest()
		oreq.Version, oreq.ReplicaID = 4, -1
		ot := kmsg.NewOffsetForLeaderEpochRequestTopic()
		ot.Topic = "nl"
		op := kmsg.NewOffsetForLeaderEpochRequestTopicPartition()
		op.Partition, op.CurrentLeaderEpoch, op.LeaderEpoch = 0, -1, 0
		ot.Partitions = append(ot.Partitions, op)
		oreq.Topics = append(oreq.Topics, ot)
		if r := rawRequest[*kmsg.OffsetForLeaderEpochResponse](t, b, oreq); r.Topics[0].Partitions[0].ErrorCode != kerr.NotLeaderForPartition.Code {
			t.Fatalf("offset for leader epoch on broker %d: code %d", id, r.Topics[0].Partitions[0].ErrorCode)
		}
		dreq := timedDelete("nl", 0, 5000)
		if r := rawRequest[*kmsg.DeleteRecordsResponse](t, b, dreq); r.Topics[0].Partitions[0].ErrorCode != kerr.NotLeaderForPartition.Code {
			t.Fatalf("delete records on broker %d: code %d", id, r.Topics[0].Partitions[0].ErrorCode)
		}
	}
	// A broker that is not a replica cannot fetch as one.
	for _, tc := range []struct {
		what    string
		replica int32
		epoch   int64
		want    int16
	}{
		{"a non-replica", 3, c.nodes[3].srv().BrokerEpoch(), kerr.NotLeaderForPartition.Code},
		{"a stale broker epoch", 2, c.nodes[2].srv().BrokerEpoch() - 1, kerr.NotLeaderForPartition.Code},
		{"the follower", 2, c.nodes[2].srv().BrokerEpoch(), 0},
	} {
		req := fetchReq(16, "nl", 0, 0)
		req.ReplicaState.ID, req.ReplicaState.Epoch = tc.replica, tc.epoch
		req.Topics[0].TopicID = c.state("nl").TopicID
		if r := rawRequest[*kmsg.FetchResponse](t, c.nodes[1].b, req); r.Topics[0].Partitions[0].ErrorCode != tc.want {
			t.Fatalf("replica fetch from %s: code %d, want %d", tc.what, r.Topics[0].Partitions[0].ErrorCode, tc.want)
		}
	}
	// The leader's epoch fences older and newer views.
	c.elect("nl", 1, []int32{1, 2})
	for _, tc := range []struct {
		epoch int32
		want  int16
	}{{0, kerr.FencedLeaderEpoch.Code}, {5, kerr.UnknownLeaderEpoch.Code}, {1, 0}} {
		req := fetchReq(12, "nl", 0, 0)
		req.Topics[0].Partitions[0].CurrentLeaderEpoch = tc.epoch
		if r := rawRequest[*kmsg.FetchResponse](t, c.nodes[1].b, req); r.Topics[0].Partitions[0].ErrorCode != tc.want {
			t.Fatalf("fetch at leader epoch %d: code %d, want %d", tc.epoch, r.Topics[0].Partitions[0].ErrorCode, tc.want)
		}
	}
}

func TestReplicationLeaderChangeTruncates(t *testing.T) {
	c := newReplCluster(t, 3, nil)
	c.createTopic("lc", []int32{1, 2, 3}, nil)
	done := c.produceAsync(1, "lc", -1, 30000, "a")
	c.waitLEO(1, "lc", 1)
	c.replicate(2)
	if pr := awaitProduce(t, done); pr.ErrorCode != 0 {
		t.Fatal(pr.ErrorCode)
	}
	// Two batches only the old leader gets (acks=1), then it loses the
	// leadership to broker 2, which writes at epoch 1.
	c.nodes[2].fetcher.stopped.Store(true)
	c.nodes[3].fetcher.stopped.Store(true)
	c.produce(1, "lc", 1, "b")
	c.produce(1, "lc", 1, "c")
	c.elect("lc", 2, []int32{2, 3})
	c.nodes[2].fetcher.stopped.Store(false)
	c.nodes[3].fetcher.stopped.Store(false)
	if pr := c.produce(1, "lc", 1, "x"); pr.ErrorCode != kerr.NotLeaderForPartition.Code {
		t.Fatalf("produce to the old leader: code %d", pr.ErrorCode)
	}
	if pr := c.produce(2, "lc", 1, "d"); pr.ErrorCode != 0 || pr.BaseOffset != 1 {
		t.Fatalf("produce to the new leader: code %d base %d", pr.ErrorCode, pr.BaseOffset)
	}
	c.replicate(3)
	want := c.logBytes(2, "lc")
	if lastOffsetOf(want) != 1 {
		t.Fatalf("new leader's log ends at %d", lastOffsetOf(want))
	}
	for _, id := range []int32{1, 3} {
		if got := c.logBytes(id, "lc"); !bytes.Equal(got, want) {
			t.Fatalf("broker %d's log is not the new leader's after the truncation (%d vs %d bytes, end %d)", id, len(got), len(want), lastOffsetOf(got))
		}
	}
	if e, ok := c.handle(1, "lc").log.EpochCache().LatestEpoch(); !ok || e != 1 {
		t.Fatalf("old leader's latest epoch %d %v, want 1", e, ok)
	}
}

func TestReplicationHighWatermarkCheckpoint(t *testing.T) {
	c := newReplCluster(t, 2, nil)
	c.createTopic("ck", []int32{1, 2}, nil)
	done := c.produceAsync(1, "ck", -1, 30000, "a")
	c.waitLEO(1, "ck", 1)
	c.replicate(2)
	awaitProduce(t, done)
	c.nodes[2].fetcher.stopped.Store(true)
	c.produce(1, "ck", 1, "never replicated")
	dir := c.nodes[1].b.dir
	c.nodes[1].b.stop()
	data, err := os.ReadFile(filepath.Join(dir, hwCheckpointFile))
	if err != nil {
		t.Fatal(err)
	}
	if string(data) != "0\n1\nck 0 1\n" {
		t.Fatalf("checkpoint %q", data)
	}
	// Restarted, the broker does not lead in the epoch the state named it
	// leader in before its new registration (the controller re-elects
	// it in a new one), and shows consumers only what was replicated,
	// also once it leads again.
	c.start(1, dir)
	h := c.handle(1, "ck")
	p := c.nodes[1].srv().cluster.topic("ck").Partition(0)
	waitUntil(t, "the restarted broker's role", func() bool { return p.repl.Load() != nil })
	if rs := p.repl.Load(); rs.leader || rs.leaderID != clustermeta.NoLeader {
		t.Fatalf("restarted broker's role under the state before its registration: %+v, want no leader", rs)
	}
	if pr := c.produce(1, "ck", 1, "stale epoch"); pr.ErrorCode != kerr.NotLeaderForPartition.Code {
		t.Fatalf("produce to the restarted broker before its re-election: code %d", pr.ErrorCode)
	}
	c.elect("ck", 1, []int32{1, 2})
	waitUntil(t, "the restarted broker leading again", func() bool { rs := p.repl.Load(); return rs != nil && rs.leader })
	if hw, leo := highWatermark(h), h.log.LogEndOffset(); hw != 1 || leo != 2 {
		t.Fatalf("after restart: high watermark %d log end %d, want 1 and 2", hw, leo)
	}
	// Its high watermark is below the start of its new epoch (the
	// unreplicated record): no latest offset until a follower caught up
	// (KIP-207), rather than an end that may be behind an earlier one.
	if lp := listOffsetsPart(t, c.nodes[1].b, 9, "ck", 0, tsLatest, 0); lp.ErrorCode != kerr.OffsetNotAvailable.Code {
		t.Fatalf("latest offset on the restarted leader: %d error %d, want OFFSET_NOT_AVAILABLE", lp.Offset, lp.ErrorCode)
	}
	c.nodes[2].fetcher.stopped.Store(false)
	c.replicate(2)
	if got := c.latest(1, "ck"); got != 2 {
		t.Fatalf("latest offset on the restarted leader once its follower caught up: %d, want 2", got)
	}
}

func TestHWCheckpointFormat(t *testing.T) {
	m := map[TopicPartition]int64{{"b", 1}: 7, {"a", 0}: 0, {"a", 10}: 1 << 40}
	data := formatHWCheckpoint(m)
	if string(data) != "0\n3\na 0 0\na 10 1099511627776\nb 1 7\n" {
		t.Fatalf("format %q", data)
	}
	got, err := parseHWCheckpoint(data)
	if err != nil || len(got) != 3 || got[TopicPartition{"a", 10}] != 1<<40 {
		t.Fatalf("parse: %v %v", got, err)
	}
	for _, bad := range []string{"", "1\n0\n", "0\n2\na 0 1\n", "0\n1\na 0\n", "0\n1\na -1 0\n", "0\n1\na 0 x\n", "0\nx\n"} {
		if _, err := parseHWCheckpoint([]byte(bad)); err == nil {
			t.Errorf("parse %q: no error", bad)
		}
	}
}

func TestInterBrokerClient(t *testing.T) {
	c := newReplCluster(t, 1, nil)
	s := c.nodes[1].srv()
	if o := s.InterBrokerClient(); o.TLS != nil || o.SASL != nil || o.ClientID != "verbatim-replica-1" {
		t.Fatalf("default inter-broker client: %+v", o)
	}
	tc := &tls.Config{ServerName: "broker"}
	s.SetInterBrokerClient(client.Options{TLS: tc})
	if o := s.InterBrokerClient(); o.TLS != tc || o.ClientID != "verbatim-replica-1" {
		t.Fatalf("inter-broker client after SetInterBrokerClient: %+v", o)
	}
}

func TestReplicationLongPollWakesAtTheHighWatermark(t *testing.T) {
	c := newReplCluster(t, 2, nil)
	c.createTopic("poll", []int32{1, 2}, nil)
	if pr := c.produce(1, "poll", 1, "a"); pr.ErrorCode != 0 {
		t.Fatal(pr.ErrorCode)
	}
	// A consumer long-polls from offset 0: the record is in the log but
	// not below the high watermark, so only the high watermark's advance
	// (no append comes) can answer it before its 30 s.
	req := fetchReq(12, "poll", 0, 0)
	req.MaxWaitMillis, req.MinBytes = 30000, 1
	got := make(chan kmsg.FetchResponseTopicPartition, 1)
	go func() {
		resp, err := rawRoundTrip(c.nodes[1].b.addr, req)
		if err != nil {
			t.Error(err)
			got <- kmsg.FetchResponseTopicPartition{}
			return
		}
		got <- resp.(*kmsg.FetchResponse).Topics[0].Partitions[0]
	}()
	p := c.nodes[1].srv().cluster.topic("poll").Partition(0)
	waitUntil(t, "the consumer's long poll waiting", func() bool { return p.data.nwait.Load() > 0 })
	c.replicate(2)
	select {
	case fr := <-got:
		if fr.ErrorCode != 0 || fr.HighWatermark != 1 || len(fr.RecordBatches) == 0 {
			t.Fatalf("long poll answered code %d hw %d with %d bytes", fr.ErrorCode, fr.HighWatermark, len(fr.RecordBatches))
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the long poll was not woken by the high watermark")
	}
}

func TestLeaderResignWaitsForAppendsBeingWritten(t *testing.T) {
	c := newReplCluster(t, 1, nil)
	c.createTopic("resign", []int32{1}, nil)
	ls := c.nodes[1].srv().cluster.topic("resign").Partition(0).repl.Load().lead
	if err := ls.admitAppend(); err != nil {
		t.Fatal(err)
	}
	resigned := make(chan struct{})
	go func() { ls.resign(); close(resigned) }()
	// resign cannot return while the append is being written.
	waitUntil(t, "resign waiting for the append", func() bool {
		if ls.appendMu.TryRLock() {
			ls.appendMu.RUnlock()
			return false
		}
		return true
	})
	select {
	case <-resigned:
		t.Fatal("resign returned while an append was being written")
	default:
	}
	ls.appendDone()
	<-resigned
	if err := ls.admitAppend(); err == nil {
		t.Fatal("an append admitted after the leadership ended")
	}
}

// A new leader whose high watermark is still below the start of its
// leader epoch (its followers have not fetched at the new epoch yet) may
// be behind what the old leader acknowledged: ListOffsets answers
// OFFSET_NOT_AVAILABLE for client requests until it caught up, as Kafka
// does (KIP-207), so a client never sees the end of the log go back.
func TestListOffsetsNewLeaderBelowEpochStart(t *testing.T) {
	c := newReplCluster(t, 3, nil)
	c.createTopic("ep", []int32{1, 2, 3}, nil)
	done := c.produceAsync(1, "ep", -1, 30000, "a", "b")
	c.waitLEO(1, "ep", 2)
	c.replicate(1) // the followers hold the records, not yet the high watermark
	c.elect("ep", 2, []int32{2, 3})
	waitUntil(t, "broker 2 leading", func() bool {
		rs := c.nodes[2].srv().cluster.topic("ep").Partition(0).repl.Load()
		return rs != nil && rs.leader
	})
	<-done
	if hw := highWatermark(c.handle(2, "ep")); hw != 0 {
		t.Fatalf("new leader's high watermark %d before any follower fetched, want 0", hw)
	}
	p := listOffsetsPart(t, c.nodes[2].b, 9, "ep", 0, tsLatest, 0)
	if p.ErrorCode != kerr.OffsetNotAvailable.Code {
		t.Fatalf("latest offset on a leader below its epoch start: offset %d error %d, want OFFSET_NOT_AVAILABLE", p.Offset, p.ErrorCode)
	}
	if p := listOffsetsPart(t, c.nodes[2].b, 9, "ep", 0, tsEarliest, 0); p.ErrorCode != 0 || p.Offset != 0 {
		t.Fatalf("earliest offset: %d error %d", p.Offset, p.ErrorCode)
	}
	c.replicate(2) // broker 3 fetches at the new epoch: the high watermark reaches the epoch start
	if got := c.latest(2, "ep"); got != 2 {
		t.Fatalf("latest offset once caught up: %d, want 2", got)
	}
}

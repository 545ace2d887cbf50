package broker

import (
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/verbatim-kafka/verbatim/clustermeta"
)

// writeMarkers sends one WriteTxnMarkers v1 marker for pid/epoch to the
// given partitions of topic and returns the partitions' codes.
func writeMarkers(t *testing.T, b *testBroker, pid int64, epoch int16, commit bool, cepoch int32, topic string, parts ...int32) []int16 {
	t.Helper()
	req := kmsg.NewPtrWriteTxnMarkersRequest()
	req.Version = 1
	m := kmsg.NewWriteTxnMarkersRequestMarker()
	m.ProducerID, m.ProducerEpoch, m.Committed, m.CoordinatorEpoch = pid, epoch, commit, cepoch
	m.Topics = []kmsg.WriteTxnMarkersRequestMarkerTopic{{Topic: topic, Partitions: parts}}
	req.Markers = append(req.Markers, m)
	resp := rawRequest[*kmsg.WriteTxnMarkersResponse](t, b, req)
	if len(resp.Markers) != 1 || resp.Markers[0].ProducerID != pid || len(resp.Markers[0].Topics) != 1 {
		t.Fatalf("WriteTxnMarkers answer: %+v", resp)
	}
	var codes []int16
	for i, p := range resp.Markers[0].Topics[0].Partitions {
		if p.Partition != parts[i] {
			t.Fatalf("answer for partition %d in place of %d", p.Partition, parts[i])
		}
		codes = append(codes, p.ErrorCode)
	}
	return codes
}

// WriteTxnMarkers writes through the local marker path: it ends the
// producer's open transaction (the last stable offset moves past it),
// refuses stale markers and unknown partitions, and needs CLUSTER_ACTION.
func TestWriteTxnMarkersServed(t *testing.T) {
	b := startBroker(t, t.TempDir(), nil)
	createTopic(t, b, "wm", 1, nil)
	pid, epoch := openRawTxn(t, b, "wm-tx", "wm") // two records at 0-1, open
	if lso := listOffsetsPart(t, b, 7, "wm", 0, -1, 1).Offset; lso != 0 {
		t.Fatalf("last stable offset %d with the transaction open", lso)
	}
	codes := writeMarkers(t, b, pid, epoch, true, 0, "wm", 0, 5)
	if codes[0] != 0 || codes[1] != kerr.UnknownTopicOrPartition.Code {
		t.Fatalf("codes %v, want [0 UNKNOWN_TOPIC_OR_PARTITION]", codes)
	}
	if c := writeMarkers(t, b, pid, epoch, true, 0, "no-such-topic", 0); c[0] != kerr.UnknownTopicOrPartition.Code {
		t.Fatalf("unknown topic: %v", c)
	}
	if lso := listOffsetsPart(t, b, 7, "wm", 0, -1, 1).Offset; lso != 3 {
		t.Fatalf("last stable offset %d after the COMMIT marker, want 3", lso)
	}
	// A marker of an older producer epoch is stale.
	if c := writeMarkers(t, b, pid, epoch-1, false, 0, "wm", 0); c[0] != kerr.InvalidProducerEpoch.Code {
		t.Fatalf("stale marker: %v, want INVALID_PRODUCER_EPOCH", c)
	}
	if end := listOffsetT(t, b, "wm", 0, -1); end != 3 {
		t.Fatalf("log end %d after a refused marker", end)
	}

	// With the authorizer on and no ACL, CLUSTER_ACTION is missing.
	a := startBroker(t, t.TempDir(), func(c *Config) { c.Authorizer = true })
	if c := writeMarkers(t, a, 1, 0, true, 0, "wm", 0); c[0] != kerr.ClusterAuthorizationFailed.Code {
		t.Fatalf("without CLUSTER_ACTION: %v", c)
	}
}

// awaitOwned waits until b's group coordinator serves __consumer_offsets
// partition p (its load ran).
func awaitOwned(t *testing.T, b *testBroker, p int32) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !b.srv.groups.Owns(p) {
		if time.Now().After(deadline) {
			t.Fatalf("__consumer_offsets-%d never loaded", p)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// replicatedCommit commits off on b (the leader of the group's offsets
// partition) while the followers fetch, since the commit is answered
// only once it is replicated (acks=all).
func replicatedCommit(t *testing.T, c *replCluster, b *testBroker, group, topic string, off int64) int16 {
	t.Helper()
	type answer struct {
		resp kmsg.Response
		err  error
	}
	done := make(chan answer, 1)
	go func() {
		resp, err := rawRoundTrip(b.addr, offsetCommitReq(group, topic, off))
		done <- answer{resp, err}
	}()
	deadline := time.After(20 * time.Second)
	for {
		select {
		case a := <-done:
			if a.err != nil {
				t.Fatal(a.err)
			}
			return a.resp.(*kmsg.OffsetCommitResponse).Topics[0].Partitions[0].ErrorCode
		case <-deadline:
			t.Fatal("the commit was never answered")
		default:
			c.replicate(1)
			time.Sleep(time.Millisecond)
		}
	}
}

// offsetFetch is the group's committed offset of topic/0 (v7: one group,
// a top-level code).
func offsetFetch(t *testing.T, b *testBroker, group, topic string) (int16, int64) {
	t.Helper()
	req := kmsg.NewPtrOffsetFetchRequest()
	req.Version = 7
	req.Group = group
	req.Topics = []kmsg.OffsetFetchRequestTopic{{Topic: topic, Partitions: []int32{0}}}
	resp := rawRequest[*kmsg.OffsetFetchResponse](t, b, req)
	if resp.ErrorCode != 0 {
		return resp.ErrorCode, -1
	}
	return resp.Topics[0].Partitions[0].ErrorCode, resp.Topics[0].Partitions[0].Offset
}

// A group's coordinator follows the leadership of its __consumer_offsets
// partition (replicated on two brokers): the leader serves the group, a
// commit is answered once replicated, and when the partition's leader
// changes the old leader answers NOT_COORDINATOR while the new one loads
// the committed offsets from its replica of the log; and back again.
func TestGroupCoordinatorMovesWithLeadership(t *testing.T) {
	c := newReplCluster(t, 2, nil)
	c.createTopic("data", []int32{1, 2}, nil)
	// One offsets partition: every group maps to it.
	c.createTopic(offsetsTopic, []int32{1, 2}, map[string]string{"cleanup.policy": "compact"})
	b1, b2 := c.nodes[1].b, c.nodes[2].b
	const group = "moving"
	awaitOwned(t, b1, 0)
	if code, _ := offsetFetch(t, b2, group, "data"); code != kerr.NotCoordinator.Code {
		t.Fatalf("the follower answers the group: %d, want NOT_COORDINATOR", code)
	}
	if code := replicatedCommit(t, c, b1, group, "data", 42); code != 0 {
		t.Fatalf("commit on broker 1: %d", code)
	}
	c.elect(offsetsTopic, 2, []int32{1, 2})
	if code, _ := offsetFetch(t, b1, group, "data"); code != kerr.NotCoordinator.Code {
		t.Fatalf("the old leader still answers: %d, want NOT_COORDINATOR", code)
	}
	if code := offsetCommit(t, b1, group, "data", 7); code != kerr.NotCoordinator.Code {
		t.Fatalf("commit on the old leader: %d, want NOT_COORDINATOR", code)
	}
	awaitOwned(t, b2, 0)
	if code, off := offsetFetch(t, b2, group, "data"); code != 0 || off != 42 {
		t.Fatalf("the new leader's group: %d %d, want 42", code, off)
	}
	if code := replicatedCommit(t, c, b2, group, "data", 43); code != 0 {
		t.Fatalf("commit on broker 2: %d", code)
	}
	c.elect(offsetsTopic, 1, []int32{1, 2})
	awaitOwned(t, b1, 0)
	if code, off := offsetFetch(t, b1, group, "data"); code != 0 || off != 43 {
		t.Fatalf("back on broker 1: %d %d, want 43", code, off)
	}
}

func offsetCommit(t *testing.T, b *testBroker, group, topic string, off int64) int16 {
	t.Helper()
	return rawRequest[*kmsg.OffsetCommitResponse](t, b, offsetCommitReq(group, topic, off)).Topics[0].Partitions[0].ErrorCode
}

// A transaction over two partitions led by two brokers commits with a
// marker on each: the coordinator (on the leader of the id's
// __transaction_state partition) writes its own broker's marker locally
// and sends the other over WriteTxnMarkers; the produce to the partition
// on the other broker is verified by asking the coordinator's broker.
func TestTxnSpansPartitionsOfTwoLeaders(t *testing.T) {
	tc := startTestCluster(t, 2, func(c *ClusterConfig) { c.InternalReplicationFactor = 1 })
	b1, b2 := tc.brokers[1], tc.brokers[2]
	if r := createTopicOn(t, b1, createTopicReq("span", 2, 1)); r.ErrorCode != 0 {
		t.Fatalf("create: %d", r.ErrorCode)
	}
	tc.awaitCurrent()
	leaderOf := func(p int32) *testBroker {
		return tc.brokers[b1.srv.Topic("span").Partition(p).cstate.Load().Leader]
	}
	if leaderOf(0) == leaderOf(1) {
		t.Fatal("both partitions on one broker")
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(b1.addr, b2.addr), kgo.TransactionalID("span-tx"),
		kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.TransactionTimeout(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx := ctxT(t)
	if err := cl.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	for p := int32(0); p < 2; p++ {
		if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "span", Partition: p, Value: []byte{'v', byte('0' + p)}}).FirstErr(); err != nil {
			t.Fatalf("produce to partition %d: %v", p, err)
		}
	}
	if err := cl.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatalf("commit: %v", err)
	}
	// The coordinator is on one of the two leaders, so one marker and
	// one produce's verification crossed to the other broker.
	coord := tc.brokers[b1.srv.txnCoordinatorNode("span-tx")]
	for p := int32(0); p < 2; p++ {
		l := leaderOf(p)
		// One record and the COMMIT marker; the last stable offset is
		// past the marker.
		if end := listOffsetsPart(t, l, 7, "span", p, -1, 0).Offset; end != 2 {
			t.Fatalf("partition %d: log end %d, want 2", p, end)
		}
		if lso := listOffsetsPart(t, l, 7, "span", p, -1, 1).Offset; lso != 2 {
			t.Fatalf("partition %d: last stable offset %d, want 2 (no COMMIT marker?)", p, lso)
		}
		t.Logf("partition %d led by broker %d, coordinator on broker %d", p, l.srv.cfg.NodeID, coord.srv.cfg.NodeID)
	}
	d := describeTxn(t, coord, "span-tx")
	if d.ErrorCode != 0 || d.State != "CompleteCommit" {
		t.Fatalf("transaction on its coordinator: %+v", d)
	}
	// The transaction is over: a further transactional batch to the
	// partition on the other broker is refused by the coordinator's
	// broker's verification, and not appended.
	var far int32
	if leaderOf(far) == coord {
		far = 1
	}
	preq := produceRequest(9, "span", far, rawTxnBatch(t, d.ProducerID, d.ProducerEpoch, 1, "late"))
	id := "span-tx"
	preq.TransactionID = &id
	if r := rawRequest[*kmsg.ProduceResponse](t, leaderOf(far), preq).Topics[0].Partitions[0]; r.ErrorCode != kerr.InvalidTxnState.Code {
		t.Fatalf("produce after the commit, verified remotely: %+v", r)
	}
	if end := listOffsetsPart(t, leaderOf(far), 7, "span", far, -1, 0).Offset; end != 2 {
		t.Fatalf("log end %d after a refused produce", end)
	}
}

// Transactional offsets committed to a group whose __consumer_offsets
// partition is led by another broker than the transaction's coordinator
// become visible with the COMMIT marker the coordinator sends there.
func TestTxnOffsetsOnAnotherBrokersGroup(t *testing.T) {
	tc := startTestCluster(t, 2, func(c *ClusterConfig) { c.InternalReplicationFactor = 1 })
	b1, b2 := tc.brokers[1], tc.brokers[2]
	if r := createTopicOn(t, b1, createTopicReq("src", 1, 1)); r.ErrorCode != 0 {
		t.Fatalf("create: %d", r.ErrorCode)
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(b1.addr, b2.addr))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx := ctxT(t)
	const id = "offsets-tx"
	ireq := kmsg.NewPtrInitProducerIDRequest()
	ireq.TransactionalID, ireq.TransactionTimeoutMillis = kmsg.StringPtr(id), 60000
	iresp, err := ireq.RequestWith(ctx, cl)
	if err != nil || iresp.ErrorCode != 0 {
		t.Fatalf("init: %v %+v", err, iresp)
	}
	// Both internal topics exist now (the group lookup creates
	// __consumer_offsets): pick a group coordinated elsewhere.
	fc := kmsg.NewPtrFindCoordinatorRequest()
	fc.CoordinatorKey = "probe"
	if _, err := fc.RequestWith(ctx, cl); err != nil {
		t.Fatal(err)
	}
	tc.awaitAll(func(s *clustermeta.Snapshot) bool { return len(s.Partitions[offsetsTopic]) > 0 })
	txnNode := b1.srv.txnCoordinatorNode(id)
	snap := b1.srv.clusterSnapshot()
	group := ""
	for i := 0; group == ""; i++ {
		g := fmt.Sprint("grp-", i)
		if st, _ := snap.Partition(offsetsTopic, b1.srv.groups.PartitionFor(g)); st.Leader != txnNode {
			group = g
		}
	}
	aoreq := kmsg.NewPtrAddOffsetsToTxnRequest()
	aoreq.TransactionalID, aoreq.ProducerID, aoreq.ProducerEpoch, aoreq.Group = id, iresp.ProducerID, iresp.ProducerEpoch, group
	if r, err := aoreq.RequestWith(ctx, cl); err != nil || r.ErrorCode != 0 {
		t.Fatalf("add offsets: %v %+v", err, r)
	}
	toreq := kmsg.NewPtrTxnOffsetCommitRequest()
	toreq.TransactionalID, toreq.Group, toreq.ProducerID, toreq.ProducerEpoch, toreq.Generation = id, group, iresp.ProducerID, iresp.ProducerEpoch, -1
	toreq.Topics = []kmsg.TxnOffsetCommitRequestTopic{{Topic: "src", Partitions: []kmsg.TxnOffsetCommitRequestTopicPartition{{Partition: 0, Offset: 5, LeaderEpoch: -1}}}}
	if r, err := toreq.RequestWith(ctx, cl); err != nil || r.Topics[0].Partitions[0].ErrorCode != 0 {
		t.Fatalf("txn offset commit: %v %+v", err, r)
	}
	fetch := func() int64 {
		t.Helper()
		req := kmsg.NewPtrOffsetFetchRequest()
		req.Group = group
		req.Topics = []kmsg.OffsetFetchRequestTopic{{Topic: "src", Partitions: []int32{0}}}
		r, err := req.RequestWith(ctx, cl)
		if err != nil || r.ErrorCode != 0 {
			t.Fatalf("offset fetch: %v %+v", err, r)
		}
		return r.Topics[0].Partitions[0].Offset
	}
	if off := fetch(); off != -1 {
		t.Fatalf("offset %d visible before the commit", off)
	}
	ereq := kmsg.NewPtrEndTxnRequest()
	ereq.TransactionalID, ereq.ProducerID, ereq.ProducerEpoch, ereq.Commit = id, iresp.ProducerID, iresp.ProducerEpoch, true
	if r, err := ereq.RequestWith(ctx, cl); err != nil || r.ErrorCode != 0 {
		t.Fatalf("end txn: %v %+v", err, r)
	}
	if off := fetch(); off != 5 {
		t.Fatalf("offset %d after the commit, want 5", off)
	}
}

package broker

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/verbatim-kafka/verbatim/mirror"
)

// deleteRecordsAsync sends req to node and delivers its first partition
// answer.
func (c *replCluster) deleteRecordsAsync(node int32, req *kmsg.DeleteRecordsRequest) <-chan kmsg.DeleteRecordsResponseTopicPartition {
	addr := c.nodes[node].b.addr
	out := make(chan kmsg.DeleteRecordsResponseTopicPartition, 1)
	errs := make(chan error, 1)
	go func() {
		resp, err := rawRoundTrip(addr, req)
		if err != nil {
			errs <- err
			close(out)
			return
		}
		out <- resp.(*kmsg.DeleteRecordsResponse).Topics[0].Partitions[0]
	}()
	c.t.Cleanup(func() {
		select {
		case err := <-errs:
			c.t.Errorf("DeleteRecords: %v", err)
		default:
		}
	})
	return out
}

// timedDelete is a client's DeleteRecords of topic's partition 0 up to
// offset with the request timeout timeoutMs.
func timedDelete(topic string, offset int64, timeoutMs int32) *kmsg.DeleteRecordsRequest {
	req := deleteRecordsReq(topic, 0, offset)
	req.TimeoutMillis = timeoutMs
	return req
}

func awaitDelete(t *testing.T, ch <-chan kmsg.DeleteRecordsResponseTopicPartition) kmsg.DeleteRecordsResponseTopicPartition {
	t.Helper()
	select {
	case r, ok := <-ch:
		if !ok {
			t.Fatal("DeleteRecords failed")
		}
		return r
	case <-time.After(20 * time.Second):
		t.Fatal("DeleteRecords not answered")
	}
	return kmsg.DeleteRecordsResponseTopicPartition{}
}

func notDeleted(t *testing.T, ch <-chan kmsg.DeleteRecordsResponseTopicPartition, why string) {
	t.Helper()
	select {
	case r := <-ch:
		t.Fatalf("DeleteRecords answered %+v %s", r, why)
	default:
	}
}

// replicatedTopic creates topic on replicas 1-3 with ten records every
// replica holds, the followers knowing the high watermark 10.
func (c *replCluster) replicatedTopic(topic string) {
	c.t.Helper()
	c.createTopic(topic, []int32{1, 2, 3}, nil)
	done := c.produceAsync(1, topic, -1, 30000, "0", "1", "2", "3", "4", "5", "6", "7", "8", "9")
	c.waitLEO(1, topic, 10)
	c.replicate(2)
	if pr := awaitProduce(c.t, done); pr.ErrorCode != 0 {
		c.t.Fatalf("produce: %v", kerr.ErrorForCode(pr.ErrorCode))
	}
	c.replicate(1) // the followers learn the high watermark
	for _, id := range []int32{2, 3} {
		if hw := highWatermark(c.handle(id, topic)); hw != 10 {
			c.t.Fatalf("follower %d high watermark %d", id, hw)
		}
	}
}

func (c *replCluster) logStart(node int32, topic string) int64 {
	return c.handle(node, topic).log.LogStartOffset()
}

// DeleteRecords on a 3-replica partition (Kafka's DelayedDeleteRecords):
// the leader's log start moves at once, the followers take it from their
// next fetch answer, and the request is answered once their next fetch
// reported it (the low watermark reached the offset), with the low
// watermark.
func TestReplicatedDeleteRecordsWaitsForTheFollowers(t *testing.T) {
	c := newReplCluster(t, 3, nil)
	c.replicatedTopic("d")
	done := c.deleteRecordsAsync(1, timedDelete("d", 4, 30000))
	waitUntil(t, "the leader's log start moved", func() bool { return c.logStart(1, "d") == 4 })
	notDeleted(t, done, "before the followers fetched")
	c.replicate(1) // the answers carry log start 4; the requests still 0
	for _, id := range []int32{2, 3} {
		if got := c.logStart(id, "d"); got != 4 {
			t.Fatalf("follower %d log start %d after a fetch, want the leader's 4", id, got)
		}
	}
	notDeleted(t, done, "before the followers reported their log start")
	c.nodes[2].fetcher.fetchOnce()
	notDeleted(t, done, "with follower 3's log start still 0")
	c.nodes[3].fetcher.fetchOnce()
	if r := awaitDelete(t, done); r.ErrorCode != 0 || r.LowWatermark != 4 {
		t.Fatalf("DeleteRecords: %v low watermark %d, want 4", kerr.ErrorForCode(r.ErrorCode), r.LowWatermark)
	}
	// Everything reported: a DeleteRecords at or below the low watermark
	// is answered at once, with the low watermark (not the offset asked).
	if r := awaitDelete(t, c.deleteRecordsAsync(1, timedDelete("d", 2, 30000))); r.ErrorCode != 0 || r.LowWatermark != 4 {
		t.Fatalf("DeleteRecords below the low watermark: %v low watermark %d, want 4", kerr.ErrorForCode(r.ErrorCode), r.LowWatermark)
	}
}

// A follower that does not fetch holds the low watermark: the request
// answers REQUEST_TIMED_OUT after its timeout (the leader's log start
// moved all the same, as Kafka's); once it fetches again the same delete
// completes at once.
func TestReplicatedDeleteRecordsTimesOut(t *testing.T) {
	c := newReplCluster(t, 3, nil)
	c.replicatedTopic("d")
	c.nodes[3].fetcher.stopped.Store(true)
	done := c.deleteRecordsAsync(1, timedDelete("d", 6, 300))
	waitUntil(t, "the leader's log start moved", func() bool { return c.logStart(1, "d") == 6 })
	c.replicate(2)
	r := awaitDelete(t, done)
	if r.ErrorCode != kerr.RequestTimedOut.Code || r.LowWatermark != 0 {
		t.Fatalf("DeleteRecords with a follower not fetching: %v low watermark %d, want REQUEST_TIMED_OUT at 0", kerr.ErrorForCode(r.ErrorCode), r.LowWatermark)
	}
	if got := c.logStart(2, "d"); got != 6 {
		t.Fatalf("follower 2's log start %d, want 6", got)
	}
	c.nodes[3].fetcher.stopped.Store(false)
	c.replicate(2)
	if r := awaitDelete(t, c.deleteRecordsAsync(1, timedDelete("d", 6, 300))); r.ErrorCode != 0 || r.LowWatermark != 6 {
		t.Fatalf("DeleteRecords after every follower fetched: %v low watermark %d, want 6", kerr.ErrorForCode(r.ErrorCode), r.LowWatermark)
	}
}

// The low watermark counts the followers whose broker is registered
// (Kafka's: the live replicas), in the ISR or not: a stopped broker's
// replica does not hold a DeleteRecords.
func TestReplicatedDeleteRecordsCountsLiveFollowers(t *testing.T) {
	c := newReplCluster(t, 3, nil)
	c.replicatedTopic("d")
	c.nodes[3].b.stop()
	waitUntil(t, "broker 3's registration gone", func() bool {
		_, registered := c.nodes[1].srv().clusterSnapshot().Brokers[3]
		return !registered
	})
	done := c.deleteRecordsAsync(1, timedDelete("d", 5, 30000))
	waitUntil(t, "the leader's log start moved", func() bool { return c.logStart(1, "d") == 5 })
	notDeleted(t, done, "before follower 2 fetched")
	c.replicate(2)
	if r := awaitDelete(t, done); r.ErrorCode != 0 || r.LowWatermark != 5 {
		t.Fatalf("DeleteRecords with broker 3 stopped: %v low watermark %d, want 5", kerr.ErrorForCode(r.ErrorCode), r.LowWatermark)
	}
}

// A follower takes the leader's log start only up to its own high
// watermark (Kafka's follower refuses a log start above it).
func TestFollowerLogStartBoundedByItsHighWatermark(t *testing.T) {
	c := newReplCluster(t, 3, nil)
	c.replicatedTopic("d")
	r, err := c.nodes[2].srv().FollowerReplica("d", 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Append(nil, 3, 8); err != nil {
		t.Fatal(err)
	}
	if got := r.LogStartOffset(); got != 3 {
		t.Fatalf("log start %d after a leader's log start 8 with high watermark 3, want 3", got)
	}
	if err := r.Append(nil, 10, 8); err != nil {
		t.Fatal(err)
	}
	if got := r.LogStartOffset(); got != 8 {
		t.Fatalf("log start %d, want the leader's 8", got)
	}
}

// A follower's long poll answers at once when the leader's log start moved
// past the follower's (it would otherwise wait for records or MaxWait),
// and a follower whose log start is the leader's waits as before.
func TestFollowerLongPollAnswersANewLogStart(t *testing.T) {
	c := newReplCluster(t, 3, nil)
	c.replicatedTopic("d")
	fetch := func(logStart int64) <-chan kmsg.FetchResponseTopicPartition {
		req := kmsg.NewPtrFetchRequest()
		req.Version = 16
		req.ReplicaID = -1
		req.ReplicaState.ID, req.ReplicaState.Epoch = 2, c.nodes[2].srv().BrokerEpoch()
		req.MaxBytes, req.SessionEpoch, req.MinBytes, req.MaxWaitMillis = 1<<20, -1, 1, 25000
		rt := kmsg.NewFetchRequestTopic()
		rt.TopicID = c.nodes[1].srv().cluster.topic("d").ID
		rp := kmsg.NewFetchRequestTopicPartition()
		rp.Partition, rp.FetchOffset, rp.PartitionMaxBytes = 0, 10, 1<<20
		rp.CurrentLeaderEpoch, rp.LastFetchedEpoch, rp.LogStartOffset = 0, -1, logStart
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		out := make(chan kmsg.FetchResponseTopicPartition, 1)
		go func() {
			if resp, err := rawRoundTrip(c.nodes[1].b.addr, req); err == nil {
				out <- resp.(*kmsg.FetchResponse).Topics[0].Partitions[0]
			}
			close(out)
		}()
		return out
	}
	p := c.nodes[1].srv().cluster.topic("d").Partition(0)
	parkedFetches := func() int {
		p.data.mu.Lock()
		defer p.data.mu.Unlock()
		return len(p.data.waiters)
	}
	waiting := fetch(0)
	// The fetch is parked (nothing to read at the log end, and the log
	// start it sent is the leader's).
	waitUntil(t, "the fetch parked", func() bool { return parkedFetches() == 1 })
	done := c.deleteRecordsAsync(1, timedDelete("d", 5, 30000))
	select {
	case r, ok := <-waiting:
		if !ok || r.ErrorCode != 0 || r.LogStartOffset != 5 || len(r.RecordBatches) != 0 {
			t.Fatalf("the parked follower fetch: %+v", r)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the parked follower fetch was not answered with the new log start")
	}
	// A fetch that already has the leader's log start is parked as
	// before; it reports 5 for follower 2, then 3 reports too.
	parked := fetch(5)
	waitUntil(t, "the fetch parked", func() bool { return parkedFetches() == 1 })
	select {
	case r := <-parked:
		t.Fatalf("a follower fetch with nothing new answered: %+v", r)
	default:
	}
	c.replicate(2)
	if r := awaitDelete(t, done); r.ErrorCode != 0 || r.LowWatermark != 5 {
		t.Fatalf("DeleteRecords: %v low watermark %d, want 5", kerr.ErrorForCode(r.ErrorCode), r.LowWatermark)
	}
	// A record answers the parked fetch (and lets the broker shut down).
	if pr := c.produce(1, "d", 1, "x"); pr.ErrorCode != 0 {
		t.Fatalf("produce: %v", kerr.ErrorForCode(pr.ErrorCode))
	}
	select {
	case r := <-parked:
		if len(r.RecordBatches) == 0 {
			t.Fatalf("the parked fetch after a produce: %+v", r)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the parked fetch was not answered by a produce")
	}
}

// A mirror log-start forward does not wait for the followers: it is
// answered at the leader's log start, which they take with their next
// fetch (docs/cluster.md "Log start and DeleteRecords").
func TestMirrorLogStartForwardAnswersAtTheLeader(t *testing.T) {
	c := newReplCluster(t, 3, nil)
	c.createTopic("m", []int32{1, 2, 3}, map[string]string{"mirror.mode": "push"})
	registerAs(t, c.nodes[1].b, "m", writerID{}, 0)
	ch := c.mirrorProduceAsync(1, "m", data(0, 2, 6).encode(t), 0)
	c.waitLEO(1, "m", 6)
	if r := c.replicateUntil(ch); r.ErrorCode != 0 {
		t.Fatalf("mirror produce: %+v", r)
	}
	c.replicate(1)
	c.nodes[2].fetcher.stopped.Store(true)
	c.nodes[3].fetcher.stopped.Store(true)
	fwd := mirror.DeleteRecordsRequest(mirror.Writer{Epoch: testWriterEpoch}, map[string][]int32{"m": {0}}, 4)
	if r := awaitDelete(t, c.deleteRecordsAsync(1, fwd)); r.ErrorCode != 0 || r.LowWatermark != 4 {
		t.Fatalf("mirror forward: %v low watermark %d, want 4", kerr.ErrorForCode(r.ErrorCode), r.LowWatermark)
	}
	c.nodes[2].fetcher.stopped.Store(false)
	c.nodes[3].fetcher.stopped.Store(false)
	c.replicate(1)
	for _, id := range []int32{2, 3} {
		if got := c.logStart(id, "m"); got != 4 {
			t.Fatalf("follower %d log start %d, want 4", id, got)
		}
	}
}

// A fetch session keeps the follower's log start of its partitions: an
// incremental fetch that leaves a partition out fetches it with the log
// start last sent, one that names it replaces it (Kafka's CachedPartition
// fetcherLogStartOffset).
func TestFetchSessionKeepsTheFollowerLogStart(t *testing.T) {
	var c fetchSessionCache
	now := time.Unix(1000, 0)
	withPartition := func(req *kmsg.FetchRequest, logStart int64) *kmsg.FetchRequest {
		rt := kmsg.NewFetchRequestTopic()
		rt.Topic = "t"
		rp := kmsg.NewFetchRequestTopicPartition()
		rp.Partition, rp.FetchOffset, rp.LogStartOffset = 0, 10, logStart
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		return req
	}
	var id int32
	for i, step := range []struct {
		req  *kmsg.FetchRequest
		want int64
	}{
		{withPartition(sessReq(12, 0, 0), 3), 3},
		{sessReq(12, -1, 1), 3}, // incremental, the partition left out
		{withPartition(sessReq(12, -1, 2), 7), 7},
	} {
		if step.req.SessionID == -1 {
			step.req.SessionID = id
		}
		plan := c.begin(step.req, now)
		if plan.sess == nil || plan.errCode != 0 {
			t.Fatalf("step %d: no session (%d)", i, plan.errCode)
		}
		id = plan.sess.id
		sps := plan.sess.apply(step.req, &plan)
		if len(sps) != 1 || sps[0].fetcherLogStart != step.want {
			t.Fatalf("step %d: session partitions %+v, want log start %d", i, sps, step.want)
		}
		c.end(plan.sess, true)
	}
}

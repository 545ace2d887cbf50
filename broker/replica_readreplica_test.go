package broker

import (
	"net/http/httptest"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// rackCluster is three brokers in racks a, b and c, the rack-aware
// selector on or off, with topic "near" on replicas 1,2,3 (led by 1)
// holding three records replicated to every follower.
func rackCluster(t *testing.T, selector bool) *replCluster {
	racks := []string{"a", "b", "c"}
	next := 0
	c := newReplCluster(t, 3, func(cc *ClusterConfig) {
		cc.Rack = racks[next]
		next++
		cc.RackAwareReplicaSelector = selector
	})
	c.createTopic("near", []int32{1, 2, 3}, nil)
	if pr := c.produce(1, "near", 1, "x", "y", "z"); pr.ErrorCode != 0 {
		t.Fatalf("produce: %v", kerr.ErrorForCode(pr.ErrorCode))
	}
	c.replicate(3)
	for id := int32(1); id <= 3; id++ {
		if hw := highWatermark(c.handle(id, "near")); hw != 3 {
			t.Fatalf("broker %d's high watermark %d, want 3", id, hw)
		}
	}
	return c
}

func rackFetch(c *replCluster, node int32, rack string, offset int64) kmsg.FetchResponseTopicPartition {
	c.t.Helper()
	req := fetchReq(12, "near", 0, offset)
	req.Rack = rack
	return rawRequest[*kmsg.FetchResponse](c.t, c.nodes[node].b, req).Topics[0].Partitions[0]
}

func TestPreferredReadReplica(t *testing.T) {
	c := rackCluster(t, true)
	// A consumer in rack b asking the leader is pointed to broker 2,
	// with the leader's offsets and no records.
	fr := rackFetch(c, 1, "b", 0)
	if fr.ErrorCode != 0 || fr.PreferredReadReplica != 2 || len(fr.RecordBatches) != 0 || fr.HighWatermark != 3 || fr.LogStartOffset != 0 {
		t.Fatalf("rack b at the leader: %+v", fr)
	}
	// The leader's own rack, an unknown rack, no rack: the leader serves.
	for _, rack := range []string{"a", "elsewhere", ""} {
		if fr := rackFetch(c, 1, rack, 0); fr.ErrorCode != 0 || fr.PreferredReadReplica != -1 || len(fr.RecordBatches) == 0 {
			t.Fatalf("rack %q at the leader: %+v", rack, fr)
		}
	}
	// Broker 2 serves the consumer up to its high watermark.
	fr = rackFetch(c, 2, "b", 0)
	if fr.ErrorCode != 0 || fr.HighWatermark != 3 || lastOffsetOf(fr.RecordBatches) != 2 {
		t.Fatalf("rack b at the follower: %+v", fr)
	}
	// Past its log: OFFSET_OUT_OF_RANGE, as the leader answers it.
	if fr := rackFetch(c, 2, "b", 10); fr.ErrorCode != kerr.OffsetOutOfRange.Code {
		t.Fatalf("out of range at the follower: %+v", fr)
	}
	// A follower that has not fetched past the offset is not chosen.
	if fr := rackFetch(c, 1, "b", 3); fr.PreferredReadReplica != 2 {
		t.Fatalf("at the log end: %+v", fr)
	}
	if pr := c.produce(1, "near", 1, "w"); pr.ErrorCode != 0 {
		t.Fatal(kerr.ErrorForCode(pr.ErrorCode))
	}
	if fr := rackFetch(c, 1, "b", 4); fr.PreferredReadReplica != -1 {
		t.Fatalf("beyond the follower's log: %+v", fr)
	}
	// A follower out of the ISR is not chosen.
	c.replicate(2)
	c.setISR("near", []int32{1, 3})
	if fr := rackFetch(c, 1, "b", 0); fr.PreferredReadReplica != -1 {
		t.Fatalf("follower out of the ISR: %+v", fr)
	}
}

func TestFollowerRefusesConsumersWithoutSelector(t *testing.T) {
	c := rackCluster(t, false)
	if fr := rackFetch(c, 1, "b", 0); fr.PreferredReadReplica != -1 || len(fr.RecordBatches) == 0 {
		t.Fatalf("without the selector, at the leader: %+v", fr)
	}
	if fr := rackFetch(c, 2, "b", 0); fr.ErrorCode != kerr.NotLeaderForPartition.Code {
		t.Fatalf("without the selector, at the follower: %+v", fr)
	}
}

// TestFollowerFetchMetrics: a follower's fetches count as Kafka's
// FetchFollower request, a consumer's as FetchConsumer.
func TestFollowerFetchMetrics(t *testing.T) {
	c := rackCluster(t, true) // followers fetched; no consumer yet
	hs := httptest.NewServer(c.nodes[1].srv().MetricsHandler())
	defer hs.Close()
	mfs := scrape(t, hs.URL)
	requests := func(name string) float64 {
		return counter(mfs, "kafka_network_requestmetrics_requests_total", map[string]string{"request": name})
	}
	if v := requests("FetchFollower"); v < 3 {
		t.Errorf("requests{FetchFollower} = %v, want the followers' fetches", v)
	}
	if v := requests("FetchConsumer"); v > 0 {
		t.Errorf("requests{FetchConsumer} = %v before any consumer fetched", v)
	}
	rackFetch(c, 1, "a", 0)
	// Counted once the answer is written, which the client may see first.
	waitUntil(t, "the consumer fetch counted", func() bool {
		mfs = scrape(t, hs.URL)
		return requests("FetchConsumer") == 1
	})
	if v := counter(mfs, "kafka_network_requestmetrics_errors_total", map[string]string{"request": "FetchFollower", "error": "NONE"}); v < 3 {
		t.Errorf("errors{FetchFollower,NONE} = %v", v)
	}
	// The followers' bytes are replication bytes, not consumers'.
	topic := map[string]string{"topic": "near"}
	if v := counter(mfs, "kafka_server_brokertopicmetrics_replicationbytesout_total", topic); v < 2*61 {
		t.Errorf("replicationbytesout{topic=near} = %v, want the two followers' batches", v)
	}
	hs2 := httptest.NewServer(c.nodes[2].srv().MetricsHandler())
	defer hs2.Close()
	if v := counter(scrape(t, hs2.URL), "kafka_server_brokertopicmetrics_replicationbytesin_total", topic); v < 61 {
		t.Errorf("follower's replicationbytesin{topic=near} = %v, want the appended batch", v)
	}
}

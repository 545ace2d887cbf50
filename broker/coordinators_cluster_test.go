package broker

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/verbatim-kafka/verbatim/clustermeta"
	"github.com/verbatim-kafka/verbatim/clustermeta/memstore"
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

// clusterBroker is a broker in cluster mode over an in-memory store that
// no reconciler drives: the test applies partition roles itself.
func clusterBroker(t *testing.T) *testBroker {
	t.Helper()
	return startBroker(t, t.TempDir(), func(c *Config) { c.Cluster = &ClusterConfig{Store: memstore.New()} })
}

// localInternalTopic creates the internal topic on b alone (as the
// reconciler would from the store).
func localInternalTopic(t *testing.T, b *testBroker, name string) *Topic {
	t.Helper()
	cfg, err := newTopicConfig(map[string]string{"cleanup.policy": "compact"})
	if err != nil {
		t.Fatal(err)
	}
	tp, err := b.srv.cluster.createTopic(name, 10, cfg, false)
	if err != nil {
		t.Fatal(err)
	}
	return tp
}

// lead applies the role st describes (leader or follower) to p, as the
// reconciler does.
func lead(b *testBroker, p *Partition, leader, epoch int32) {
	b.srv.applyRole(p, clustermeta.PartitionState{Topic: p.Topic.Name, TopicID: p.Topic.ID, Partition: p.Index,
		Replicas: []int32{1, 2}, ISR: []int32{leader}, Leader: leader, LeaderEpoch: epoch})
}

// awaitOwned waits until the group coordinator serves p (its load ran).
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

func offsetCommit(t *testing.T, b *testBroker, group, topic string, off int64) int16 {
	t.Helper()
	req := kmsg.NewPtrOffsetCommitRequest()
	req.Version = 8
	req.Group, req.Generation = group, -1
	rt := kmsg.NewOffsetCommitRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewOffsetCommitRequestTopicPartition()
	rp.Partition, rp.Offset, rp.LeaderEpoch = 0, off, -1
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	return rawRequest[*kmsg.OffsetCommitResponse](t, b, req).Topics[0].Partitions[0].ErrorCode
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

// In cluster mode the group coordinator serves exactly the offsets
// partitions this broker leads: nothing before its election, the group's
// commits while it leads, NOT_COORDINATOR once the partition moved (its
// writes refused by the log even before the coordinator heard of it),
// and the committed offsets again, loaded from the log, when it leads
// the partition once more.
func TestCoordinatorsFollowInternalLeadership(t *testing.T) {
	b := clusterBroker(t)
	offsets := localInternalTopic(t, b, offsetsTopic)
	data := localTopic(t, b, "data")
	const group = "moving"
	p := offsets.Partition(b.srv.groups.PartitionFor(group))
	if code, _ := offsetFetch(t, b, group, "data"); code != kerr.NotCoordinator.Code {
		t.Fatalf("before any election: %d, want NOT_COORDINATOR", code)
	}
	lead(b, p, 1, 1)
	awaitOwned(t, b, p.Index)
	if code := offsetCommit(t, b, group, "data", 42); code != 0 {
		t.Fatalf("commit: %d", code)
	}
	if code, off := offsetFetch(t, b, group, "data"); code != 0 || off != 42 {
		t.Fatalf("fetch while leading: %d %d", code, off)
	}
	// Leadership is gone before the coordinator unloads: the write is
	// refused by the log (NOT_COORDINATOR to the client) and nothing is
	// appended.
	l, err := partitionLog(p)
	if err != nil {
		t.Fatal(err)
	}
	end := l.LogEndOffset()
	p.repl.Store(&replState{epoch: 2, leaderID: 2})
	if code := offsetCommit(t, b, group, "data", 99); code != kerr.NotCoordinator.Code {
		t.Fatalf("commit after the leadership moved: %d, want NOT_COORDINATOR", code)
	}
	if got := l.LogEndOffset(); got != end {
		t.Fatalf("log end %d after a refused commit, want %d", got, end)
	}
	b.srv.coordinatorsResigned(p)
	if code, _ := offsetFetch(t, b, group, "data"); code != kerr.NotCoordinator.Code {
		t.Fatalf("fetch after resignation: %d, want NOT_COORDINATOR", code)
	}
	// Elected again at a newer epoch: loaded from the log as committed.
	lead(b, p, 1, 3)
	awaitOwned(t, b, p.Index)
	if code, off := offsetFetch(t, b, group, "data"); code != 0 || off != 42 {
		t.Fatalf("fetch after re-election: %d %d, want 42", code, off)
	}
	// A follower refuses markers for its partitions.
	lead(b, data.Partition(0), 2, 1)
	if c := writeMarkers(t, b, 1, 0, true, 0, "data", 0); c[0] != kerr.NotLeaderForPartition.Code {
		t.Fatalf("marker on a follower: %v, want NOT_LEADER_OR_FOLLOWER", c)
	}
}

// localTopic creates a one-partition topic on b alone.
func localTopic(t *testing.T, b *testBroker, name string) *Topic {
	t.Helper()
	cfg, err := newTopicConfig(nil)
	if err != nil {
		t.Fatal(err)
	}
	tp, err := b.srv.cluster.createTopic(name, 1, cfg, false)
	if err != nil {
		t.Fatal(err)
	}
	return tp
}

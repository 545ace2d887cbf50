package broker

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/verbatim-kafka/verbatim/authz"
	"github.com/verbatim-kafka/verbatim/clustermeta"
)

func electReq(version int16, kind int8, topics map[string][]int32) *kmsg.ElectLeadersRequest {
	req := kmsg.NewPtrElectLeadersRequest()
	req.Version, req.ElectionType, req.TimeoutMillis = version, kind, 10000
	if topics != nil {
		req.Topics = []kmsg.ElectLeadersRequestTopic{}
		for name, ps := range topics {
			rt := kmsg.NewElectLeadersRequestTopic()
			rt.Topic, rt.Partitions = name, ps
			req.Topics = append(req.Topics, rt)
		}
	}
	return req
}

// partitionCodes flattens an ElectLeaders answer to topic-partition ->
// error code.
func partitionCodes(resp *kmsg.ElectLeadersResponse) map[TopicPartition]int16 {
	out := map[TopicPartition]int16{}
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			out[TopicPartition{t.Topic, p.Partition}] = p.ErrorCode
		}
	}
	return out
}

func TestElectLeadersPreferredInCluster(t *testing.T) {
	c := newReplCluster(t, 3, nil)
	c.createTopic("moved", []int32{1, 2, 3}, nil)
	c.createTopic("home", []int32{2, 3, 1}, nil)
	c.createTopic("outside", []int32{3, 1, 2}, nil)
	c.elect("moved", 2, []int32{1, 2, 3}) // preferred 1 in the ISR: electable
	c.elect("outside", 1, []int32{1, 2})  // preferred 3 out of the ISR
	before := c.state("moved")

	b := c.nodes[3].b // any broker, not the one elected
	resp := rawRequest[*kmsg.ElectLeadersResponse](t, b, electReq(2, 0, map[string][]int32{
		"moved": {0}, "home": {0}, "outside": {0}, "nosuch": {0}}))
	got := partitionCodes(resp)
	want := map[TopicPartition]int16{
		{"moved", 0}:   0,
		{"home", 0}:    kerr.ElectionNotNeeded.Code,
		{"outside", 0}: kerr.PreferredLeaderNotAvailable.Code,
		{"nosuch", 0}:  kerr.UnknownTopicOrPartition.Code,
	}
	for tp, code := range want {
		if got[tp] != code {
			t.Errorf("%v: error %d, want %d (all: %v)", tp, got[tp], code, got)
		}
	}
	after := c.state("moved")
	if after.Leader != 1 || after.LeaderEpoch != before.LeaderEpoch+1 || after.PartitionEpoch != before.PartitionEpoch+1 {
		t.Fatalf("after the election: %+v (before %+v)", after, before)
	}
	// The answering broker applied the new state before answering.
	if st := b.srv.cluster.topic("moved").Partition(0).cstate.Load(); st == nil || st.Leader != 1 {
		t.Fatalf("broker 3 has not applied the election: %+v", st)
	}

	// All partitions (Topics null): the ones not needing an election are
	// left out; "outside" still cannot be elected.
	resp = rawRequest[*kmsg.ElectLeadersResponse](t, b, electReq(2, 0, nil))
	got = partitionCodes(resp)
	if len(got) != 1 || got[TopicPartition{"outside", 0}] != kerr.PreferredLeaderNotAvailable.Code {
		t.Fatalf("all partitions: %v", got)
	}
}

func TestElectLeadersUncleanInCluster(t *testing.T) {
	c := newReplCluster(t, 3, nil)
	c.createTopic("led", []int32{1, 2, 3}, nil)
	c.createTopic("orphan", []int32{1, 2, 3}, nil)
	// No leader, and the last ISR member (4) is not a registered broker:
	// only an unclean election finds one.
	st := c.state("orphan")
	st.Leader, st.ISR, st.LeaderEpoch = clustermeta.NoLeader, []int32{4}, st.LeaderEpoch+1
	c.write(st)

	resp := rawRequest[*kmsg.ElectLeadersResponse](t, c.nodes[2].b, electReq(1, 1, map[string][]int32{"led": {0}, "orphan": {0}}))
	got := partitionCodes(resp)
	if got[TopicPartition{"led", 0}] != kerr.ElectionNotNeeded.Code || got[TopicPartition{"orphan", 0}] != 0 {
		t.Fatalf("unclean election: %v", got)
	}
	after := c.state("orphan")
	if after.Leader != 1 || len(after.ISR) != 1 || after.ISR[0] != 1 {
		t.Fatalf("after the unclean election: %+v", after)
	}
}

func TestElectLeadersSingleNode(t *testing.T) {
	b := startBroker(t, t.TempDir(), nil)
	createTopic(t, b, "one", 2, nil)
	resp := rawRequest[*kmsg.ElectLeadersResponse](t, b, electReq(0, 0, map[string][]int32{"one": {0, 1, 2}}))
	got := partitionCodes(resp)
	if got[TopicPartition{"one", 0}] != kerr.ElectionNotNeeded.Code || got[TopicPartition{"one", 1}] != kerr.ElectionNotNeeded.Code ||
		got[TopicPartition{"one", 2}] != kerr.UnknownTopicOrPartition.Code {
		t.Fatalf("single node: %v", got)
	}
	resp = rawRequest[*kmsg.ElectLeadersResponse](t, b, electReq(2, 1, nil))
	if resp.ErrorCode != 0 || len(resp.Topics) != 0 {
		t.Fatalf("single node, all partitions: %+v", resp)
	}
}

// TestElectLeadersAuthorization: ALTER on CLUSTER, else the top-level
// error (v1+) and every partition asked for are
// CLUSTER_AUTHORIZATION_FAILED.
func TestElectLeadersAuthorization(t *testing.T) {
	b := startBroker(t, t.TempDir(), withACLs(nil))
	createTopic(t, b, "t", 1, nil)
	resp := rawAs[*kmsg.ElectLeadersResponse](t, b, malloryIP, electReq(2, 0, map[string][]int32{"t": {0}}))
	if resp.ErrorCode != kerr.ClusterAuthorizationFailed.Code || partitionCodes(resp)[TopicPartition{"t", 0}] != kerr.ClusterAuthorizationFailed.Code {
		t.Fatalf("without ALTER on CLUSTER: %+v", resp)
	}
	grant(t, b, mallory, authz.PermAllow, "CLUSTER:kafka-cluster:ALTER")
	resp = rawAs[*kmsg.ElectLeadersResponse](t, b, malloryIP, electReq(2, 0, map[string][]int32{"t": {0}}))
	if resp.ErrorCode != 0 || partitionCodes(resp)[TopicPartition{"t", 0}] != kerr.ElectionNotNeeded.Code {
		t.Fatalf("with ALTER on CLUSTER: %+v", resp)
	}
}

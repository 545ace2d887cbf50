package broker

// DescribeTopicPartitions (key 75), version 0 (KIP-966). Java's
// kafka-topics --describe uses it (falling back to Metadata without it).
//
// Behaviour:
//   - An empty topic list describes every topic, in name order; named
//     topics are answered in request order. Unknown topics are
//     UNKNOWN_TOPIC_OR_PARTITION, invalid names INVALID_TOPIC_EXCEPTION.
//   - Each partition: leader = this node, its persisted leader epoch,
//     replicas = ISR = [node], empty ELR and last-known ELR (no eligible
//     leader replicas on one node), no offline replicas.
//   - Pagination: at most ResponsePartitionLimit partitions (capped at
//     2000, as Kafka's max.request.partition.size.limit) are returned;
//     NextCursor names where to continue. A Cursor starts the listing at
//     that topic and partition.
//
// Authorization (with the authorizer on, authorize.go): DESCRIBE on each
// topic, as Metadata; the authorized operations are the principal's.
//
// In cluster mode each partition is as the cluster store has it (leader,
// -1 when none is registered; leader epoch; replicas; ISR; offline
// replicas), with empty ELRs (no KIP-966 election here).
//
// Deviations from Apache Kafka: none known.

import (
	"context"
	"sort"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/verbatim-kafka/verbatim/authz"
)

func init() { register(kmsg.DescribeTopicPartitions.Int16(), 0, 0, handleDescribeTopicPartitions) }

const describeTopicPartitionsLimit = 2000

func handleDescribeTopicPartitions(_ context.Context, s *Server, r *Request) (Reply, error) {
	req := r.Msg.(*kmsg.DescribeTopicPartitionsRequest)
	resp := req.ResponseKind().(*kmsg.DescribeTopicPartitionsResponse)
	limit := req.ResponsePartitionLimit
	if limit <= 0 || limit > describeTopicPartitionsLimit {
		limit = describeTopicPartitionsLimit
	}
	type entry struct {
		name string
		t    *Topic
		code int16
	}
	var entries []entry
	if len(req.Topics) == 0 {
		for _, t := range s.cluster.topics() {
			// Topics the principal may not describe are left out.
			if s.authorized(r, authz.OpDescribe, authz.ResourceTopic, t.Name) {
				entries = append(entries, entry{name: t.Name, t: t})
			}
		}
	} else {
		names := make([]string, 0, len(req.Topics))
		for _, rt := range req.Topics {
			names = append(names, rt.Topic)
		}
		// Kafka sorts the requested names too, so a cursor is
		// meaningful across pages.
		sort.Strings(names)
		for _, n := range names {
			e := entry{name: n}
			if !s.authorized(r, authz.OpDescribe, authz.ResourceTopic, n) {
				e.code = kerr.TopicAuthorizationFailed.Code
			} else if err := validateTopicName(n); err != nil {
				e.code = kerr.InvalidTopicException.Code
			} else if e.t = s.cluster.topic(n); e.t == nil {
				e.code = kerr.UnknownTopicOrPartition.Code
			}
			entries = append(entries, e)
		}
	}
	startPartition := int32(0)
	if c := req.Cursor; c != nil {
		i := sort.Search(len(entries), func(i int) bool { return entries[i].name >= c.Topic })
		entries = entries[i:]
		if len(entries) > 0 && entries[0].name == c.Topic {
			startPartition = max(c.Partition, 0)
		}
	}
	remaining := limit
	for i, e := range entries {
		st := kmsg.NewDescribeTopicPartitionsResponseTopic()
		name := e.name
		st.Topic = &name
		if e.t == nil {
			st.ErrorCode = e.code
			resp.Topics = append(resp.Topics, st)
			continue
		}
		st.TopicID = e.t.ID
		st.IsInternal = isInternalTopic(e.t.Name)
		st.AuthorizedOperations = s.authorizedOps(r, authz.ResourceTopic, e.t.Name, topicAllOps)
		first := int32(0)
		if i == 0 {
			first = startPartition
		}
		parts := e.t.Partitions()
		snap := s.clusterSnapshot()
		p := first
		for ; int(p) < len(parts); p++ {
			if remaining == 0 {
				break
			}
			remaining--
			node := s.cfg.NodeID
			sp := kmsg.NewDescribeTopicPartitionsResponseTopicPartition()
			sp.Partition = p
			sp.LeaderID = node
			sp.LeaderEpoch = parts[p].LeaderEpoch()
			sp.Replicas = []int32{node}
			sp.ISR = []int32{node}
			sp.EligibleLeaderReplicas = []int32{}
			sp.LastKnownELR = []int32{}
			sp.OfflineReplicas = []int32{}
			if snap != nil {
				v := clusterPartition(snap, e.t, p, r.Listener, false)
				sp.ErrorCode, sp.LeaderID, sp.LeaderEpoch = v.code, v.leader, v.epoch
				sp.Replicas, sp.ISR, sp.OfflineReplicas = v.replicas, v.isr, v.offlines
			}
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
		if int(p) < len(parts) {
			resp.NextCursor = &kmsg.DescribeTopicPartitionsResponseNextCursor{Topic: e.name, Partition: p}
			break
		}
		if remaining == 0 && i+1 < len(entries) {
			resp.NextCursor = &kmsg.DescribeTopicPartitionsResponseNextCursor{Topic: entries[i+1].name, Partition: 0}
			break
		}
	}
	return resp, nil
}

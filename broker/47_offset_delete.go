package broker

// OffsetDelete (key 47), version 0.
//
// Behaviour: deletes committed offsets of a group (tombstones in
// __consumer_offsets), as Kafka (KIP-496): GROUP_ID_NOT_FOUND for an
// unknown group; for a consumer group with members, partitions of
// subscribed topics answer GROUP_SUBSCRIBED_TO_TOPIC and are kept; a
// non-consumer group with members answers NON_EMPTY_GROUP.
//
// Authorization (with the authorizer on, authorize.go): DELETE on the
// group, READ on each topic.
//
// Deviations from Apache Kafka: none known.

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/verbatim-kafka/verbatim/authz"
	"github.com/verbatim-kafka/verbatim/coordlog"
	"github.com/verbatim-kafka/verbatim/groupcoord"
)

func init() { register(kmsg.OffsetDelete.Int16(), 0, 0, handleOffsetDelete) }

func handleOffsetDelete(_ context.Context, s *Server, r *Request) (Reply, error) {
	req := r.Msg.(*kmsg.OffsetDeleteRequest)
	resp := req.ResponseKind().(*kmsg.OffsetDeleteResponse)
	if !s.authorized(r, authz.OpDelete, authz.ResourceGroup, req.Group) {
		resp.ErrorCode = kerr.GroupAuthorizationFailed.Code
		return resp, nil
	}
	// Partitions of topics the principal may not READ are answered
	// TOPIC_AUTHORIZATION_FAILED and not deleted.
	denied := make([]bool, len(req.Topics))
	var tps []groupcoord.OffsetCommit
	for ti, t := range req.Topics {
		if denied[ti] = !s.authorized(r, authz.OpRead, authz.ResourceTopic, t.Topic); denied[ti] {
			continue
		}
		for _, p := range t.Partitions {
			tps = append(tps, groupcoord.OffsetCommit{TP: coordlog.TopicPartition{Topic: t.Topic, Partition: p.Partition}})
		}
	}
	resp.ErrorCode = s.groups.DeleteOffsets(req.Group, tps)
	if resp.ErrorCode != 0 {
		return resp, nil
	}
	i := 0
	for ti, t := range req.Topics {
		rt := kmsg.NewOffsetDeleteResponseTopic()
		rt.Topic = t.Topic
		for _, p := range t.Partitions {
			rp := kmsg.NewOffsetDeleteResponseTopicPartition()
			if denied[ti] {
				rp.Partition, rp.ErrorCode = p.Partition, kerr.TopicAuthorizationFailed.Code
				rt.Partitions = append(rt.Partitions, rp)
				continue
			}
			rp.Partition, rp.ErrorCode = p.Partition, tps[i].Code
			i++
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp, nil
}

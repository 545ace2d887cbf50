package broker

// OffsetDelete (key 47), version 0.
//
// Behaviour: deletes committed offsets of a group (tombstones in
// __consumer_offsets), as Kafka (KIP-496): GROUP_ID_NOT_FOUND for an
// unknown group; for a consumer group with members, partitions of
// subscribed topics answer GROUP_SUBSCRIBED_TO_TOPIC and are kept; a
// non-consumer group with members answers NON_EMPTY_GROUP.
//
// Deviations from Apache Kafka: none known.

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/verbatim-kafka/verbatim/coordlog"
	"github.com/verbatim-kafka/verbatim/groupcoord"
)

func init() { register(kmsg.OffsetDelete.Int16(), 0, 0, handleOffsetDelete) }

func handleOffsetDelete(_ context.Context, s *Server, r *Request) (Reply, error) {
	req := r.Msg.(*kmsg.OffsetDeleteRequest)
	resp := req.ResponseKind().(*kmsg.OffsetDeleteResponse)
	var tps []groupcoord.OffsetCommit
	for _, t := range req.Topics {
		for _, p := range t.Partitions {
			tps = append(tps, groupcoord.OffsetCommit{TP: coordlog.TopicPartition{Topic: t.Topic, Partition: p.Partition}})
		}
	}
	resp.ErrorCode = s.groups.DeleteOffsets(req.Group, tps)
	if resp.ErrorCode != 0 {
		return resp, nil
	}
	i := 0
	for _, t := range req.Topics {
		rt := kmsg.NewOffsetDeleteResponseTopic()
		rt.Topic = t.Topic
		for _, p := range t.Partitions {
			rp := kmsg.NewOffsetDeleteResponseTopicPartition()
			rp.Partition, rp.ErrorCode = p.Partition, tps[i].Code
			i++
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp, nil
}

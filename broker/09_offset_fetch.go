package broker

// OffsetFetch (key 9), versions 1-9 (Kafka 4.x removed v0, KIP-896).
//
// Behaviour: committed offsets with their leader epoch (v5+) and metadata;
// a partition without a committed offset answers offset -1, epoch -1,
// empty metadata, no error; null topics (v2+) means every committed
// partition of the group. v7+ RequireStable: a partition with a
// transactional offset commit not yet decided answers
// UNSTABLE_OFFSET_COMMIT (the consumer retries). v8+: several groups per
// request, each answered separately. Member id/epoch (v9) are for the
// KIP-848 protocol, which is not served; they are ignored for classic
// groups.
//
// Authorization (with the authorizer on, authorize.go): DESCRIBE on the
// group and on each topic; topics without DESCRIBE are left out of all-
// partitions answers.
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

func init() { register(kmsg.OffsetFetch.Int16(), 1, 9, handleOffsetFetch) }

func handleOffsetFetch(_ context.Context, s *Server, r *Request) (Reply, error) {
	req := r.Msg.(*kmsg.OffsetFetchRequest)
	resp := req.ResponseKind().(*kmsg.OffsetFetchResponse)
	if req.Version >= 8 {
		for _, g := range req.Groups {
			var tps []coordlog.TopicPartition // nil: all the group's partitions
			if g.Topics != nil {
				tps = requestedPartitions(g.Topics, func(t *kmsg.OffsetFetchRequestGroupTopic) (string, []int32) { return t.Topic, t.Partitions })
			}
			code, offs := s.fetchOffsetsAuthorized(r, g.Group, tps, req.RequireStable)
			resp.Groups = append(resp.Groups, offsetFetchGroup(g.Group, code, offs))
		}
		return resp, nil
	}
	var tps []coordlog.TopicPartition // nil: all the group's partitions (v2+)
	if req.Topics != nil || req.Version < 2 {
		tps = requestedPartitions(req.Topics, func(t *kmsg.OffsetFetchRequestTopic) (string, []int32) { return t.Topic, t.Partitions })
	}
	code, offs := s.fetchOffsetsAuthorized(r, req.Group, tps, req.Version >= 7 && req.RequireStable)
	resp.ErrorCode = code
	// v0-7 answer one group in their own types, which hold the same
	// fields as v8's.
	for _, gt := range offsetFetchGroup(req.Group, code, offs).Topics {
		rt := kmsg.NewOffsetFetchResponseTopic()
		rt.Topic = gt.Topic
		for _, gp := range gt.Partitions {
			rp := kmsg.OffsetFetchResponseTopicPartition(gp)
			if code != 0 && req.Version < 2 {
				rp.ErrorCode = code
			}
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp, nil
}

// offsetFetchGroup is a group's answer (v8+) from its code and offsets,
// which come in topic order: one entry per topic.
func offsetFetchGroup(group string, code int16, offs []groupcoord.FetchedOffset) kmsg.OffsetFetchResponseGroup {
	rg := kmsg.NewOffsetFetchResponseGroup()
	rg.Group, rg.ErrorCode = group, code
	for _, f := range offs {
		if len(rg.Topics) == 0 || rg.Topics[len(rg.Topics)-1].Topic != f.TP.Topic {
			rt := kmsg.NewOffsetFetchResponseGroupTopic()
			rt.Topic = f.TP.Topic
			rg.Topics = append(rg.Topics, rt)
		}
		rp := kmsg.NewOffsetFetchResponseGroupTopicPartition()
		rp.Partition, rp.Offset, rp.LeaderEpoch, rp.ErrorCode = f.TP.Partition, f.Offset, f.Epoch, f.Code
		md := f.Metadata
		rp.Metadata = &md
		rt := &rg.Topics[len(rg.Topics)-1]
		rt.Partitions = append(rt.Partitions, rp)
	}
	return rg
}

// fetchOffsetsAuthorized is FetchOffsets behind Kafka's checks: DESCRIBE
// on the group (else GROUP_AUTHORIZATION_FAILED, with each requested
// partition so answered), DESCRIBE on each topic: a requested partition of
// a topic the principal may not describe is TOPIC_AUTHORIZATION_FAILED,
// and such topics are left out of an all-partitions answer.
func (s *Server) fetchOffsetsAuthorized(r *Request, group string, tps []coordlog.TopicPartition, requireStable bool) (int16, []groupcoord.FetchedOffset) {
	if !s.authorized(r, authz.OpDescribe, authz.ResourceGroup, group) {
		offs := make([]groupcoord.FetchedOffset, len(tps))
		for i, tp := range tps {
			offs[i] = groupcoord.FetchedOffset{TP: tp, Offset: -1, Epoch: -1, Code: kerr.GroupAuthorizationFailed.Code}
		}
		return kerr.GroupAuthorizationFailed.Code, offs
	}
	code, offs := s.groups.FetchOffsets(group, tps, requireStable)
	if s.acl == nil {
		return code, offs
	}
	denied := map[string]bool{}
	out := offs[:0]
	for _, f := range offs {
		d, ok := denied[f.TP.Topic]
		if !ok {
			d = !s.authorized(r, authz.OpDescribe, authz.ResourceTopic, f.TP.Topic)
			denied[f.TP.Topic] = d
		}
		switch {
		case d && tps == nil:
			continue
		case d:
			f = groupcoord.FetchedOffset{TP: f.TP, Offset: -1, Epoch: -1, Code: kerr.TopicAuthorizationFailed.Code}
		}
		out = append(out, f)
	}
	return code, out
}

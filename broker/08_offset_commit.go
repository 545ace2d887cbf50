package broker

// OffsetCommit (key 8), versions 2-9 (Kafka 4.x removed v0-1, KIP-896).
//
// Behaviour: stores committed offsets, their leader epoch (v6+; -1 below)
// and metadata as OffsetCommitKey/Value records in __consumer_offsets
// (groupcoord), as Kafka's group coordinator does:
//   - generation -1 with an empty or unknown group: a standalone commit
//     (no group management; the group is created empty);
//   - otherwise the member must be known (UNKNOWN_MEMBER_ID), a v7+
//     instance id held by it (UNKNOWN_MEMBER_ID when no member holds it,
//     FENCED_INSTANCE_ID when another does), the generation current
//     (ILLEGAL_GENERATION); during CompletingRebalance the answer is
//     REBALANCE_IN_PROGRESS; commits during PreparingRebalance with the
//     current generation are accepted;
//   - per partition: UNKNOWN_TOPIC_OR_PARTITION for partitions that do not
//     exist, OFFSET_METADATA_TOO_LARGE above 4096 bytes of metadata;
//   - offsets whose record hits a storage error (ENOSPC, an offline
//     __consumer_offsets partition): NOT_COORDINATOR, as Kafka's
//     coordinator runtime answers KAFKA_STORAGE_ERROR, logged once at ERROR
//     with the group's partition and the client.
//
// Authorization (with the authorizer on, authorize.go): READ on the group
// (GROUP_AUTHORIZATION_FAILED for every partition), READ on each topic
// (TOPIC_AUTHORIZATION_FAILED, not committed).
//
// Deviations from Apache Kafka: RetentionTimeMillis (v2-4) is ignored (the
// broker-wide offsets retention of 7 days applies, as Kafka does since
// 2.1 for v5+).

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/verbatim-kafka/verbatim/authz"
	"github.com/verbatim-kafka/verbatim/coordlog"
	"github.com/verbatim-kafka/verbatim/groupcoord"
)

func init() { register(kmsg.OffsetCommit.Int16(), 2, 9, handleOffsetCommit) }

func handleOffsetCommit(_ context.Context, s *Server, r *Request) (Reply, error) {
	req := r.Msg.(*kmsg.OffsetCommitRequest)
	resp := req.ResponseKind().(*kmsg.OffsetCommitResponse)
	groupDenied := !s.authorized(r, authz.OpRead, authz.ResourceGroup, req.Group)
	// codes are the partitions' answers in request order; -1 marks the
	// ones committed (their code is the commit's).
	var codes []int16
	var commits []groupcoord.OffsetCommit
	for _, t := range req.Topics {
		topic := s.cluster.topic(t.Topic)
		topicDenied := !groupDenied && !s.authorized(r, authz.OpRead, authz.ResourceTopic, t.Topic)
		for _, p := range t.Partitions {
			switch {
			case groupDenied:
				codes = append(codes, kerr.GroupAuthorizationFailed.Code)
				continue
			case topicDenied:
				codes = append(codes, kerr.TopicAuthorizationFailed.Code)
				continue
			}
			epoch := int32(-1)
			if req.Version >= 6 {
				epoch = p.LeaderEpoch
			}
			codes = append(codes, -1)
			commits = append(commits, newOffsetCommit(topic, t.Topic, p.Partition, p.Offset, epoch, p.Metadata))
		}
	}
	inst := req.InstanceID
	if req.Version < 7 {
		inst = nil
	}
	if len(commits) > 0 || !groupDenied && len(codes) == 0 {
		s.groups.CommitOffsets(req.Group, req.MemberID, inst, req.Generation, commits)
		s.logCommitFailure("offset commit", req.Group, commits, clientOf(r))
	}
	i, j := 0, 0
	for _, t := range req.Topics {
		rt := kmsg.NewOffsetCommitResponseTopic()
		rt.Topic = t.Topic
		for _, p := range t.Partitions {
			rp := kmsg.NewOffsetCommitResponseTopicPartition()
			rp.Partition, rp.ErrorCode = p.Partition, codes[i]
			if codes[i] == -1 {
				rp.ErrorCode = commits[j].Code
				j++
			}
			i++
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp, nil
}

// newOffsetCommit builds one partition's entry of an OffsetCommit or
// TxnOffsetCommit (leaderEpoch -1 when the request version has none),
// marked UNKNOWN_TOPIC_OR_PARTITION when topic (nil if unknown) lacks it.
func newOffsetCommit(topic *Topic, name string, partition int32, offset int64, leaderEpoch int32, metadata *string) groupcoord.OffsetCommit {
	oc := groupcoord.OffsetCommit{TP: coordlog.TopicPartition{Topic: name, Partition: partition}, Entry: groupcoord.OffsetEntry{Offset: offset, LeaderEpoch: leaderEpoch}}
	if metadata != nil {
		oc.Entry.Metadata = *metadata
	}
	if topic.Partition(partition) == nil {
		oc.Code = kerr.UnknownTopicOrPartition.Code
	}
	return oc
}

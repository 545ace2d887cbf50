package broker

// TxnOffsetCommit (key 28), versions 0-4.
//
// Behaviour: writes the offsets into __consumer_offsets as part of the
// producer's transaction (a transactional batch with its producer id and
// epoch); they are visible to OffsetFetch only after the COMMIT marker
// (dropped on ABORT), and OffsetFetch with RequireStable answers
// UNSTABLE_OFFSET_COMMIT for them meanwhile. Checks: the transaction must
// be ongoing with the group's offsets partition added (INVALID_TXN_STATE;
// AddOffsetsToTxn first), producer id and epoch current
// (INVALID_PRODUCER_ID_MAPPING, PRODUCER_FENCED), v3+ group member checks
// when a member id or generation is given (UNKNOWN_MEMBER_ID,
// ILLEGAL_GENERATION, FENCED_INSTANCE_ID); UNKNOWN_TOPIC_OR_PARTITION and
// OFFSET_METADATA_TOO_LARGE per partition. In cluster mode a transaction
// coordinated on another broker is checked there (AddPartitionsToTxn v4
// VerifyOnly, coordinators_peers.go).
//
// Authorization (with the authorizer on, authorize.go): WRITE on the
// transactional id, READ on the group and each topic.
//
// Deviations from Apache Kafka: v5+ (transaction version 2) is not
// advertised (docs/compat.md).

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/verbatim-kafka/verbatim/authz"
	"github.com/verbatim-kafka/verbatim/coordlog"
	"github.com/verbatim-kafka/verbatim/groupcoord"
)

func init() { register(kmsg.TxnOffsetCommit.Int16(), 0, 4, handleTxnOffsetCommit) }

func handleTxnOffsetCommit(_ context.Context, s *Server, r *Request) (Reply, error) {
	req := r.Msg.(*kmsg.TxnOffsetCommitRequest)
	resp := req.ResponseKind().(*kmsg.TxnOffsetCommitResponse)
	// Kafka's checks: WRITE on the transactional id, READ on the group
	// (each failing answers every partition), READ on each topic (its
	// partitions TOPIC_AUTHORIZATION_FAILED, not committed).
	var all int16
	switch {
	case !s.authorized(r, authz.OpWrite, authz.ResourceTransactionalID, req.TransactionalID):
		all = kerr.TransactionalIDAuthorizationFailed.Code
	case !s.authorized(r, authz.OpRead, authz.ResourceGroup, req.Group):
		all = kerr.GroupAuthorizationFailed.Code
	}
	var codes []int16 // -1: committed, its code is the commit's
	var commits []groupcoord.OffsetCommit
	for _, t := range req.Topics {
		topic := s.cluster.topic(t.Topic)
		denied := all == 0 && !s.authorized(r, authz.OpRead, authz.ResourceTopic, t.Topic)
		for _, p := range t.Partitions {
			switch {
			case all != 0:
				codes = append(codes, all)
				continue
			case denied:
				codes = append(codes, kerr.TopicAuthorizationFailed.Code)
				continue
			}
			codes = append(codes, -1)
			epoch := int32(-1)
			if req.Version >= 2 {
				epoch = p.LeaderEpoch
			}
			commits = append(commits, newOffsetCommit(topic, t.Topic, p.Partition, p.Offset, epoch, p.Metadata))
		}
	}
	if all == 0 && req.Group == "" {
		for i := range commits {
			commits[i].Code = kerr.InvalidGroupID.Code
		}
	} else if all == 0 {
		memberID, inst, gen := "", (*string)(nil), int32(-1)
		if req.Version >= 3 {
			memberID, inst, gen = req.MemberID, req.InstanceID, req.Generation
		}
		s.txnCommitOffsets(req.TransactionalID, req.ProducerID, req.ProducerEpoch, req.Group, memberID, inst, gen, commits)
		s.logCommitFailure("txn offset commit", req.Group, commits, clientOf(r))
	}
	i, j := 0, 0
	for _, t := range req.Topics {
		rt := kmsg.NewTxnOffsetCommitResponseTopic()
		rt.Topic = t.Topic
		for _, p := range t.Partitions {
			rp := kmsg.NewTxnOffsetCommitResponseTopicPartition()
			rp.Partition, rp.ErrorCode = p.Partition, codes[i]
			if codes[i] == -1 {
				rp.ErrorCode = fencedCode(commits[j].Code, req.Version, 2)
				j++
			}
			i++
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp, nil
}

// txnCommitOffsets checks the transaction (ongoing, with the group's
// offsets partition added) and then has the group coordinator write the
// offsets into it; the transaction cannot end in between, so no offsets
// are left that no marker decides. Neither coordinator's lock is held
// while the other runs.
//
// In cluster mode a transaction coordinated on another broker is checked
// there with AddPartitionsToTxn v4 VerifyOnly (as Kafka verifies the
// offsets partition); that transaction can then end before the offsets
// are written (see docs/cluster.md).
func (s *Server) txnCommitOffsets(txnID string, pid int64, epoch int16, groupID, memberID string, inst *string, gen int32, commits []groupcoord.OffsetCommit) {
	tp := coordlog.TopicPartition{Topic: offsetsTopic, Partition: s.groups.PartitionFor(groupID)}
	if node := s.txnCoordinatorNode(txnID); node != s.cfg.NodeID {
		code := s.verifyTxnOffsetsRemote(node, txnID, pid, epoch, tp)
		if code != 0 {
			for i := range commits {
				commits[i].Code = code
			}
			return
		}
		s.groups.TxnCommitOffsets(groupID, memberID, inst, gen, pid, epoch, commits)
		return
	}
	done, code := s.txns.BeginOffsetCommit(txnID, pid, epoch, tp)
	if code != 0 {
		for i := range commits {
			commits[i].Code = code
		}
		return
	}
	defer done()
	s.groups.TxnCommitOffsets(groupID, memberID, inst, gen, pid, epoch, commits)
}

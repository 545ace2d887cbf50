package broker

// AddOffsetsToTxn (key 25), versions 0-3.
//
// Behaviour: adds the group's __consumer_offsets partition to the
// producer's transaction (so its COMMIT/ABORT marker decides the offsets
// TxnOffsetCommit writes), with AddPartitionsToTxn's checks and errors.
// An empty group id gets INVALID_GROUP_ID.
//
// Authorization (with the authorizer on, authorize.go): WRITE on the
// transactional id, READ on the group.
//
// Deviations from Apache Kafka: v4 (transaction version 2) is not
// advertised (docs/compat.md).

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/verbatim-kafka/verbatim/authz"
	"github.com/verbatim-kafka/verbatim/coordlog"
)

func init() { register(kmsg.AddOffsetsToTxn.Int16(), 0, 3, handleAddOffsetsToTxn) }

func handleAddOffsetsToTxn(_ context.Context, s *Server, r *Request) (Reply, error) {
	req := r.Msg.(*kmsg.AddOffsetsToTxnRequest)
	resp := req.ResponseKind().(*kmsg.AddOffsetsToTxnResponse)
	switch {
	case !s.authorized(r, authz.OpWrite, authz.ResourceTransactionalID, req.TransactionalID):
		resp.ErrorCode = kerr.TransactionalIDAuthorizationFailed.Code
		return resp, nil
	case !s.authorized(r, authz.OpRead, authz.ResourceGroup, req.Group):
		resp.ErrorCode = kerr.GroupAuthorizationFailed.Code
		return resp, nil
	}
	if req.Group == "" {
		resp.ErrorCode = kerr.InvalidGroupID.Code
		return resp, nil
	}
	tp := coordlog.TopicPartition{Topic: offsetsTopic, Partition: s.groups.PartitionFor(req.Group)}
	codes := s.txns.AddPartitions(req.TransactionalID, req.ProducerID, req.ProducerEpoch, []coordlog.TopicPartition{tp}, false)
	resp.ErrorCode = fencedCode(codes[0], req.Version, 2)
	return resp, nil
}

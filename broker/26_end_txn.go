package broker

// EndTxn (key 26), versions 0-4.
//
// Behaviour: commits or aborts the producer's transaction
// (txncoord): PrepareCommit/PrepareAbort is persisted in
// __transaction_state, COMMIT/ABORT markers are written to every partition
// of the transaction (storage AppendCoordinator, with the coordinator
// epoch), the group offsets of a committed TxnOffsetCommit become visible,
// and CompleteCommit/CompleteAbort is persisted — all before the answer,
// so a read_committed consumer sees the outcome as soon as EndTxn returns.
// A retry of a completed EndTxn answers NONE; the opposite outcome
// answers INVALID_TXN_STATE; PRODUCER_FENCED (INVALID_PRODUCER_EPOCH for
// v0-1), INVALID_PRODUCER_ID_MAPPING, CONCURRENT_TRANSACTIONS as Kafka.
//
// Authorization (with the authorizer on, authorize.go): WRITE on the
// transactional id.
//
// Deviations from Apache Kafka: Kafka answers once Prepare* is durable and
// writes markers afterwards; here markers are written first (a partition
// whose marker fails is retried in the background, and EndTxn still
// succeeds once Prepare* is durable). v5 (transaction version 2) is not
// advertised (docs/compat.md).

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/verbatim-kafka/verbatim/authz"
)

func init() { register(kmsg.EndTxn.Int16(), 0, 4, handleEndTxn) }

func handleEndTxn(_ context.Context, s *Server, r *Request) (Reply, error) {
	req := r.Msg.(*kmsg.EndTxnRequest)
	resp := req.ResponseKind().(*kmsg.EndTxnResponse)
	if !s.authorized(r, authz.OpWrite, authz.ResourceTransactionalID, req.TransactionalID) {
		resp.ErrorCode = kerr.TransactionalIDAuthorizationFailed.Code
		resp.ProducerID, resp.ProducerEpoch = -1, -1
		return resp, nil
	}
	resp.ErrorCode = fencedCode(s.txns.EndTxn(req.TransactionalID, req.ProducerID, req.ProducerEpoch, req.Commit), req.Version, 2)
	resp.ProducerID, resp.ProducerEpoch = -1, -1
	return resp, nil
}

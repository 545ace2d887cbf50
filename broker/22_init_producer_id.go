package broker

// InitProducerId (key 22), versions 0-5.
//
// Behaviour:
//   - Idempotent producers (null TransactionalID) get a fresh producer id
//     with epoch 0 on every call, as Kafka allocates one for them; a
//     ProducerID/ProducerEpoch given with v3+ (KIP-360 epoch bump) is
//     ignored for idempotent producers, as in Kafka. Ids come from a
//     persisted block allocator (producerids.go), so they never repeat
//     across restarts or crashes; in cluster mode the blocks (1000 ids,
//     as Kafka's) are reserved in the cluster store, so no two brokers
//     hand out the same id.
//   - Transactional producers (TransactionalID set) are served by the
//     transaction coordinator (txncoord): a new id gets a fresh
//     producer id with epoch 0; an existing one gets its epoch bumped
//     (a new producer id once the epoch would reach 32767), which fences
//     older instances; an ongoing transaction of the id is aborted first
//     (epoch fence). v3+ (KIP-360): a given ProducerID/ProducerEpoch must
//     be the current pair (or the pair just replaced, for a retried bump)
//     else PRODUCER_FENCED. Errors: INVALID_REQUEST (empty id),
//     INVALID_TRANSACTION_TIMEOUT (<= 0 or above 15 minutes,
//     transaction.max.timeout.ms), CONCURRENT_TRANSACTIONS (markers being
//     written).
//
// Authorization (with the authorizer on, authorize.go): WRITE on the
// transactional id; idempotent producers IDEMPOTENT_WRITE on CLUSTER or
// WRITE on some topic.
//
// Deviations from Apache Kafka: v6 (KIP-939 two-phase commit) is not
// served.

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/verbatim-kafka/verbatim/authz"
)

func init() { register(kmsg.InitProducerID.Int16(), 0, 5, handleInitProducerID) }

func handleInitProducerID(_ context.Context, s *Server, r *Request) (Reply, error) {
	req := r.Msg.(*kmsg.InitProducerIDRequest)
	resp := req.ResponseKind().(*kmsg.InitProducerIDResponse)
	resp.ProducerID, resp.ProducerEpoch = -1, -1
	// Kafka's checks: WRITE on the transactional id; an idempotent
	// producer IDEMPOTENT_WRITE on CLUSTER or WRITE on some topic.
	switch {
	case req.TransactionalID != nil && !s.authorized(r, authz.OpWrite, authz.ResourceTransactionalID, *req.TransactionalID):
		resp.ErrorCode = kerr.TransactionalIDAuthorizationFailed.Code
		return resp, nil
	case req.TransactionalID == nil && !s.authorizedCluster(r, authz.OpIdempotentWrite) && !s.authorizedByType(r, authz.OpWrite, authz.ResourceTopic):
		resp.ErrorCode = kerr.ClusterAuthorizationFailed.Code
		return resp, nil
	}
	if req.TransactionalID != nil {
		reqPid, reqEpoch := int64(-1), int16(-1)
		if req.Version >= 3 {
			reqPid, reqEpoch = req.ProducerID, req.ProducerEpoch
		}
		res := s.txns.InitProducerID(*req.TransactionalID, req.TransactionTimeoutMillis, reqPid, reqEpoch)
		resp.ErrorCode, resp.ProducerID, resp.ProducerEpoch = fencedCode(res.Code, req.Version, 4), res.PID, res.Epoch
		return resp, nil
	}
	id, err := s.pids.allocate()
	if err != nil {
		s.log.Error("allocating producer id", "err", err)
		resp.ErrorCode, _ = errorToKafka(err)
		return resp, nil
	}
	resp.ProducerID, resp.ProducerEpoch = id, 0
	return resp, nil
}

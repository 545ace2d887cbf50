package broker

// InitProducerId (key 22), versions 0-5.
//
// Behaviour:
//   - Idempotent producers (null TransactionalID) get a fresh producer id
//     with epoch 0 on every call, as Kafka allocates one for them; a
//     ProducerID/ProducerEpoch given with v3+ (KIP-360 epoch bump) is
//     ignored for idempotent producers, as in Kafka. Ids come from a
//     persisted block allocator (producerids.go), so they never repeat
//     across restarts or crashes.
//   - Transactional producers are refused until transactions exist:
//     FindCoordinator is not advertised, so Java and franz-go clients fail
//     when they look up the transaction coordinator; a client that sends
//     InitProducerId with a transactional id anyway gets
//     UNSUPPORTED_VERSION, a non-retriable error both clients surface at
//     once (COORDINATOR_NOT_AVAILABLE would make them retry until their
//     timeout).
//
// Deviations from Apache Kafka: no transactions yet (issue: groups and
// transactions).

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func init() { register(kmsg.InitProducerID.Int16(), 0, 5, handleInitProducerID) }

func handleInitProducerID(_ context.Context, s *Server, r *Request) (Reply, error) {
	req := r.Msg.(*kmsg.InitProducerIDRequest)
	resp := req.ResponseKind().(*kmsg.InitProducerIDResponse)
	resp.ProducerID, resp.ProducerEpoch = -1, -1
	if req.TransactionalID != nil {
		resp.ErrorCode = kerr.UnsupportedVersion.Code
		s.log.Info("refused transactional producer: transactions are not supported yet", "transactional_id", *req.TransactionalID, "client_id", r.ClientID)
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

package broker

// FindCoordinator (key 10), versions 0-6 — a clean refusal until consumer
// groups and transactions exist.
//
// Behaviour: every lookup (group, transaction, share group; single key
// before v4, batched keys v4+) is answered with INVALID_REQUEST and a
// message saying groups/transactions are not supported yet. The error is
// not retriable, so clients fail at once with that message: the Java
// producer raises "Could not find a coordinator ... due to unexpected
// error: <message>", the Java consumer throws from poll(), franz-go returns
// the error. Consumers in assign mode without a group never send this.
//
// Why registered at all: without it franz-go still sends FindCoordinator,
// the broker closes the connection for the unknown key, and the client
// reports a misleading "is SASL missing?" error after retrying.
//
// Deviations from Apache Kafka: Kafka serves coordinators. Replaced by the
// groups and transactions issue.

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func init() { register(kmsg.FindCoordinator.Int16(), 0, 6, handleFindCoordinator) }

func coordinatorRefusal(typ int8) string {
	switch typ {
	case 1:
		return "Transactions are not supported by this Verbatim broker yet; use an idempotent (non-transactional) producer."
	default:
		return "Consumer groups are not supported by this Verbatim broker yet; consume in assign mode (explicit partitions, no group.id)."
	}
}

func handleFindCoordinator(_ context.Context, _ *Server, r *Request) (Reply, error) {
	req := r.Msg.(*kmsg.FindCoordinatorRequest)
	resp := req.ResponseKind().(*kmsg.FindCoordinatorResponse)
	msg := coordinatorRefusal(req.CoordinatorType)
	if req.Version < 4 {
		resp.ErrorCode = kerr.InvalidRequest.Code
		resp.ErrorMessage = &msg
		resp.NodeID, resp.Port = -1, -1
		return resp, nil
	}
	for _, key := range req.CoordinatorKeys {
		c := kmsg.NewFindCoordinatorResponseCoordinator()
		c.Key = key
		c.NodeID, c.Port = -1, -1
		c.ErrorCode = kerr.InvalidRequest.Code
		m := msg
		c.ErrorMessage = &m
		resp.Coordinators = append(resp.Coordinators, c)
	}
	return resp, nil
}

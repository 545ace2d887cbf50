package broker

// ListTransactions (key 66), versions 0-2.
//
// Behaviour: every transactional id with its producer id and state,
// filtered by states (unknown state names are returned in
// UnknownStateFilters and match nothing), producer ids, v1+ minimum
// running time of ongoing transactions (DurationFilterMillis >= 0), and
// v2+ a regular expression on the id (Java regex syntax is close to Go's
// RE2 for ordinary patterns; an invalid pattern answers INVALID_REQUEST).
//
// Authorization (with the authorizer on, authorize.go): transactional ids
// without DESCRIBE are left out.
//
// Deviations from Apache Kafka: patterns are RE2, not java.util.regex.

import (
	"context"
	"regexp"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/verbatim-kafka/verbatim/authz"
)

func init() { register(kmsg.ListTransactions.Int16(), 0, 2, handleListTransactions) }

func handleListTransactions(_ context.Context, s *Server, r *Request) (Reply, error) {
	req := r.Msg.(*kmsg.ListTransactionsRequest)
	resp := req.ResponseKind().(*kmsg.ListTransactionsResponse)
	minDur := time.Duration(-1)
	if req.Version >= 1 && req.DurationFilterMillis >= 0 {
		minDur = time.Duration(req.DurationFilterMillis) * time.Millisecond
	}
	var re *regexp.Regexp
	if req.Version >= 2 && req.TransactionalIDPattern != nil && *req.TransactionalIDPattern != "" {
		var err error
		if re, err = regexp.Compile("^(?:" + *req.TransactionalIDPattern + ")$"); err != nil {
			resp.ErrorCode = kerr.InvalidRequest.Code
			return resp, nil
		}
	}
	list, unknown := s.txns.List(req.StateFilters, req.ProducerIDFilters, minDur, re)
	resp.UnknownStateFilters = unknown
	for _, t := range list {
		if !s.authorized(r, authz.OpDescribe, authz.ResourceTransactionalID, t.ID) {
			continue // hidden, as Kafka filters them
		}
		ts := kmsg.NewListTransactionsResponseTransactionState()
		ts.TransactionalID, ts.ProducerID, ts.TransactionState = t.ID, t.PID, t.State
		resp.TransactionStates = append(resp.TransactionStates, ts)
	}
	return resp, nil
}

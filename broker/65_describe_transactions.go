package broker

// DescribeTransactions (key 65), version 0.
//
// Behaviour: per transactional id, its state (Kafka's names: Empty,
// Ongoing, PrepareCommit, PrepareAbort, CompleteCommit, CompleteAbort,
// PrepareEpochFence), timeout, start timestamp (-1 when no transaction is
// open), producer id and epoch, and the partitions of the open
// transaction. Unknown ids: TRANSACTIONAL_ID_NOT_FOUND.
//
// Authorization (with the authorizer on, authorize.go): DESCRIBE on the
// transactional id; its topics without DESCRIBE are left out.
//
// Deviations from Apache Kafka: none known.

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/verbatim-kafka/verbatim/authz"
)

func init() { register(kmsg.DescribeTransactions.Int16(), 0, 0, handleDescribeTransactions) }

func handleDescribeTransactions(_ context.Context, s *Server, r *Request) (Reply, error) {
	req := r.Msg.(*kmsg.DescribeTransactionsRequest)
	resp := req.ResponseKind().(*kmsg.DescribeTransactionsResponse)
	for _, id := range req.TransactionalIDs {
		d := kmsg.NewDescribeTransactionsResponseTransactionState()
		d.TransactionalID = id
		if !s.authorized(r, authz.OpDescribe, authz.ResourceTransactionalID, id) {
			d.ErrorCode = kerr.TransactionalIDAuthorizationFailed.Code
			resp.TransactionStates = append(resp.TransactionStates, d)
			continue
		}
		s.txns.Describe(id, &d)
		if s.acl != nil {
			// The transaction's topics the principal may not describe
			// are left out.
			kept := d.Topics[:0]
			for _, t := range d.Topics {
				if s.authorized(r, authz.OpDescribe, authz.ResourceTopic, t.Topic) {
					kept = append(kept, t)
				}
			}
			d.Topics = kept
		}
		resp.TransactionStates = append(resp.TransactionStates, d)
	}
	return resp, nil
}

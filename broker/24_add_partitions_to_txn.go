package broker

// AddPartitionsToTxn (key 24), versions 0-4.
//
// Behaviour: adds partitions to the producer's transaction
// (txncoord), persisted in __transaction_state before the answer;
// the first add starts the transaction (Ongoing, its timeout runs from
// here). Errors as Kafka: INVALID_PRODUCER_ID_MAPPING (unknown id or
// producer id), PRODUCER_FENCED (stale epoch; INVALID_PRODUCER_EPOCH for
// v0-1 clients, which predate PRODUCER_FENCED), CONCURRENT_TRANSACTIONS
// (markers of the previous transaction still being written),
// UNKNOWN_TOPIC_OR_PARTITION for missing partitions with
// OPERATION_NOT_ATTEMPTED for the rest. v4+ (KIP-890 part 1) carries
// several transactions and VerifyOnly: a verification answers per
// partition NONE when it is in the ongoing transaction of that producer
// and epoch, INVALID_TXN_STATE otherwise, and changes nothing.
//
// Authorization (with the authorizer on, authorize.go): WRITE on the
// transactional id and each topic; v4+ CLUSTER_ACTION on CLUSTER.
//
// Deviations from Apache Kafka: v5 (transaction version 2 clients) is not
// advertised: transaction.version 2 is not offered (docs/compat.md).

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/verbatim-kafka/verbatim/authz"
)

func init() { register(kmsg.AddPartitionsToTxn.Int16(), 0, 4, handleAddPartitionsToTxn) }

// fencedCode maps PRODUCER_FENCED for clients older than the error (v0-1
// of the transactional APIs), as Kafka does.
func fencedCode(code, version, since int16) int16 {
	if code == kerr.ProducerFenced.Code && version < since {
		return kerr.InvalidProducerEpoch.Code
	}
	return code
}

func handleAddPartitionsToTxn(_ context.Context, s *Server, r *Request) (Reply, error) {
	req := r.Msg.(*kmsg.AddPartitionsToTxnRequest)
	resp := req.ResponseKind().(*kmsg.AddPartitionsToTxnResponse)
	if req.Version < 4 {
		codes := s.addPartitionsCodes(r, req.TransactionalID, req.ProducerID, req.ProducerEpoch, req.Topics, false)
		i := 0
		for _, t := range req.Topics {
			rt := kmsg.NewAddPartitionsToTxnResponseTopic()
			rt.Topic = t.Topic
			for _, p := range t.Partitions {
				rp := kmsg.NewAddPartitionsToTxnResponseTopicPartition()
				rp.Partition, rp.ErrorCode = p, fencedCode(codes[i], req.Version, 2)
				i++
				rt.Partitions = append(rt.Partitions, rp)
			}
			resp.Topics = append(resp.Topics, rt)
		}
		return resp, nil
	}
	// v4+ comes from brokers verifying transactional produces: Kafka
	// asks CLUSTER_ACTION on CLUSTER of it.
	if !s.authorizedCluster(r, authz.OpClusterAction) {
		resp.ErrorCode = kerr.ClusterAuthorizationFailed.Code
		return resp, nil
	}
	for _, tx := range req.Transactions {
		topics := make([]kmsg.AddPartitionsToTxnRequestTopic, len(tx.Topics))
		for i, t := range tx.Topics {
			topics[i] = kmsg.AddPartitionsToTxnRequestTopic{Topic: t.Topic, Partitions: t.Partitions}
		}
		codes := s.addPartitionsCodes(r, tx.TransactionalID, tx.ProducerID, tx.ProducerEpoch, topics, tx.VerifyOnly)
		rtx := kmsg.NewAddPartitionsToTxnResponseTransaction()
		rtx.TransactionalID = tx.TransactionalID
		i := 0
		for _, t := range tx.Topics {
			rt := kmsg.NewAddPartitionsToTxnResponseTransactionTopic()
			rt.Topic = t.Topic
			for _, p := range t.Partitions {
				rp := kmsg.NewAddPartitionsToTxnResponseTransactionTopicPartition()
				rp.Partition, rp.ErrorCode = p, codes[i]
				i++
				rt.Partitions = append(rt.Partitions, rp)
			}
			rtx.Topics = append(rtx.Topics, rt)
		}
		resp.Transactions = append(resp.Transactions, rtx)
	}
	return resp, nil
}

// addPartitionsCodes answers the partitions of one transaction (v0-3's
// request, or one of v4's transactions), a code per partition in request
// order: the refusals when the authorizer denies any, else the
// coordinator's.
func (s *Server) addPartitionsCodes(r *Request, txnID string, pid int64, epoch int16, topics []kmsg.AddPartitionsToTxnRequestTopic, verifyOnly bool) []int16 {
	if s.acl != nil {
		if codes, denied := s.addPartitionsRefusal(r, txnID, topics); denied {
			return codes
		}
	}
	tps := requestedPartitions(topics, func(t *kmsg.AddPartitionsToTxnRequestTopic) (string, []int32) { return t.Topic, t.Partitions })
	return s.txns.AddPartitions(txnID, pid, epoch, tps, verifyOnly)
}

// addPartitionsRefusal is Kafka's check of one transaction's partitions:
// WRITE on the transactional id (else every partition
// TRANSACTIONAL_ID_AUTHORIZATION_FAILED), WRITE on each topic (else its
// partitions TOPIC_AUTHORIZATION_FAILED, the others of the request
// OPERATION_NOT_ATTEMPTED, and nothing is added). codes are in request
// order; denied reports whether any check failed.
func (s *Server) addPartitionsRefusal(r *Request, txnID string, topics []kmsg.AddPartitionsToTxnRequestTopic) (codes []int16, denied bool) {
	txnDenied := !s.authorized(r, authz.OpWrite, authz.ResourceTransactionalID, txnID)
	topicDenied := make([]bool, len(topics))
	for i, t := range topics {
		if !txnDenied && !s.authorized(r, authz.OpWrite, authz.ResourceTopic, t.Topic) {
			topicDenied[i], denied = true, true
		}
	}
	denied = denied || txnDenied
	if !denied {
		return nil, false
	}
	for i, t := range topics {
		code := kerr.OperationNotAttempted.Code
		switch {
		case txnDenied:
			code = kerr.TransactionalIDAuthorizationFailed.Code
		case topicDenied[i]:
			code = kerr.TopicAuthorizationFailed.Code
		case s.cluster.topic(t.Topic) == nil:
			code = kerr.UnknownTopicOrPartition.Code
		}
		for range t.Partitions {
			codes = append(codes, code)
		}
	}
	return codes, true
}

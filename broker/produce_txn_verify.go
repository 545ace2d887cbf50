package broker

// Transaction verification of produce (KIP-890 part 1, on by default in
// Kafka 4.x as transaction.partition.verification.enable=true): a
// transactional batch sent with a transactional id is appended only if
// the transaction coordinator has the partition in that producer's ongoing
// transaction. A local coordinator (every one on a single node) is asked
// directly (the AddPartitionsToTxn v4 VerifyOnly logic); in cluster mode
// one on another broker is asked with AddPartitionsToTxn v4 VerifyOnly.

import (
	"encoding/binary"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/verbatim-kafka/verbatim/clustermeta"
	"github.com/verbatim-kafka/verbatim/coordlog"
	"github.com/verbatim-kafka/verbatim/kbatch"
)

// verifyTxnProduce checks a normal-mode record set (one batch, validated
// by the hot path) against the transaction coordinator. Sets that are not
// transactional, or sent without a transactional id, are not verified
// (Kafka verifies only when both are present).
func (s *Server) verifyTxnProduce(txnID []byte, p *Partition, set []byte) error {
	if txnID == nil || len(set) < kbatch.HeaderSize || kbatch.Attributes(set)&kbatch.TransactionalBit == 0 {
		return nil
	}
	pid := int64(binary.BigEndian.Uint64(set[kbatch.ProducerIDOffset:]))
	epoch := int16(binary.BigEndian.Uint16(set[kbatch.ProducerEpochOffset:]))
	tp := coordlog.TopicPartition{Topic: p.Topic.Name, Partition: p.Index}
	switch node := s.txnCoordinatorNode(string(txnID)); node {
	case s.cfg.NodeID:
	case clustermeta.NoLeader:
		return txnVerifyError(kerr.CoordinatorNotAvailable.Code)
	default:
		// Cluster mode: the coordinator is on another broker
		// (coordinators_peers.go).
		return txnVerifyError(s.verifyTxnRemote(node, string(txnID), pid, epoch, tp))
	}
	codes := s.txns.AddPartitions(string(txnID), pid, epoch, []coordlog.TopicPartition{tp}, true)
	return txnVerifyError(codes[0])
}

// txnVerifyError maps a verification result to the produce error Kafka
// gives a transaction version 1 producer: PRODUCER_FENCED becomes
// INVALID_PRODUCER_EPOCH (what producers handle there), and retriable
// coordinator states become NOT_ENOUGH_REPLICAS, which older producers
// retry without a metadata refresh.
func txnVerifyError(code int16) error {
	switch code {
	case 0:
		return nil
	case kerr.InvalidTxnState.Code:
		return kafkaErr(kerr.InvalidTxnState, "Partition was not added to the transaction")
	case kerr.ProducerFenced.Code:
		return kafkaErr(kerr.InvalidProducerEpoch, "producer epoch is not the transaction's current epoch")
	case kerr.ConcurrentTransactions.Code, kerr.NotCoordinator.Code, kerr.CoordinatorNotAvailable.Code,
		kerr.CoordinatorLoadInProgress.Code, kerr.NetworkException.Code:
		return kafkaErr(kerr.NotEnoughReplicas, "Unable to verify the partition has been added to the transaction. Underlying error: "+kerr.ErrorForCode(code).Error())
	}
	ke, ok := kerr.ErrorForCode(code).(*kerr.Error)
	if !ok {
		ke = kerr.UnknownServerError
	}
	return kafkaErr(ke, "transaction verification failed")
}

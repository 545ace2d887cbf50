package broker

import (
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// A transactional produce is appended only to a partition in the
// producer's ongoing transaction (Kafka 4.x verification, TV1 errors).
func TestTxnProduceVerifiedAgainstCoordinator(t *testing.T) {
	b := startBroker(t, t.TempDir(), nil)
	createTopic(t, b, "tv", 2, nil)
	id := "verified"
	pid, epoch := openRawTxn(t, b, id, "tv") // adds tv/0, writes 2 records there
	send := func(part int32, txnID *string, p int64, e int16, seq int32) kmsg.ProduceResponseTopicPartition {
		t.Helper()
		req := produceRequest(9, "tv", part, rawTxnBatch(t, p, e, seq, "v"))
		req.TransactionID = txnID
		return rawRequest[*kmsg.ProduceResponse](t, b, req).Topics[0].Partitions[0]
	}
	// tv/1 was never added: refused, nothing appended.
	r := send(1, &id, pid, epoch, 0)
	if r.ErrorCode != kerr.InvalidTxnState.Code || r.ErrorMessage == nil || !strings.Contains(*r.ErrorMessage, "not added to the transaction") {
		t.Fatalf("unadded partition: %+v", r)
	}
	if end := listOffsetT(t, b, "tv", 1, -1); end != 0 {
		t.Fatalf("tv/1 log end %d after a refused produce", end)
	}
	// A stale epoch is INVALID_PRODUCER_EPOCH (what a TV1 producer
	// expects here), an unknown transactional id
	// INVALID_PRODUCER_ID_MAPPING.
	if r := send(0, &id, pid, epoch-1, 2); r.ErrorCode != kerr.InvalidProducerEpoch.Code {
		t.Fatalf("stale epoch: %+v", r)
	}
	other := "never-initialised"
	if r := send(0, &other, pid, epoch, 2); r.ErrorCode != kerr.InvalidProducerIDMapping.Code {
		t.Fatalf("unknown transactional id: %+v", r)
	}
	// The added partition takes the next batch.
	if r := send(0, &id, pid, epoch, 2); r.ErrorCode != 0 || r.BaseOffset != 2 {
		t.Fatalf("added partition: %+v", r)
	}
	// Once the transaction is committed, the partition is no longer in
	// one: a further transactional batch is refused until it is added
	// again.
	ereq := kmsg.NewPtrEndTxnRequest()
	ereq.Version = 3
	ereq.TransactionalID, ereq.ProducerID, ereq.ProducerEpoch, ereq.Commit = id, pid, epoch, true
	if eresp, err := ereq.RequestWith(ctxT(t), b.client()); err != nil || eresp.ErrorCode != 0 {
		t.Fatalf("end txn: %v %+v", err, eresp)
	}
	if r := send(0, &id, pid, epoch, 3); r.ErrorCode != kerr.InvalidTxnState.Code {
		t.Fatalf("after commit: %+v", r)
	}
	if end := listOffsetT(t, b, "tv", 0, -1); end != 4 { // 3 records + the commit marker
		t.Fatalf("tv/0 log end %d, want 4", end)
	}
}

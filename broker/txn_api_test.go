package broker

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/verbatim-kafka/verbatim/coordlog"
	"github.com/verbatim-kafka/verbatim/coordlog/coordlogtest"
	"github.com/verbatim-kafka/verbatim/groupcoord"
)

func txnVerifyOnlyAndOffsetCommitChecks(t *testing.T, clk *coordlogtest.Clock, b *testBroker) {
	createTopic(t, b, "vo", 2, nil)
	pid, epoch := openRawTxn(t, b, "vo-tx", "vo")
	// KIP-890 verification (v4): partition 0 is in the transaction,
	// partition 1 is not; a stale epoch is fenced. Nothing is added.
	req := kmsg.NewPtrAddPartitionsToTxnRequest()
	req.Version = 4
	tx := kmsg.NewAddPartitionsToTxnRequestTransaction()
	tx.TransactionalID, tx.ProducerID, tx.ProducerEpoch, tx.VerifyOnly = "vo-tx", pid, epoch, true
	tx.Topics = []kmsg.AddPartitionsToTxnRequestTransactionTopic{{Topic: "vo", Partitions: []int32{0, 1}}}
	stale := tx
	stale.ProducerEpoch = epoch - 1
	stale.Topics = []kmsg.AddPartitionsToTxnRequestTransactionTopic{{Topic: "vo", Partitions: []int32{0}}}
	req.Transactions = []kmsg.AddPartitionsToTxnRequestTransaction{tx}
	resp := rawRequest[*kmsg.AddPartitionsToTxnResponse](t, b, req)
	got := resp.Transactions[0].Topics[0].Partitions
	if got[0].ErrorCode != 0 || got[1].ErrorCode != kerr.InvalidTxnState.Code {
		t.Fatalf("verify: %+v", got)
	}
	req.Transactions = []kmsg.AddPartitionsToTxnRequestTransaction{stale}
	if resp := rawRequest[*kmsg.AddPartitionsToTxnResponse](t, b, req); resp.Transactions[0].Topics[0].Partitions[0].ErrorCode != kerr.ProducerFenced.Code {
		t.Fatalf("verify with a stale epoch: %+v", resp.Transactions[0])
	}
	if s := describeTxn(t, b, "vo-tx"); len(s.Topics) != 1 || len(s.Topics[0].Partitions) != 1 {
		t.Fatalf("verification changed the transaction: %+v", s)
	}
	// TxnOffsetCommit before AddOffsetsToTxn: INVALID_TXN_STATE.
	treq := kmsg.NewPtrTxnOffsetCommitRequest()
	treq.Version = 3
	treq.TransactionalID, treq.Group, treq.ProducerID, treq.ProducerEpoch, treq.Generation = "vo-tx", "vo-g", pid, epoch, -1
	treq.Topics = []kmsg.TxnOffsetCommitRequestTopic{{Topic: "vo", Partitions: []kmsg.TxnOffsetCommitRequestTopicPartition{{Partition: 0, Offset: 1}}}}
	if r := rawRequest[*kmsg.TxnOffsetCommitResponse](t, b, treq); r.Topics[0].Partitions[0].ErrorCode != kerr.InvalidTxnState.Code {
		t.Fatalf("txn offset commit without AddOffsetsToTxn: %+v", r.Topics)
	}
	// Unknown producer id mapping and wrong end state.
	ereq := kmsg.NewPtrEndTxnRequest()
	ereq.Version = 3
	ereq.TransactionalID, ereq.ProducerID, ereq.ProducerEpoch, ereq.Commit = "vo-tx", pid+1, epoch, true
	if r := rawRequest[*kmsg.EndTxnResponse](t, b, ereq); r.ErrorCode != kerr.InvalidProducerIDMapping.Code {
		t.Fatalf("end with another producer id: %+v", r)
	}
	ereq.ProducerID, ereq.Commit = pid, false
	if r := rawRequest[*kmsg.EndTxnResponse](t, b, ereq); r.ErrorCode != 0 {
		t.Fatalf("abort: %+v", r)
	}
	if r := rawRequest[*kmsg.EndTxnResponse](t, b, ereq); r.ErrorCode != 0 {
		t.Fatalf("retried abort: %+v", r)
	}
	ereq.Commit = true
	if r := rawRequest[*kmsg.EndTxnResponse](t, b, ereq); r.ErrorCode != kerr.InvalidTxnState.Code {
		t.Fatalf("commit after abort: %+v", r)
	}
	// InitProducerId with a bad timeout, and KIP-360 with a wrong pair.
	ireq := kmsg.NewPtrInitProducerIDRequest()
	ireq.Version = 4
	ireq.TransactionalID, ireq.TransactionTimeoutMillis = sp("vo-tx"), int32((16 * time.Minute).Milliseconds())
	if r := rawRequest[*kmsg.InitProducerIDResponse](t, b, ireq); r.ErrorCode != kerr.InvalidTransactionTimeout.Code {
		t.Fatalf("long timeout: %+v", r)
	}
	ireq.TransactionTimeoutMillis, ireq.ProducerID, ireq.ProducerEpoch = 60000, pid, epoch+5
	if r := rawRequest[*kmsg.InitProducerIDResponse](t, b, ireq); r.ErrorCode != kerr.ProducerFenced.Code {
		t.Fatalf("KIP-360 with a wrong epoch: %+v", r)
	}
	ireq.ProducerEpoch = epoch
	r := rawRequest[*kmsg.InitProducerIDResponse](t, b, ireq)
	if r.ErrorCode != 0 || r.ProducerID != pid || r.ProducerEpoch != epoch+1 {
		t.Fatalf("KIP-360 bump: %+v", r)
	}
	// A retry of that bump (the client lost the answer) gets the same pair.
	if r2 := rawRequest[*kmsg.InitProducerIDResponse](t, b, ireq); r2.ErrorCode != 0 || r2.ProducerEpoch != r.ProducerEpoch {
		t.Fatalf("retried bump: %+v", r2)
	}
}

func TestGroupOffsetsRetention(t *testing.T) {
	clk := coordlogtest.NewClock(time.Now())
	dir := t.TempDir()
	b := startClockBroker(t, dir, clk)
	createTopic(t, b, "ret", 1, nil)
	c := b.srv.groups
	commits := []groupcoord.OffsetCommit{{TP: coordlog.TopicPartition{Topic: "ret", Partition: 0}, Entry: groupcoord.OffsetEntry{Offset: 3, LeaderEpoch: -1}}}
	c.CommitOffsets("old", "", nil, -1, commits)
	c.Tick(clk.Advance(3 * 24 * time.Hour))
	commits = []groupcoord.OffsetCommit{{TP: coordlog.TopicPartition{Topic: "ret", Partition: 0}, Entry: groupcoord.OffsetEntry{Offset: 4, LeaderEpoch: -1}}}
	c.CommitOffsets("young", "", nil, -1, commits)
	c.Tick(clk.Advance(4*24*time.Hour + time.Minute))
	if got := committed(t, b, "old"); len(got) != 0 {
		t.Fatalf("offsets older than 7 days kept: %v", got)
	}
	if got := committed(t, b, "young"); got[0] != 4 {
		t.Fatalf("young offsets: %v", got)
	}
	lg, err := b.admin().ListGroups(ctxT(t))
	if err != nil || lg["old"].Group != "" || lg["young"].Group != "young" {
		t.Fatalf("groups after expiry: %v %+v", err, lg)
	}
	// The expiry is durable: a restart replays the tombstones.
	b.stop()
	b = startClockBroker(t, dir, clk)
	if got := committed(t, b, "old"); len(got) != 0 {
		t.Fatalf("expired offsets back after restart: %v", got)
	}
}

// An __consumer_offsets created by a client (here with 3 partitions) is
// used as it is: keys are spread over its own partition count.
func TestGroupOffsetsTopicCreatedByClient(t *testing.T) {
	dir := t.TempDir()
	b := startGroupBroker(t, dir)
	createTopic(t, b, offsetsTopic, 3, nil)
	createTopic(t, b, "oc", 1, nil)
	for i := 0; i < 6; i++ {
		g := "client-made-" + string(rune('a'+i))
		commits := []groupcoord.OffsetCommit{{TP: coordlog.TopicPartition{Topic: "oc", Partition: 0}, Entry: groupcoord.OffsetEntry{Offset: int64(i), LeaderEpoch: -1}}}
		b.srv.groups.CommitOffsets(g, "", nil, -1, commits)
		if commits[0].Code != 0 {
			t.Fatalf("commit %s: %d", g, commits[0].Code)
		}
		if p := b.srv.groups.PartitionFor(g); p < 0 || p >= 3 {
			t.Fatalf("group %s mapped to partition %d of 3", g, p)
		}
	}
	b.stop()
	b = startGroupBroker(t, dir)
	for i := 0; i < 6; i++ {
		if got := committed(t, b, "client-made-"+string(rune('a'+i))); got[0] != int64(i) {
			t.Fatalf("group %d after restart: %v", i, got)
		}
	}
}

package broker

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/verbatim-kafka/verbatim/coordlog/coordlogtest"
	"github.com/verbatim-kafka/verbatim/txncoord"
)

// Producer ids of new local producers start above every producer id found
// in the logs (a mirrored or foreign producer id included), at start and,
// while running, after the coordinator's periodic scan.
func TestTxnProducerIDsStartAboveLoggedIDs(t *testing.T) {
	clk := coordlogtest.NewClock(time.Now())
	dir := t.TempDir()
	b := startClockBroker(t, dir, clk)
	createTopic(t, b, "pids", 1, nil)
	pr := produceOne(t, b, 9, "pids", 0, encodeBatch(t, 0, 70000, 0, []byte("x")))
	if pr.ErrorCode != 0 {
		t.Fatalf("produce: %d", pr.ErrorCode)
	}
	initPID := func(b *testBroker, txnID *string) int64 {
		t.Helper()
		req := kmsg.NewPtrInitProducerIDRequest()
		req.TransactionalID, req.TransactionTimeoutMillis = txnID, 60000
		resp, err := req.RequestWith(ctxT(t), b.client())
		if err != nil || resp.ErrorCode != 0 {
			t.Fatalf("init producer id: %v %+v", err, resp)
		}
		return resp.ProducerID
	}
	if id := initPID(b, nil); id > 70000 {
		t.Fatalf("allocator moved before its scan: %d", id)
	}
	b.srv.txns.Tick(clk.Advance(txncoord.PIDScanInterval))
	if id := initPID(b, nil); id <= 70000 {
		t.Fatalf("idempotent id %d after the scan, want > 70000", id)
	}
	pr = produceOne(t, b, 9, "pids", 0, encodeBatch(t, 0, 90000, 0, []byte("y")))
	if pr.ErrorCode != 0 {
		t.Fatalf("produce: %d", pr.ErrorCode)
	}
	b.stop()
	b = startClockBroker(t, dir, clk)
	if id := initPID(b, sp("tx-after-restart")); id <= 90000 {
		t.Fatalf("transactional id %d after restart, want > 90000", id)
	}
}

func txnDescribeProducersShowsOpenTransaction(t *testing.T, clk *coordlogtest.Clock, b *testBroker) {
	createTopic(t, b, "dp", 1, nil)
	pid, epoch := openRawTxn(t, b, "dp-tx", "dp")
	req := kmsg.NewPtrDescribeProducersRequest()
	req.Topics = []kmsg.DescribeProducersRequestTopic{{Topic: "dp", Partitions: []int32{0, 5}}}
	resp := rawRequest[*kmsg.DescribeProducersResponse](t, b, req)
	ps := resp.Topics[0].Partitions
	if len(ps) != 2 || ps[0].ErrorCode != 0 || len(ps[0].ActiveProducers) != 1 || ps[1].ErrorCode == 0 {
		t.Fatalf("describe producers: %+v", ps)
	}
	ap := ps[0].ActiveProducers[0]
	if ap.ProducerID != pid || ap.ProducerEpoch != int32(epoch) || ap.CurrentTxnStartOffset != 0 || ap.LastSequence != 1 {
		t.Fatalf("active producer: %+v", ap)
	}
}

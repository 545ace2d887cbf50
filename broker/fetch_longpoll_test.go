package broker

import (
	"context"
	"math"
	"testing"
)

// An append that lands after a fetch found too little but before its long
// poll registered for wake-ups is seen at once: the long poll reads again
// after registering. Without that the fetch slept until MaxWait (kafka-go's
// nettest PingPong stalled 30 s on it). The context is already done, so a
// long poll that does not read again answers with an error instead.
func TestFetchLongPollSeesAppendBeforeWait(t *testing.T) {
	b := startBroker(t, t.TempDir(), nil)
	createTopic(t, b, "lp", 1, nil)
	req := fetchReq(12, "lp", 0, 0)
	req.MinBytes, req.MaxWaitMillis = 1, math.MaxInt32
	reply, err := handleFetch(context.Background(), b.srv, &Request{Key: 1, Version: 12, Msg: req})
	if err != nil {
		t.Fatal(err)
	}
	d, ok := reply.(deferredAdapter)
	if !ok {
		t.Fatalf("an empty partition answered at once: %T", reply)
	}
	if r := produceOne(t, b, 9, "lp", 0, encodeBatch(t, 0, -1, -1, []byte("late"))); r.ErrorCode != 0 {
		t.Fatal(r.ErrorCode)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	got, err := d.Await(ctx)
	if err != nil {
		t.Fatalf("long poll missed the append: %v", err)
	}
	fr := got.(*fetchReply)
	defer fr.Release()
	if p := fr.resp.Topics[0].Partitions[0]; p.ErrorCode != 0 || len(p.RecordBatches) == 0 {
		t.Fatalf("long poll answer: %+v", p)
	}
}

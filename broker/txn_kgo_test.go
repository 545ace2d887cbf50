package broker

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/verbatim-kafka/verbatim/coordlog"
	"github.com/verbatim-kafka/verbatim/coordlog/coordlogtest"
	"github.com/verbatim-kafka/verbatim/kbatch"
	"github.com/verbatim-kafka/verbatim/kbatch/kbatchtest"
)

// startClockBroker starts a broker whose coordinators read clk.
func startClockBroker(t *testing.T, dir string, clk *coordlogtest.Clock) *testBroker {
	t.Helper()
	old := newCoordClock
	newCoordClock = func() coordlog.Clock { return clk }
	t.Cleanup(func() { newCoordClock = old })
	return startGroupBroker(t, dir)
}

func readAll(t *testing.T, b *testBroker, topic string, committed bool, want int) []*kgo.Record {
	t.Helper()
	opts := []kgo.Opt{kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart())}
	if committed {
		opts = append(opts, kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	}
	cl := b.client(opts...)
	var out []*kgo.Record
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	for len(out) < want {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			break
		}
		if err := fs.Err0(); err != nil {
			t.Fatal(err)
		}
		out = append(out, fs.Records()...)
	}
	// Nothing more arrives (an aborted record would come now).
	ctx2, cancel2 := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel2()
	out = append(out, cl.PollFetches(ctx2).Records()...)
	return out
}

func txnCommitAbortReadCommitted(t *testing.T, clk *coordlogtest.Clock, b *testBroker) {
	createTopic(t, b, "tx", 2, nil)
	cl := b.client(kgo.TransactionalID("t1"), kgo.DefaultProduceTopic("tx"), kgo.RequestRetries(5))
	run := func(prefix string, n int, commit bool) {
		t.Helper()
		if err := cl.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		for i := 0; i < n; i++ {
			if err := cl.ProduceSync(ctxT(t), &kgo.Record{Key: []byte(fmt.Sprint(i)), Value: []byte(fmt.Sprint(prefix, i))}).FirstErr(); err != nil {
				t.Fatal(err)
			}
		}
		if err := cl.EndTransaction(ctxT(t), kgo.TransactionEndTry(commit)); err != nil {
			t.Fatal(err)
		}
	}
	run("c", 10, true)
	run("a", 5, false)
	run("d", 3, true)
	got := readAll(t, b, "tx", true, 13)
	if len(got) != 13 {
		t.Fatalf("read_committed got %d records, want 13", len(got))
	}
	for _, r := range got {
		if r.Value[0] == 'a' {
			t.Fatalf("aborted record %s seen by read_committed", r.Value)
		}
	}
	if n := len(readAll(t, b, "tx", false, 18)); n != 18 {
		t.Fatalf("read_uncommitted got %d records, want 18", n)
	}
	// Every partition's LSO reached the log end: nothing hangs.
	for p := int32(0); p < 2; p++ {
		lp := listOffsetsPart(t, b, 9, "tx", p, -1, 1)
		if lp.ErrorCode != 0 || lp.Offset != listOffsetT(t, b, "tx", p, -1) {
			t.Fatalf("partition %d: LSO %d vs end %d", p, lp.Offset, listOffsetT(t, b, "tx", p, -1))
		}
	}
	// DescribeTransactions and ListTransactions see the id.
	dreq := kmsg.NewPtrDescribeTransactionsRequest()
	dreq.TransactionalIDs = []string{"t1", "nope"}
	dresp, err := dreq.RequestWith(ctxT(t), b.client())
	if err != nil {
		t.Fatal(err)
	}
	if s := dresp.TransactionStates[0]; s.ErrorCode != 0 || s.State != "CompleteCommit" || s.ProducerID < 0 || s.StartTimestamp != -1 {
		t.Fatalf("describe: %+v", s)
	}
	if s := dresp.TransactionStates[1]; s.ErrorCode != kerr.TransactionalIDNotFound.Code {
		t.Fatalf("describe unknown: %+v", s)
	}
	lreq := kmsg.NewPtrListTransactionsRequest()
	lreq.StateFilters = []string{"CompleteCommit", "Bogus"}
	lresp, err := lreq.RequestWith(ctxT(t), b.client())
	if err != nil || len(lresp.TransactionStates) != 1 || lresp.TransactionStates[0].TransactionalID != "t1" ||
		len(lresp.UnknownStateFilters) != 1 {
		t.Fatalf("list: %v %+v", err, lresp)
	}
}

func txnFencingOfZombie(t *testing.T, clk *coordlogtest.Clock, b *testBroker) {
	createTopic(t, b, "fz", 1, nil)
	old := b.client(kgo.TransactionalID("z"), kgo.DefaultProduceTopic("fz"))
	if err := old.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := old.ProduceSync(ctxT(t), &kgo.Record{Value: []byte("zombie")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	// A new instance with the same id: its InitProducerId aborts the
	// zombie's transaction and bumps the epoch.
	fresh := b.client(kgo.TransactionalID("z"), kgo.DefaultProduceTopic("fz"))
	if err := fresh.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := fresh.ProduceSync(ctxT(t), &kgo.Record{Value: []byte("fresh")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	if err := fresh.EndTransaction(ctxT(t), kgo.TryCommit); err != nil {
		t.Fatal(err)
	}
	err := old.EndTransaction(ctxT(t), kgo.TryCommit)
	if !errors.Is(err, kerr.ProducerFenced) && !errors.Is(err, kerr.InvalidProducerEpoch) {
		t.Fatalf("zombie commit: %v", err)
	}
	got := readAll(t, b, "fz", true, 1)
	if len(got) != 1 || string(got[0].Value) != "fresh" {
		t.Fatalf("read_committed: %d records", len(got))
	}
}

// rawTxnBatch is one transactional batch of producer pid/epoch.
func rawTxnBatch(t *testing.T, pid int64, epoch int16, seq int32, values ...string) []byte {
	t.Helper()
	var recs []kbatch.Record
	for i, v := range values {
		recs = append(recs, kbatch.Record{OffsetDelta: int32(i), Value: []byte(v)})
	}
	bt := kbatch.NewBatch(time.Now().UnixMilli(), recs...)
	bt.ProducerID, bt.ProducerEpoch, bt.BaseSequence = pid, epoch, seq
	bt.Attributes |= kbatch.TransactionalBit
	return kbatchtest.Encode(t, bt)
}

// openRawTxn starts a transaction by hand: InitProducerId, AddPartitionsToTxn
// for topic/0 and one transactional batch.
func openRawTxn(t *testing.T, b *testBroker, id, topic string) (int64, int16) {
	t.Helper()
	cl := b.client()
	ireq := kmsg.NewPtrInitProducerIDRequest()
	ireq.TransactionalID, ireq.TransactionTimeoutMillis = &id, 60000
	iresp, err := ireq.RequestWith(ctxT(t), cl)
	if err != nil || iresp.ErrorCode != 0 {
		t.Fatalf("init: %v %+v", err, iresp)
	}
	areq := kmsg.NewPtrAddPartitionsToTxnRequest()
	areq.Version = 3
	areq.TransactionalID, areq.ProducerID, areq.ProducerEpoch = id, iresp.ProducerID, iresp.ProducerEpoch
	areq.Topics = []kmsg.AddPartitionsToTxnRequestTopic{{Topic: topic, Partitions: []int32{0}}}
	aresp, err := areq.RequestWith(ctxT(t), cl)
	if err != nil || aresp.Topics[0].Partitions[0].ErrorCode != 0 {
		t.Fatalf("add partitions: %v %+v", err, aresp)
	}
	preq := produceRequest(9, topic, 0, rawTxnBatch(t, iresp.ProducerID, iresp.ProducerEpoch, 0, "open1", "open2"))
	preq.TransactionID = &id
	pr := rawRequest[*kmsg.ProduceResponse](t, b, preq)
	if c := pr.Topics[0].Partitions[0].ErrorCode; c != 0 {
		t.Fatalf("produce: %d", c)
	}
	return iresp.ProducerID, iresp.ProducerEpoch
}

func describeTxn(t *testing.T, b *testBroker, id string) kmsg.DescribeTransactionsResponseTransactionState {
	t.Helper()
	req := kmsg.NewPtrDescribeTransactionsRequest()
	req.TransactionalIDs = []string{id}
	resp, err := req.RequestWith(ctxT(t), b.client())
	if err != nil {
		t.Fatal(err)
	}
	return resp.TransactionStates[0]
}

func txnTimeoutAbortsAndFences(t *testing.T, clk *coordlogtest.Clock, b *testBroker) {
	createTopic(t, b, "to", 1, nil)
	pid, epoch := openRawTxn(t, b, "slow", "to")
	if lso := listOffsetsPart(t, b, 9, "to", 0, -1, 1).Offset; lso != 0 {
		t.Fatalf("LSO with an open transaction: %d", lso)
	}
	b.srv.txns.Tick(clk.Advance(59 * time.Second))
	if s := describeTxn(t, b, "slow"); s.State != "Ongoing" {
		t.Fatalf("before the timeout: %+v", s)
	}
	b.srv.txns.Tick(clk.Advance(2 * time.Second))
	s := describeTxn(t, b, "slow")
	if s.State != "CompleteAbort" || s.ProducerEpoch != epoch+1 || s.ProducerID != pid {
		t.Fatalf("after the timeout: %+v", s)
	}
	if lso, end := listOffsetsPart(t, b, 9, "to", 0, -1, 1).Offset, listOffsetT(t, b, "to", 0, -1); lso != end || end != 3 {
		t.Fatalf("LSO %d end %d after the abort (2 records + marker)", lso, end)
	}
	// The timed-out producer is fenced.
	ereq := kmsg.NewPtrEndTxnRequest()
	ereq.Version = 3
	ereq.TransactionalID, ereq.ProducerID, ereq.ProducerEpoch, ereq.Commit = "slow", pid, epoch, true
	eresp, err := ereq.RequestWith(ctxT(t), b.client())
	if err != nil || eresp.ErrorCode != kerr.ProducerFenced.Code {
		t.Fatalf("end after the timeout: %v %+v", err, eresp)
	}
	if n := len(readAll(t, b, "to", true, 1)); n != 0 {
		t.Fatalf("read_committed sees %d aborted records", n)
	}
}

func TestTxnRestartMidTransaction(t *testing.T) {
	clk := coordlogtest.NewClock(time.Now())
	dir := t.TempDir()
	b := startClockBroker(t, dir, clk)
	createTopic(t, b, "rm", 1, nil)
	createTopic(t, b, "rp", 1, nil)
	openRawTxn(t, b, "ongoing", "rm")
	openRawTxn(t, b, "preparing", "rp")
	// A crash right after PrepareCommit became durable (markers not yet
	// written): append the record EndTxn writes before its markers.
	persistPrepareCommit(t, b, "preparing", clk.Now())
	b.stop()
	b = startClockBroker(t, dir, clk)
	// PrepareCommit completes on load: markers written, records visible.
	if s := describeTxn(t, b, "preparing"); s.State != "CompleteCommit" {
		t.Fatalf("preparing after restart: %+v", s)
	}
	if got := readAll(t, b, "rp", true, 2); len(got) != 2 {
		t.Fatalf("committed records after recovery: %d", len(got))
	}
	// Ongoing stays open until its timeout, then aborts; no LSO hangs.
	if s := describeTxn(t, b, "ongoing"); s.State != "Ongoing" {
		t.Fatalf("ongoing after restart: %+v", s)
	}
	b.srv.txns.Tick(clk.Advance(61 * time.Second))
	if s := describeTxn(t, b, "ongoing"); s.State != "CompleteAbort" {
		t.Fatalf("ongoing after its timeout: %+v", s)
	}
	if lso, end := listOffsetsPart(t, b, 9, "rm", 0, -1, 1).Offset, listOffsetT(t, b, "rm", 0, -1); lso != end {
		t.Fatalf("LSO %d end %d", lso, end)
	}
	if got := readAll(t, b, "rm", true, 1); len(got) != 0 {
		t.Fatalf("aborted records visible: %d", len(got))
	}
}

func TestTxnOffsetCommitVisibleOnlyAfterCommit(t *testing.T) {
	dir := t.TempDir()
	b := startGroupBroker(t, dir)
	createTopic(t, b, "in", 1, nil)
	createTopic(t, b, "out", 1, nil)
	cl := b.client(kgo.TransactionalID("eos"), kgo.DefaultProduceTopic("out"), kgo.RequestRetries(5))
	commitIn := func(offset int64, commit bool) {
		t.Helper()
		if err := cl.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		if err := cl.ProduceSync(ctxT(t), &kgo.Record{Value: []byte(fmt.Sprint(offset))}).FirstErr(); err != nil {
			t.Fatal(err)
		}
		// AddOffsetsToTxn + TxnOffsetCommit by hand (standalone group).
		id, epoch, perr := cl.ProducerID(ctxT(t))
		if perr != nil {
			t.Fatal(perr)
		}
		areq := kmsg.NewPtrAddOffsetsToTxnRequest()
		areq.TransactionalID, areq.ProducerID, areq.ProducerEpoch, areq.Group = "eos", id, epoch, "eg"
		if r, err := areq.RequestWith(ctxT(t), cl); err != nil || r.ErrorCode != 0 {
			t.Fatalf("add offsets: %v %+v", err, r)
		}
		treq := kmsg.NewPtrTxnOffsetCommitRequest()
		treq.TransactionalID, treq.Group, treq.ProducerID, treq.ProducerEpoch, treq.Generation = "eos", "eg", id, epoch, -1
		treq.Topics = []kmsg.TxnOffsetCommitRequestTopic{{Topic: "in", Partitions: []kmsg.TxnOffsetCommitRequestTopicPartition{{Partition: 0, Offset: offset, LeaderEpoch: 0}}}}
		if r, err := treq.RequestWith(ctxT(t), cl); err != nil || r.Topics[0].Partitions[0].ErrorCode != 0 {
			t.Fatalf("txn offset commit: %v %+v", err, r)
		}
		// Undecided: RequireStable answers UNSTABLE_OFFSET_COMMIT.
		f := kmsg.NewPtrOffsetFetchRequest()
		f.Version, f.Group, f.RequireStable = 7, "eg", true
		f.Topics = []kmsg.OffsetFetchRequestTopic{{Topic: "in", Partitions: []int32{0}}}
		fr, err := f.RequestWith(ctxT(t), cl)
		if err != nil || fr.Topics[0].Partitions[0].ErrorCode != kerr.UnstableOffsetCommit.Code {
			t.Fatalf("require stable: %v %+v", err, fr)
		}
		if err := cl.EndTransaction(ctxT(t), kgo.TransactionEndTry(commit)); err != nil {
			t.Fatal(err)
		}
	}
	commitIn(5, true)
	commitIn(9, false)
	if got := committed(t, b, "eg"); got[0] != 5 {
		t.Fatalf("after commit and abort: %v", got)
	}
	b.stop()
	b = startGroupBroker(t, dir)
	if got := committed(t, b, "eg"); got[0] != 5 {
		t.Fatalf("after restart: %v", got)
	}
}

func txnGroupTransactSession(t *testing.T, clk *coordlogtest.Clock, b *testBroker) {
	createTopic(t, b, "src", 2, nil)
	createTopic(t, b, "dst", 2, nil)
	produceValues(t, b, "src", 100)
	sess, err := kgo.NewGroupTransactSession(kgo.SeedBrokers(b.addr), kgo.TransactionalID("rpw"),
		kgo.ConsumerGroup("rpw-g"), kgo.ConsumeTopics("src"), kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.SessionTimeout(6*time.Second),
		kgo.DefaultProduceTopic("dst"))
	if err != nil {
		t.Fatal(err)
	}
	defer sess.Close()
	done, round := 0, 0
	for done < 100 && round < 200 {
		round++
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		fs := sess.PollFetches(ctx)
		cancel()
		if err := sess.Begin(); err != nil {
			t.Fatal(err)
		}
		recs := fs.Records()
		for _, r := range recs {
			sess.Produce(ctxT(t), &kgo.Record{Key: r.Key, Value: r.Value}, nil)
		}
		// Every third batch is aborted and reprocessed.
		commit := round%3 != 0
		ok, err := sess.End(ctxT(t), kgo.TransactionEndTry(commit))
		if err != nil {
			t.Fatal(err)
		}
		if ok && commit {
			done += len(recs)
		}
	}
	got := readAll(t, b, "dst", true, 100)
	seen := map[string]int{}
	for _, r := range got {
		seen[string(r.Value)]++
	}
	if len(seen) != 100 {
		t.Fatalf("read_committed output has %d distinct records (%d total), want 100", len(seen), len(got))
	}
	for v, n := range seen {
		if n != 1 {
			t.Fatalf("record %s seen %d times", v, n)
		}
	}
	if sum := committedSum(t, b, "rpw-g"); sum != 100 {
		t.Fatalf("group offsets sum %d, want 100", sum)
	}
}

// TestTxnCoordinator runs the transaction cases that need no broker
// restart on one broker (each with its own topics and transactional ids)
// whose coordinators read a manual clock.
func TestTxnCoordinator(t *testing.T) {
	clk := coordlogtest.NewClock(time.Now())
	b := startClockBroker(t, t.TempDir(), clk)
	for _, tc := range []struct {
		name string
		fn   func(*testing.T, *coordlogtest.Clock, *testBroker)
	}{
		{"CommitAbortReadCommitted", txnCommitAbortReadCommitted},
		{"FencingOfZombie", txnFencingOfZombie},
		{"TimeoutAbortsAndFences", txnTimeoutAbortsAndFences},
		{"GroupTransactSession", txnGroupTransactSession},
		{"VerifyOnlyAndOffsetCommitChecks", txnVerifyOnlyAndOffsetCommitChecks},
		{"DescribeProducersShowsOpenTransaction", txnDescribeProducersShowsOpenTransaction},
	} {
		t.Run(tc.name, func(t *testing.T) { tc.fn(t, clk, b) })
	}
}

// persistPrepareCommit appends the PrepareCommit record of transactional
// id's ongoing transaction to __transaction_state, as EndTxn does before
// it writes markers.
func persistPrepareCommit(t *testing.T, b *testBroker, id string, now time.Time) {
	t.Helper()
	d := describeTxn(t, b, id)
	k := kmsg.NewTxnMetadataKey()
	k.TransactionalID = id
	v := kmsg.NewTxnMetadataValue()
	v.ProducerID, v.ProducerEpoch, v.TimeoutMillis = d.ProducerID, d.ProducerEpoch, d.TimeoutMillis
	v.State, v.LastUpdateTimestamp, v.StartTimestamp = kmsg.TransactionState(2), now.UnixMilli(), d.StartTimestamp
	for _, dt := range d.Topics {
		vt := kmsg.NewTxnMetadataValueTopic()
		vt.Topic, vt.Partitions = dt.Topic, dt.Partitions
		v.Topics = append(v.Topics, vt)
	}
	p := b.srv.txns.PartitionFor(id)
	if _, err := b.srv.appendInternal(txnStateTopic, p, []coordlog.Record{{Key: k.AppendTo(nil), Value: v.AppendTo(nil)}}, coordlog.Batch{}, now); err != nil {
		t.Fatal(err)
	}
}

package mirror

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/verbatim-kafka/verbatim/client"
	"github.com/verbatim-kafka/verbatim/internal/testkit"
)

// TestStopFailover is the failover of brief I6 through `mirror stop`: an
// open transaction is aborted, the barrier written, the epoch raised
// above every mirrored one, and ordinary producers can write afterwards.
// The broker side (the stop sequence behind the DELETE of mirror.mode) is
// broker/mirror_stop.go.
func TestStopFailover(t *testing.T) {
	_, sa, dst := startPushPair(t)
	produceN(t, testkit.Client(t, sa), "t", 20, false)
	txn := testkit.Client(t, sa, kgo.TransactionalID("open"), kgo.DefaultProduceTopic("t"))
	if err := txn.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := txn.ProduceSync(testkit.Ctx(t), &kgo.Record{Value: []byte("left open")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	if _, err := Push(testkit.Ctx(t), Options{Source: sa, Dest: dst.Addr, Topics: []string{"t"}, CreateTopics: true}); err != nil {
		t.Fatal(err)
	}
	res, err := Stop(testkit.Ctx(t), dst.Addr, client.Options{}, []string{"t"})
	if err != nil {
		t.Fatalf("mirror stop: %v (exit %d)", err, ExitCode(err))
	}
	r := res[0]
	if r.LastMirroredOffset != 20 || r.NewEpoch <= r.LastMirroredEpoch || r.AbortedTransactions != 1 || !r.Barrier {
		t.Fatalf("stop result: %v", r)
	}
	// Run again (as after a REQUEST_TIMED_OUT on a cluster), it reports
	// the same stop: the mirrored data before the stop's own batches.
	again, err := Stop(testkit.Ctx(t), dst.Addr, client.Options{}, []string{"t"})
	if err != nil || len(again) != 1 || again[0] != r {
		t.Fatalf("mirror stop again: %v (%v), want %v", again, err, r)
	}
	// The former mirror takes ordinary idempotent writes.
	cl := testkit.Client(t, dst.Addr, kgo.DefaultProduceTopic("t"))
	pr, err := cl.ProduceSync(context.Background(), &kgo.Record{Value: []byte("after failover")}).First()
	if err != nil || pr.Offset <= 21 {
		t.Fatalf("produce after stop: offset %d, %v", pr.Offset, err)
	}
}

// TestPushForwardsLogStart: the source's log start (DeleteRecords,
// retention) is forwarded to the destination, before and after the data
// was copied (a DeleteRecords with the mirror tag, docs/mirroring.md).
func TestPushForwardsLogStart(t *testing.T) {
	_, sa, dst := startPushPair(t)
	cl := testkit.Client(t, sa)
	produceBatches(t, cl, "t", 10, 10)
	adm := kadm.NewClient(cl)
	del := func(off int64) {
		t.Helper()
		os := kadm.Offsets{}
		os.Add(kadm.Offset{Topic: "t", Partition: 0, At: off})
		if _, err := adm.DeleteRecords(testkit.Ctx(t), os); err != nil {
			t.Fatal(err)
		}
	}
	del(30) // before any copy: the copy starts at 30
	if _, err := Push(testkit.Ctx(t), Options{Source: sa, Dest: dst.Addr, Topics: []string{"t"}, CreateTopics: true}); err != nil {
		t.Fatal(err)
	}
	del(70) // after the copy: forwarded by the next push
	produceBatches(t, cl, "t", 1, 10)
	if _, err := Push(testkit.Ctx(t), Options{Source: sa, Dest: dst.Addr, Topics: []string{"t"}}); err != nil {
		t.Fatal(err)
	}
	sameLogs(t, sa, dst.Addr, "t", 1)
	cn, err := client.Dial(testkit.Ctx(t), dst.Addr, client.Options{ClientID: "test"})
	if err != nil {
		t.Fatal(err)
	}
	defer cn.Close()
	if a, err := client.ListOffset(testkit.Ctx(t), cn, "t", 0, client.Earliest, client.ReadUncommitted); err != nil || a.Offset != 70 {
		t.Fatalf("destination log start %d (%v), want the source's 70", a.Offset, err)
	}
}

// TestOlderPusherFenced: a following pusher is fenced by one that
// registered after it (docs/protocol.md "Writer epoch": the destination
// assigned the later one a newer epoch): its next write is PRODUCER_FENCED,
// a refusal (exit 1), while the later pusher's copy is exact.
func TestOlderPusherFenced(t *testing.T) {
	_, sa, dst := startPushPair(t)
	cl := testkit.Client(t, sa)
	produceN(t, cl, "t", 10, false)
	older, err := NewPusher(Options{Source: sa, Dest: dst.Addr, Topics: []string{"t"}, CreateTopics: true, Follow: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(older.src.Close)
	t.Cleanup(older.dst.Close)
	caughtUp := make(chan struct{}, 16)
	older.chunkDone = func(s PartitionStats) {
		if s.End >= 10 {
			caughtUp <- struct{}{}
		}
	}
	done := make(chan error, 1)
	go func() { _, err := older.Run(testkit.Ctx(t)); done <- err }()
	<-caughtUp
	var epochs []int32
	later, err := NewPusher(Options{Source: sa, Dest: dst.Addr, Topics: []string{"t"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(later.src.Close)
	t.Cleanup(later.dst.Close)
	later.registered = func(got map[tp]int32, err error) { epochs = append(epochs, got[tp{"t", 0}]) }
	if _, err := later.Run(testkit.Ctx(t)); err != nil {
		t.Fatalf("the later pusher: %v", err)
	}
	if older.epochs[tp{"t", 0}] >= epochs[0] {
		t.Fatalf("epochs: older %d, later %v", older.epochs[tp{"t", 0}], epochs)
	}
	produceN(t, cl, "t", 10, false)
	err = <-done
	if ExitCode(err) != ExitRefused || !errors.Is(err, kerr.ProducerFenced) || !strings.Contains(err.Error(), "took over this partition") {
		t.Fatalf("the older pusher after a later one registered: %v (exit %d), want fenced (exit 1)", err, ExitCode(err))
	}
}

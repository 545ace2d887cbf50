package mirror

import (
	"context"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
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
	src := testkit.StartSource(t, kfake.SeedTopics(1, "t"))
	sa := src.ListenAddrs()[0]
	dst := testkit.StartDest(t, t.TempDir())
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
	res, err := Stop(testkit.Ctx(t), dst.Addr, []string{"t"})
	if err != nil {
		t.Fatalf("mirror stop: %v (exit %d)", err, ExitCode(err))
	}
	r := res[0]
	if r.LastMirroredOffset != 20 || r.NewEpoch <= r.LastMirroredEpoch || r.AbortedTransactions != 1 || !r.Barrier {
		t.Fatalf("stop result: %v", r)
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
	src := testkit.StartSource(t, kfake.SeedTopics(1, "t"))
	sa := src.ListenAddrs()[0]
	dst := testkit.StartDest(t, t.TempDir())
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

// TestOlderPusherFenced: once a pusher with a newer writer epoch wrote to
// a partition, one with an older epoch is refused (docs/protocol.md:
// WriterEpoch; the broker answers PRODUCER_FENCED, a refusal: exit 1).
func TestOlderPusherFenced(t *testing.T) {
	src := testkit.StartSource(t, kfake.SeedTopics(1, "t"))
	sa := src.ListenAddrs()[0]
	dst := testkit.StartDest(t, t.TempDir())
	cl := testkit.Client(t, sa)
	produceN(t, cl, "t", 10, false)
	if _, err := Push(testkit.Ctx(t), Options{Source: sa, Dest: dst.Addr, Topics: []string{"t"}, CreateTopics: true, WriterEpoch: 200}); err != nil {
		t.Fatal(err)
	}
	produceN(t, cl, "t", 10, false)
	_, err := Push(testkit.Ctx(t), Options{Source: sa, Dest: dst.Addr, Topics: []string{"t"}, WriterEpoch: 100})
	if ExitCode(err) != ExitRefused {
		t.Fatalf("a pusher with writer epoch 100 after one with 200: %v (exit %d), want fenced (exit 1)", err, ExitCode(err))
	}
}

package link

import (
	"bytes"
	"context"
	"fmt"
	"math/rand"
	"testing"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/verbatim-kafka/verbatim/internal/testkit"
	"github.com/verbatim-kafka/verbatim/mirror"
	"github.com/verbatim-kafka/verbatim/wireext"
)

// TestLinkInterleavings drives a link through seeded sequences of source
// writes (plain, compressed, transactional with aborts), pauses, resumes
// and restarts of broker and manager, and checks after every step that
// each destination partition is a whole-batch prefix of its source (no
// gap, no duplicate, nothing the source lacks); at the end, resumed, the
// copy is exact, and a mirror stop leaves every partition STOPPED. The
// source and destination are real (kfake, the broker); the seed fixes
// the sequence of operations, not the goroutines' schedule.
func TestLinkInterleavings(t *testing.T) {
	for _, seed := range []int64{1, 2, 3, 4} {
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) { interleave(t, seed, 20) })
	}
}

func interleave(t *testing.T, seed int64, steps int) {
	rng := rand.New(rand.NewSource(seed))
	src := testkit.StartSource(t, kfake.SeedTopics(2, "s"))
	sa := src.ListenAddrs()[0]
	d := testkit.StartDest(t, t.TempDir())
	ctx := context.Background()
	m := openManager(t, d)
	if err := m.CreateLink(ctx, "User:admin", wireext.LinkConfig{Name: "sim", SourceBootstrap: sa, Topics: "s"}, false); err != nil {
		t.Fatal(err)
	}
	plain := testkit.Client(t, sa, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	zstd := testkit.Client(t, sa, kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerBatchCompression(kgo.ZstdCompression()))
	txn := testkit.Client(t, sa, kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.TransactionalID(fmt.Sprint("sim-", seed)))
	paused := false
	for i := 0; i < steps; i++ {
		var what string
		switch op := rng.Intn(6); {
		case op <= 1:
			p := int32(rng.Intn(2))
			n := 1 + rng.Intn(40)
			what = fmt.Sprintf("write %d to s/%d", n, p)
			switch rng.Intn(3) {
			case 0:
				produce(t, plain, "s", p, n, what)
			case 1:
				produce(t, zstd, "s", p, n, what)
			default:
				commit := rng.Intn(2) == 0
				what += fmt.Sprintf(" in a transaction (commit %v)", commit)
				if err := txn.BeginTransaction(); err != nil {
					t.Fatal(err)
				}
				produce(t, txn, "s", p, n, what)
				if err := txn.EndTransaction(testkit.Ctx(t), kgo.TransactionEndTry(commit)); err != nil {
					t.Fatal(err)
				}
			}
		case op == 2:
			paused = !paused
			what = fmt.Sprintf("pause %v", paused)
			if _, err := m.PauseMirrorTopics(ctx, "User:admin", wireext.PauseMirrorTopicsRequest{Link: "sim", Pause: paused}); err != nil {
				t.Fatal(err)
			}
		case op == 3:
			what = "restart"
			m, d = restart(t, m, d)
		case op == 4 && !paused:
			what = "catch up"
			waitState(t, m, "sim", wireext.StateMirroring, "s/0", "s/1")
		default:
			what = "sync round"
			waitRounds(t, m, "sim", 1)
		}
		t.Logf("step %d: %s", i, what)
		for p := int32(0); p < 2; p++ {
			checkPrefix(t, sa, d, "s", p, fmt.Sprintf("seed %d step %d (%s)", seed, i, what))
		}
		if paused {
			if st := statuses(t, m, "sim"); st["s/0"].State != wireext.StatePaused || st["s/1"].State != wireext.StatePaused {
				t.Fatalf("seed %d step %d (%s): paused link shows %+v", seed, i, what, st)
			}
		}
	}
	if _, err := m.PauseMirrorTopics(ctx, "User:admin", wireext.PauseMirrorTopicsRequest{Link: "sim"}); err != nil {
		t.Fatal(err)
	}
	waitState(t, m, "sim", wireext.StateMirroring, "s/0", "s/1")
	for p := int32(0); p < 2; p++ {
		if len(rawLog(t, sa, "s", p)) > 0 {
			sameLog(t, sa, d.Addr, "s", p)
		}
	}
	stopTopic(t, d.Addr, "s")
	waitState(t, m, "sim", wireext.StateStopped, "s/0", "s/1")
}

// checkPrefix wants the destination's partition to be a whole-batch
// prefix of the source's (read after it: the source only grows).
func checkPrefix(t *testing.T, src string, d *testkit.Dest, topic string, part int32, when string) {
	t.Helper()
	var dl []byte
	if _, ok := d.Srv.LinkTopic(topic); ok {
		dl = rawLog(t, d.Addr, topic, part)
	}
	sl := rawLog(t, src, topic, part)
	if !bytes.HasPrefix(sl, dl) {
		t.Fatalf("%s: %s/%d: the destination's %d bytes are not a prefix of the source's %d", when, topic, part, len(dl), len(sl))
	}
	if bs, _, partial, err := mirror.Split(dl, 0); err != nil || partial && len(dl) > 0 || len(dl) > 0 && len(bs) == 0 {
		t.Fatalf("%s: %s/%d: the destination holds no whole batches: %v", when, topic, part, err)
	}
}

package mirror

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/verbatim-kafka/verbatim/client"
	"github.com/verbatim-kafka/verbatim/internal/testkit"
)

func push(t *testing.T, src, dst string, topics ...string) {
	t.Helper()
	if _, err := Push(testkit.Ctx(t), Options{Source: src, Dest: dst, Topics: topics, CreateTopics: true}); err != nil {
		t.Fatalf("push %s -> %s: %v (exit %d)", src, dst, err, ExitCode(err))
	}
}

// TestTopologies: a chain (Kafka -> Verbatim B -> Verbatim C), fan-out
// (one source, two destinations) and fan-in (two sources, one
// destination) all end byte-identical to the source.
func TestTopologies(t *testing.T) {
	a := testkit.StartSource(t, kfake.SeedTopics(2, "x"))
	a2 := testkit.StartSource(t, kfake.SeedTopics(1, "y"))
	b := testkit.StartDest(t, t.TempDir())
	c := testkit.StartDest(t, t.TempDir())
	d := testkit.StartDest(t, t.TempDir())
	cl := testkit.Client(t, a.ListenAddrs()[0])
	produceN(t, cl, "x", 200, true)
	a.ShufflePartitionLeaders()
	produceN(t, cl, "x", 50, true)
	txn := testkit.Client(t, a.ListenAddrs()[0], kgo.TransactionalID("chain"), kgo.DefaultProduceTopic("x"))
	for _, commit := range []bool{false, true} {
		if err := txn.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		if err := txn.ProduceSync(testkit.Ctx(t), &kgo.Record{Value: []byte("t")}).FirstErr(); err != nil {
			t.Fatal(err)
		}
		if err := txn.EndTransaction(testkit.Ctx(t), kgo.TransactionEndTry(commit)); err != nil {
			t.Fatal(err)
		}
	}
	produceN(t, testkit.Client(t, a2.ListenAddrs()[0]), "y", 30, false)

	push(t, a.ListenAddrs()[0], b.Addr, "x")  // A -> B
	push(t, b.Addr, c.Addr, "x")              // B -> C (chain)
	push(t, a.ListenAddrs()[0], d.Addr, "x")  // A -> D (fan-out with B)
	push(t, a2.ListenAddrs()[0], d.Addr, "y") // A2 -> D (fan-in with A)
	for _, dst := range []*testkit.Dest{b, c, d} {
		sameLogs(t, a.ListenAddrs()[0], dst.Addr, "x", 2)
	}
	sameLogs(t, a2.ListenAddrs()[0], d.Addr, "y", 1)
	// C's topic records B as its source.
	if cfg := describeConfigs(t, c.Addr, "x"); cfg["mirror.source.cluster.id"] != b.Srv.ClusterID() {
		t.Fatalf("chain: C's mirror.source.cluster.id = %q, want B's %q", cfg["mirror.source.cluster.id"], b.Srv.ClusterID())
	}
	// Epoch answers agree along the chain.
	for p := int32(0); p < 2; p++ {
		for e := int32(0); e <= 1; e++ { // the epochs with batches
			if sa, sc := epochEnd(t, a.ListenAddrs()[0], "x", p, e), epochEnd(t, c.Addr, "x", p, e); sa != sc {
				t.Fatalf("x/%d epoch %d: source %+v, end of chain %+v", p, e, sa, sc)
			}
		}
	}
}

func epochEnd(t *testing.T, addr, topic string, part, epoch int32) client.EpochEnd {
	t.Helper()
	cl, err := client.NewCluster(addr, client.Options{ClientID: "test"})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	cn, _, err := cl.Leader(testkit.Ctx(t), topic, part)
	if err != nil {
		t.Fatal(err)
	}
	ee, err := client.OffsetForLeaderEpoch(testkit.Ctx(t), cn, topic, part, epoch)
	if err != nil {
		t.Fatal(err)
	}
	return ee
}

package mirror

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
)

func push(t *testing.T, src, dst string, topics ...string) {
	t.Helper()
	if _, err := Push(ctxT(t), Options{Source: src, Dest: dst, Topics: topics, CreateTopics: true}); err != nil {
		t.Fatalf("push %s -> %s: %v (exit %d)", src, dst, err, ExitCode(err))
	}
}

// TestTopologies: a chain (Kafka -> Verbatim B -> Verbatim C), fan-out
// (one source, two destinations) and fan-in (two sources, one
// destination) all end byte-identical to the source.
func TestTopologies(t *testing.T) {
	a := startSource(t, kfake.SeedTopics(2, "x"))
	a2 := startSource(t, kfake.SeedTopics(1, "y"))
	b := startDest(t, t.TempDir())
	c := startDest(t, t.TempDir())
	d := startDest(t, t.TempDir())
	cl := client(t, a.ListenAddrs()[0])
	produceN(t, cl, "x", 200, true)
	a.ShufflePartitionLeaders()
	produceN(t, cl, "x", 50, true)
	txn := client(t, a.ListenAddrs()[0], kgo.TransactionalID("chain"), kgo.DefaultProduceTopic("x"))
	for _, commit := range []bool{false, true} {
		if err := txn.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		if err := txn.ProduceSync(ctxT(t), &kgo.Record{Value: []byte("t")}).FirstErr(); err != nil {
			t.Fatal(err)
		}
		if err := txn.EndTransaction(ctxT(t), kgo.TransactionEndTry(commit)); err != nil {
			t.Fatal(err)
		}
	}
	produceN(t, client(t, a2.ListenAddrs()[0]), "y", 30, false)

	push(t, a.ListenAddrs()[0], b.addr, "x")  // A -> B
	push(t, b.addr, c.addr, "x")              // B -> C (chain)
	push(t, a.ListenAddrs()[0], d.addr, "x")  // A -> D (fan-out with B)
	push(t, a2.ListenAddrs()[0], d.addr, "y") // A2 -> D (fan-in with A)
	for _, dst := range []*dest{b, c, d} {
		sameLogs(t, a.ListenAddrs()[0], dst.addr, "x", 2)
	}
	sameLogs(t, a2.ListenAddrs()[0], d.addr, "y", 1)
	// C's topic records B as its source.
	if cfg := describeConfigs(t, c.addr, "x"); cfg["mirror.source.cluster.id"] != b.srv.ClusterID() {
		t.Fatalf("chain: C's mirror.source.cluster.id = %q, want B's %q", cfg["mirror.source.cluster.id"], b.srv.ClusterID())
	}
	// Epoch answers agree along the chain.
	for p := int32(0); p < 2; p++ {
		for e := int32(0); e <= 1; e++ { // the epochs with batches
			if sa, sc := epochEnd(t, a.ListenAddrs()[0], "x", p, e), epochEnd(t, c.addr, "x", p, e); sa != sc {
				t.Fatalf("x/%d epoch %d: source %+v, end of chain %+v", p, e, sa, sc)
			}
		}
	}
}

func epochEnd(t *testing.T, addr, topic string, part, epoch int32) EpochEnd {
	t.Helper()
	cl, err := NewCluster(addr, "test")
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	cn, _, err := cl.Leader(ctxT(t), topic, part)
	if err != nil {
		t.Fatal(err)
	}
	ee, err := OffsetForLeaderEpoch(ctxT(t), cn, topic, part, epoch)
	if err != nil {
		t.Fatal(err)
	}
	return ee
}

package interop

import (
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/verbatim-kafka/verbatim/storage"
)

// TestMirrorTxnIndexOneAppend: a single mirror append that holds two
// ABORT markers of one producer and, after them, the start of another
// producer's transaction. Kafka's leader wrote each marker on its own, so
// its transaction index records each marker's last stable offset of that
// moment; Verbatim must record the same entries (a follower-style LSO of
// the later transaction made read_committed fetches below it miss the
// second aborted transaction), and verify must find the copy exact.
func TestMirrorTxnIndexOneAppend(t *testing.T) {
	bin := BuildVerbatim(t)
	k := StartKafka(t, KafkaOptions{})
	src := k.Bootstrap()
	cl := k.Client(t, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	txn := k.Client(t, kgo.TransactionalID("t1"), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	open := k.Client(t, kgo.TransactionalID("t2"), kgo.TransactionTimeout(10*time.Minute), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	k.CreateTopic(t, "x", 1, 1, nil)
	for round := 0; round < 2; round++ {
		produceSync(t, cl, keyed("x", 25, "a")...)
		runTxn(t, txn, true, keyed("x", 5, "c"))
		runTxn(t, txn, false, keyed("x", 5, "ab"))
	}
	if err := open.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	produceSync(t, open, keyed("x", 3, "open")...)
	v := StartVerbatim(t, bin, VerbatimOptions{})
	// One push: a single mirror produce holds both ABORTs and the open
	// transaction's start.
	runPush(t, bin, src, v.Addr, 0, "--topics", "x", "--create-topics")

	entries := func(dir string) []storage.AbortedTxn {
		t.Helper()
		files, err := filepath.Glob(filepath.Join(dir, "x-0", "*.txnindex"))
		if err != nil {
			t.Fatal(err)
		}
		sort.Strings(files)
		var all []storage.AbortedTxn
		for _, f := range files {
			b, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			es, err := storage.ParseTxnIndex(b)
			if err != nil {
				t.Fatalf("%s: %v", f, err)
			}
			all = append(all, es...)
		}
		return all
	}
	kafka, verbatim := entries(k.Nodes[0].DataDir), entries(v.DataDir)
	if len(kafka) != 2 {
		t.Fatalf("Kafka's transaction index has %d entries, want the 2 aborted transactions: %+v", len(kafka), kafka)
	}
	if !reflect.DeepEqual(kafka, verbatim) {
		t.Fatalf("transaction index differs:\nkafka    %+v\nverbatim %+v", kafka, verbatim)
	}
	expectIdentical(t, runVerify(t, bin, src, v.Addr, "x", 0), 1)
}

package verify

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/verbatim-kafka/verbatim/internal/testkit"
)

// TestVerifyExactAfterPush mirrors every codec, keys and headers, an
// idempotent producer and committed and aborted transactions, then
// verifies: exact, with every check run.
func TestVerifyExactAfterPush(t *testing.T) {
	src := testkit.StartSource(t, kfake.SeedTopics(2, "t"))
	sa := src.ListenAddrs()[0]
	dst := startDest(t)
	codecs := []kgo.CompressionCodec{kgo.NoCompression(), kgo.GzipCompression(), kgo.SnappyCompression(), kgo.Lz4Compression(), kgo.ZstdCompression()}
	for i, c := range codecs {
		cl := testkit.Client(t, sa, kgo.ProducerBatchCompression(c), kgo.DefaultProduceTopic("t"), kgo.RecordPartitioner(kgo.ManualPartitioner()))
		var rs []*kgo.Record
		for j := 0; j < 20; j++ {
			rs = append(rs, &kgo.Record{Partition: int32(j % 2), Key: []byte(fmt.Sprintf("k%d", j)), Value: bytes.Repeat([]byte{byte(j)}, 100),
				Headers: []kgo.RecordHeader{{Key: "codec", Value: []byte{byte(i)}}}})
		}
		produce(t, cl, rs...)
	}
	txn := testkit.Client(t, sa, kgo.TransactionalID("tx"), kgo.DefaultProduceTopic("t"), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	for i, commit := range []bool{true, false, true} {
		if err := txn.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		produce(t, txn, &kgo.Record{Value: []byte(fmt.Sprintf("txn %d", i))}, &kgo.Record{Partition: 1, Value: []byte("p1")})
		if err := txn.EndTransaction(testkit.Ctx(t), kgo.TransactionEndTry(commit)); err != nil {
			t.Fatal(err)
		}
	}
	push(t, sa, dst, "t")
	rep := run(t, sa, dst, "t")
	if !rep.Exact || rep.ExitCode() != 0 {
		var b strings.Builder
		rep.WriteText(&b)
		t.Fatalf("not exact:\n%s", b.String())
	}
	for _, p := range rep.Partitions {
		if p.Status != Identical || p.Batches == 0 || p.Bytes == 0 || p.FirstMismatch != nil {
			t.Fatalf("partition %d: %+v", p.Partition, p)
		}
		checks := strings.Join(p.Checks, " ")
		for _, want := range []string{"list_offsets.earliest", "list_offsets.last_stable", "list_offsets.max_timestamp", "offset_for_leader_epoch", "aborted_transactions", "list_offsets.by_timestamp"} {
			if !strings.Contains(checks, want) {
				t.Errorf("partition %d: check %s not run (ran %s)", p.Partition, want, checks)
			}
		}
	}
	var js bytes.Buffer
	if err := rep.WriteJSON(&js); err != nil {
		t.Fatal(err)
	}
	var generic struct {
		Exact      *bool `json:"exact"`
		Partitions []map[string]json.RawMessage
	}
	if err := json.Unmarshal(js.Bytes(), &generic); err != nil || generic.Exact == nil || !*generic.Exact || len(generic.Partitions) != 2 {
		t.Fatalf("json: %v %s", err, js.String())
	}
	for _, k := range []string{"topic", "partition", "batches", "bytes", "status", "first_mismatch"} {
		if _, ok := generic.Partitions[0][k]; !ok {
			t.Fatalf("json partition lacks %q: %s", k, js.String())
		}
	}
	if string(generic.Partitions[0]["first_mismatch"]) != "null" {
		t.Fatalf("first_mismatch of an identical partition: %s", generic.Partitions[0]["first_mismatch"])
	}
}

// TestVerifyMismatchOnReproduction: a copy made the way MirrorMaker does
// it (consume, produce again) is reported as a mismatch, with the first
// differing offset and field.
func TestVerifyMismatchOnReproduction(t *testing.T) {
	src := testkit.StartSource(t, kfake.SeedTopics(1, "t"))
	sa := src.ListenAddrs()[0]
	dst := startDest(t)
	sc := testkit.Client(t, sa, kgo.DefaultProduceTopic("t"))
	for i := 0; i < 3; i++ {
		var rs []*kgo.Record
		for j := 0; j < 5; j++ {
			rs = append(rs, &kgo.Record{Key: []byte{byte(j)}, Value: []byte(fmt.Sprintf("v%d-%d", i, j))})
		}
		produce(t, sc, rs...)
	}
	// Re-produce every record, keeping keys, values and timestamps.
	adm := testkit.Client(t, dst)
	if _, err := adm.Request(testkit.Ctx(t), createTopicReq("t")); err != nil {
		t.Fatal(err)
	}
	cons := testkit.Client(t, sa, kgo.ConsumeTopics("t"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	var got []*kgo.Record
	for len(got) < 15 {
		fs := cons.PollFetches(testkit.Ctx(t))
		if err := fs.Err(); err != nil {
			t.Fatal(err)
		}
		fs.EachRecord(func(r *kgo.Record) {
			got = append(got, &kgo.Record{Topic: "t", Key: r.Key, Value: r.Value, Timestamp: r.Timestamp})
		})
	}
	produce(t, testkit.Client(t, dst), got...)
	rep := run(t, sa, dst, "t")
	if rep.Exact || rep.ExitCode() != 1 {
		t.Fatalf("a re-produced copy verified as exact: %+v", rep)
	}
	p := rep.Partitions[0]
	if p.Status != Mismatch || p.FirstMismatch == nil || p.FirstMismatch.Field == "" || p.FirstMismatch.Offset != 0 {
		t.Fatalf("partition report: %+v %+v", p, p.FirstMismatch)
	}
	t.Logf("first mismatch: %+v", *p.FirstMismatch)
	var b strings.Builder
	rep.WriteText(&b)
	if !strings.Contains(b.String(), "first mismatch at offset 0, field "+p.FirstMismatch.Field) || !strings.Contains(b.String(), "NOT exact") {
		t.Fatalf("summary: %s", b.String())
	}
}

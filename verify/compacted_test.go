package verify

import (
	"fmt"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/verbatim-kafka/verbatim/internal/testkit"
	"github.com/verbatim-kafka/verbatim/kbatch"
	"github.com/verbatim-kafka/verbatim/kbatch/kbatchtest"
)

// TestVerifyCompactedSince: the source cleans after the copy; the
// destination keeps the superset and verify says source-compacted-since
// (exit 0), not mismatch.
func TestVerifyCompactedSince(t *testing.T) {
	src := testkit.StartSource(t)
	sa := src.ListenAddrs()[0]
	dst := startDest(t)
	adm := testkit.Client(t, sa)
	req := kmsg.NewPtrCreateTopicsRequest()
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = "c", 1, 1
	cfg := kmsg.NewCreateTopicsRequestTopicConfig()
	cfg.Name, cfg.Value = "cleanup.policy", kmsg.StringPtr("compact")
	rt.Configs = append(rt.Configs, cfg)
	req.Topics = append(req.Topics, rt)
	if _, err := adm.Request(testkit.Ctx(t), req); err != nil {
		t.Fatal(err)
	}
	cl := testkit.Client(t, sa, kgo.DefaultProduceTopic("c"))
	// A key written once keeps the first batch, so the log start stays
	// (Kafka's cleaner never moves it).
	produce(t, cl, &kgo.Record{Key: []byte("once"), Value: []byte("kept")})
	for round := 0; round < 4; round++ {
		for k := 0; k < 5; k++ {
			produce(t, cl, &kgo.Record{Key: []byte(fmt.Sprintf("key-%d", k)), Value: []byte(fmt.Sprintf("round %d", round))})
		}
	}
	push(t, sa, dst, "c")
	if rep := run(t, sa, dst, "c"); !rep.Exact || rep.Partitions[0].Status != Identical {
		t.Fatalf("before compaction: %+v", rep.Partitions)
	}
	src.Compact()
	rep := run(t, sa, dst, "c")
	p := rep.Partitions[0]
	if !rep.Exact || rep.ExitCode() != 0 || p.Status != SourceCompactedSince {
		t.Fatalf("after the source compacted: exact %v, %+v %+v", rep.Exact, p, p.FirstMismatch)
	}
}

func TestDiffRecord(t *testing.T) {
	base := record{offset: 5, timestamp: 100, rec: kbatch.Record{Key: []byte("k"), Value: []byte("v"), Headers: []kbatch.RecordHeader{{Key: "h", Value: []byte("1")}}}}
	for _, tc := range []struct {
		name string
		mod  func(r *record)
		want string
	}{
		{"same", func(*record) {}, ""},
		{"key", func(r *record) { r.rec.Key = []byte("x") }, "record.key"},
		{"null key", func(r *record) { r.rec.Key = nil }, "record.key"},
		{"value", func(r *record) { r.rec.Value = []byte("w") }, "record.value"},
		{"null value", func(r *record) { r.rec.Value = nil }, "record.value"},
		{"header value", func(r *record) { r.rec.Headers = []kbatch.RecordHeader{{Key: "h", Value: []byte("2")}} }, "record.headers"},
		{"header count", func(r *record) { r.rec.Headers = nil }, "record.headers"},
		{"timestamp", func(r *record) { r.timestamp = 101 }, "record.timestamp"},
		{"control", func(r *record) { r.control = true }, "record.control"},
	} {
		d := base
		d.rec.Headers = append([]kbatch.RecordHeader(nil), base.rec.Headers...)
		tc.mod(&d)
		if got := diffRecord(base, d); got != tc.want {
			t.Errorf("%s: diffRecord = %q, want %q", tc.name, got, tc.want)
		}
	}
}

func TestDiffBatchNamesField(t *testing.T) {
	b := kbatch.NewBatch(1000, kbatch.Record{Key: []byte("k"), Value: []byte("v")})
	b.BaseOffset, b.LeaderEpoch, b.ProducerID, b.ProducerEpoch, b.BaseSequence = 10, 3, 7, 1, 0
	orig := kbatchtest.Encode(t, b)
	for _, tc := range []struct {
		want string
		mod  func(b *kbatch.Batch)
	}{
		{"base_offset", func(b *kbatch.Batch) { b.BaseOffset = 11 }},
		{"partition_leader_epoch", func(b *kbatch.Batch) { b.LeaderEpoch = 4 }},
		{"attributes", func(b *kbatch.Batch) { b.Attributes = kbatch.TimestampTypeBit }},
		{"base_timestamp", func(b *kbatch.Batch) { b.BaseTimestamp = 999; b.MaxTimestamp = 1000 }},
		{"producer_id", func(b *kbatch.Batch) { b.ProducerID = 8 }},
		{"producer_epoch", func(b *kbatch.Batch) { b.ProducerEpoch = 2 }},
		{"base_sequence", func(b *kbatch.Batch) { b.BaseSequence = 5 }},
		{"batch_length", func(b *kbatch.Batch) { b.Records[0].Value = []byte("vv") }},
		{"records", func(b *kbatch.Batch) { b.Records[0].Value = []byte("w") }},
	} {
		m := b
		m.Records = []kbatch.Record{b.Records[0]}
		tc.mod(&m)
		enc := kbatchtest.Encode(t, m)
		if got := diffBatch(orig, enc); got != tc.want {
			t.Errorf("diffBatch = %q, want %q", got, tc.want)
		}
	}
	if got := diffBatch(orig, orig); got != "" {
		t.Errorf("identical batches: %q", got)
	}
}

// TestAbortedByMeaning: two aborted lists that say the same thing (one
// with an entry that covers no data) agree; a list that aborts another
// producer's data does not.
func TestAbortedByMeaning(t *testing.T) {
	mk := func(base, pid int64, txn bool, control int16) []byte {
		var recs []kbatch.Record
		attrs := int16(0)
		if txn {
			attrs |= kbatch.TransactionalBit
		}
		if control >= 0 {
			attrs |= kbatch.ControlBit
			recs = append(recs, kbatch.Record{Key: kbatch.ControlKey(control), Value: kbatch.EndTxnMarkerValue(0)})
		} else {
			recs = append(recs, kbatch.Record{Value: []byte("x")}, kbatch.Record{OffsetDelta: 1, Value: []byte("y")})
		}
		b := kbatch.NewBatch(1, recs...)
		b.BaseOffset, b.Attributes, b.ProducerID, b.ProducerEpoch = base, attrs, pid, 0
		if control < 0 {
			b.BaseSequence = 0
		}
		return kbatchtest.Encode(t, b)
	}
	bs := [][]byte{mk(0, 1, true, -1), mk(2, 2, true, -1), mk(4, 1, true, 0), mk(5, 2, true, 1), mk(6, 1, true, -1), mk(8, 1, true, 0)}
	entry := func(pid, first int64) kmsg.FetchResponseTopicPartitionAbortedTransaction {
		return kmsg.FetchResponseTopicPartitionAbortedTransaction{ProducerID: pid, FirstOffset: first}
	}
	a := abortedData(bs, []kmsg.FetchResponseTopicPartitionAbortedTransaction{entry(1, 0), entry(1, 6)})
	want := []abortedRange{{1, 0, 1}, {1, 6, 7}}
	if fmt.Sprint(a) != fmt.Sprint(want) {
		t.Fatalf("aborted = %v, want %v", a, want)
	}
	// Same meaning, entries in another order.
	if b := abortedData(bs, []kmsg.FetchResponseTopicPartitionAbortedTransaction{entry(1, 6), entry(1, 0)}); fmt.Sprint(b) != fmt.Sprint(want) {
		t.Fatalf("reordered list: %v", b)
	}
	// A list that aborts producer 2's committed data means something else.
	if c := abortedData(bs, []kmsg.FetchResponseTopicPartitionAbortedTransaction{entry(1, 0), entry(2, 2), entry(1, 6)}); fmt.Sprint(c) == fmt.Sprint(want) {
		t.Fatalf("a list aborting producer 2 has the same meaning: %v", c)
	}
}

func TestEpochsToAsk(t *testing.T) {
	got := epochsToAsk(map[int32]bool{0: true, 1: true, 4: true, 20: true})
	if fmt.Sprint(got) != "[0 1 2 4 5 20]" {
		t.Fatalf("epochsToAsk = %v", got)
	}
	if got := epochsToAsk(map[int32]bool{}); len(got) != 0 {
		t.Fatalf("no epochs: %v", got)
	}
}

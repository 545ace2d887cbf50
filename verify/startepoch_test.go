package verify

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/verbatim-kafka/verbatim/client"
	"github.com/verbatim-kafka/verbatim/internal/testkit"
	"github.com/verbatim-kafka/verbatim/kbatch"
	"github.com/verbatim-kafka/verbatim/kbatch/kbatchtest"
	"github.com/verbatim-kafka/verbatim/mirror"
	"github.com/verbatim-kafka/verbatim/wireext"
)

// compactedSource is a source partition whose first batches are gone, as
// a compacted Kafka leaves it: log start 0 at leader epoch 0, the first
// stored batch at offset 5 (epoch 0), then epoch 1 from offset 8. It is
// a Verbatim mirror topic written with mirror produces, whose EARLIEST
// answers epoch 0 through a start-epoch forward.
func compactedSource(t *testing.T, topic string) string {
	addr := startDest(t)
	ctx := testkit.Ctx(t)
	adm := kadm.NewClient(testkit.Client(t, addr))
	if _, err := adm.CreateTopic(ctx, 1, -1, map[string]*string{"mirror.mode": kadm.StringPtr("push"), "cleanup.policy": kadm.StringPtr("compact")}, topic); err != nil {
		t.Fatal(err)
	}
	cn, err := client.Dial(ctx, addr, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer cn.Close()
	w := mirror.Writer{Epoch: mirror.RegisterEpoch, ID: [16]byte{1}}
	resp, err := cn.Request(ctx, mirror.DeleteRecordsRequest(w, map[string][]int32{topic: {0}}, 0), 2)
	if err != nil {
		t.Fatal(err)
	}
	if w.Epoch, err = mirror.AssignedEpoch(&resp.(*kmsg.DeleteRecordsResponse).Topics[0].Partitions[0]); err != nil || w.Epoch < 0 {
		t.Fatalf("registration: epoch %d %v", w.Epoch, err)
	}
	var set []byte
	for _, b := range []struct {
		base  int64
		epoch int32
	}{{5, 0}, {8, 1}} {
		bt := kbatch.NewBatch(1_700_000_000_000+b.base, kbatch.Record{Key: []byte("k"), Value: []byte("v")}, kbatch.Record{OffsetDelta: 1, Key: []byte("k2"), Value: []byte("v")})
		bt.BaseOffset, bt.LeaderEpoch = b.base, b.epoch
		enc := kbatchtest.Encode(t, bt)
		set = append(set, enc...)
	}
	req := kmsg.NewPtrProduceRequest()
	req.Acks, req.TimeoutMillis = -1, 30000
	req.UnknownTags.Set(wireext.MirrorTag, (&wireext.MirrorProduce{WriterEpoch: w.Epoch, WriterID: w.ID}).AppendTo(nil))
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Records = set
	rp.UnknownTags.Set(wireext.MirrorTag, (&wireext.MirrorPartition{ExpectedLogEndOffset: 0, CurrentLeaderEpoch: -1}).AppendTo(nil))
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	presp, err := cn.Request(ctx, req, 11)
	if err != nil {
		t.Fatal(err)
	}
	if c := presp.(*kmsg.ProduceResponse).Topics[0].Partitions[0].ErrorCode; c != 0 {
		t.Fatalf("mirror produce: %v", kerr.ErrorForCode(c))
	}
	dresp, err := cn.Request(ctx, mirror.StartEpochRequest(w, topic, 0, 0, 0), 2)
	if err != nil {
		t.Fatal(err)
	}
	if c := dresp.(*kmsg.DeleteRecordsResponse).Topics[0].Partitions[0].ErrorCode; c != 0 {
		t.Fatalf("start epoch forward: %v", kerr.ErrorForCode(c))
	}
	if a := earliest(t, addr, topic); a.Offset != 0 || a.LeaderEpoch != 0 {
		t.Fatalf("source EARLIEST %+v", a)
	}
	return addr
}

// earliest is kadm's ListStartOffsets of partition 0 of topic on addr.
func earliest(t *testing.T, addr, topic string) client.OffsetAnswer {
	t.Helper()
	got, err := kadm.NewClient(testkit.Client(t, addr)).ListStartOffsets(testkit.Ctx(t), topic)
	if err != nil {
		t.Fatal(err)
	}
	o, ok := got.Lookup(topic, 0)
	if !ok || o.Err != nil {
		t.Fatalf("%s/0 start offset: %v", topic, o.Err)
	}
	return client.OffsetAnswer{Offset: o.Offset, LeaderEpoch: o.LeaderEpoch}
}

// TestVerifyEarliestEpoch: a copy of a source whose first batches are
// gone answers EARLIEST with the source's epoch when the pusher forwards
// it (verify exact), and a copy without the forward is a mismatch naming
// list_offsets.earliest.leader_epoch.
func TestVerifyEarliestEpoch(t *testing.T) {
	src := compactedSource(t, "c")
	with, without := startDest(t), startDest(t)
	push(t, src, with, "c")
	if _, err := mirror.Push(testkit.Ctx(t), mirror.Options{Source: src, Dest: without, Topics: []string{"c"}, CreateTopics: true, NoStartEpoch: true}); err != nil {
		t.Fatal(err)
	}
	if a := earliest(t, with, "c"); a.Offset != 0 || a.LeaderEpoch != 0 {
		t.Fatalf("destination EARLIEST %+v, want offset 0 epoch 0", a)
	}
	rep := run(t, src, with, "c")
	if !rep.Exact || rep.Partitions[0].FirstMismatch != nil {
		t.Fatalf("with the forward: %+v", rep.Partitions[0])
	}
	found := false
	for _, c := range rep.Partitions[0].Checks {
		found = found || c == "list_offsets.earliest.leader_epoch"
	}
	if !found {
		t.Fatalf("the earliest epoch was not compared: %v", rep.Partitions[0].Checks)
	}
	if a := earliest(t, without, "c"); a.LeaderEpoch != -1 {
		t.Fatalf("without the forward the destination answers epoch %d", a.LeaderEpoch)
	}
	rep = run(t, src, without, "c")
	if m := rep.Partitions[0].FirstMismatch; rep.Exact || m == nil || m.Field != "list_offsets.earliest.leader_epoch" || m.Offset != 0 {
		t.Fatalf("without the forward: exact %v, mismatch %+v", rep.Exact, m)
	}
}

package broker

import (
	"bytes"
	"errors"
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/verbatim-kafka/verbatim/kbatch"
)

// repairSets are a mirror's batches over epochs 2 and 5 (0..10), with an
// aborted transaction and an open one in epoch 5.
func repairSets(t *testing.T) [][]byte {
	t.Helper()
	return [][]byte{
		data(0, 2, 3).encode(t),
		data(3, 2, 2).encode(t),
		data(5, 5, 2).encode(t),
		srcBatch{base: 7, epoch: 5, records: 1, pid: 9, txn: true, control: -1, timestampMs: 1_700_000_000_007}.encode(t),
		srcBatch{base: 8, epoch: 5, pid: 9, control: 0, timestampMs: 1_700_000_000_008}.encode(t),
		srcBatch{base: 9, epoch: 5, records: 2, pid: 11, txn: true, control: -1, timestampMs: 1_700_000_000_009}.encode(t),
	}
}

// repairLog mirrors repairSets into m/1 and answers them.
func repairLog(t *testing.T, b *testBroker) [][]byte {
	t.Helper()
	createTopic(t, b, "m", 2, map[string]*string{"mirror.mode": sp("push")})
	sets := repairSets(t)
	expect := int64(0)
	for _, s := range sets {
		mirrorTo(t, b, "m", 1, s, expect)
		expect = kbatch.BaseOffset(s) + int64(kbatch.LastOffsetDelta(s)) + 1
	}
	return sets
}

// TestTruncateKeepingCut: the batches from the one containing the target
// on are copied byte for byte, at their offsets, into `m.truncated`
// (same partition count, an ordinary topic starting at the cut, readable
// by a consumer), then the log is cut as Kafka's truncateTo does: epoch
// cache, producer state, LSO and high watermark follow, and the leader
// epoch rises so consumers validate their positions.
func TestTruncateKeepingCut(t *testing.T) {
	b := startBroker(t, t.TempDir(), nil)
	sets := repairLog(t, b)
	p := b.srv.cluster.topic("m").Partition(1)
	l, _ := partitionLog(p)
	if l.LastStableOffset() != 9 {
		t.Fatalf("LSO %d before, want 9 (the open transaction)", l.LastStableOffset())
	}
	epoch := p.LeaderEpoch()
	// 6 is inside the batch 5..6: that batch goes whole.
	res, err := b.srv.TruncateKeepingCut(ctxT(t), "m", 1, 6, "")
	if err != nil {
		t.Fatal(err)
	}
	if res.TruncatedTo != 5 || res.RemovedBatches != 4 || res.KeptIn != "m.truncated" {
		t.Fatalf("result %+v", res)
	}
	var removed int64
	for _, s := range sets[2:] {
		removed += int64(len(s))
	}
	if res.RemovedBytes != removed {
		t.Fatalf("removed %d bytes, want %d", res.RemovedBytes, removed)
	}
	if l.LogEndOffset() != 5 || l.LastStableOffset() != 5 || len(l.Producers()) != 0 {
		t.Fatalf("after the cut: leo %d lso %d producers %v", l.LogEndOffset(), l.LastStableOffset(), l.Producers())
	}
	if es := l.EpochCache().Entries(); len(es) != 1 || es[0].Epoch != 2 {
		t.Fatalf("epoch cache %v, want epoch 2 only", es)
	}
	if p.LeaderEpoch() != epoch+1 {
		t.Fatalf("leader epoch %d, want %d", p.LeaderEpoch(), epoch+1)
	}
	if got := storedBatches(t, p, 0); len(got) != 2 || !bytes.Equal(got[1], sets[1]) {
		t.Fatalf("kept %d batches", len(got))
	}
	kt := b.srv.cluster.topic("m.truncated")
	if kt == nil || len(kt.Partitions()) != 2 {
		t.Fatal("keep topic missing or with another partition count")
	}
	if ov := kt.Config().Overrides(); ov["mirror.mode"] != "" || ov["retention.ms"] != "-1" {
		t.Fatalf("keep topic configs %v", ov)
	}
	kp := kt.Partition(1)
	kl, _ := partitionLog(kp)
	if kl.LogStartOffset() != 5 || kl.LogEndOffset() != 11 {
		t.Fatalf("keep partition [%d, %d), want [5, 11)", kl.LogStartOffset(), kl.LogEndOffset())
	}
	kept := storedBatches(t, kp, 5)
	if len(kept) != 4 {
		t.Fatalf("kept %d batches, want 4", len(kept))
	}
	for i, k := range kept {
		if !bytes.Equal(k, sets[2+i]) {
			t.Fatalf("kept batch %d differs from the removed one", i)
		}
	}
	if kp.LeaderEpoch() < 5 {
		t.Fatalf("keep partition epoch %d below its batches' 5", kp.LeaderEpoch())
	}
	// An ordinary consumer reads the kept records at their offsets.
	cl := b.client(kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{"m.truncated": {1: kgo.NewOffset().AtStart()}}))
	defer cl.Close()
	var offs []int64
	for len(offs) < 5 {
		fs := cl.PollFetches(ctxT(t))
		if err := fs.Err(); err != nil {
			t.Fatal(err)
		}
		fs.EachRecord(func(r *kgo.Record) { offs = append(offs, r.Offset) })
	}
	if want := []int64{5, 6, 7, 9, 10}; !slices.Equal(offs, want) {
		t.Fatalf("consumer read offsets %v, want %v", offs, want)
	}
	// Nothing more to cut; nothing to cut creates no keep topic.
	if res, err := b.srv.TruncateKeepingCut(ctxT(t), "m", 1, 5, ""); err != nil || res.TruncatedTo != -1 {
		t.Fatalf("repeated truncation: %+v %v", res, err)
	}
	if res, err := b.srv.TruncateKeepingCut(ctxT(t), "m", 0, 0, "never"); err != nil || res.TruncatedTo != -1 || b.srv.cluster.topic("never") != nil {
		t.Fatalf("truncating an empty partition: %+v %v", res, err)
	}
	// The mirror resumes at the cut.
	mirrorTo(t, b, "m", 1, data(5, 6, 1).encode(t), 5)
}

// A crash after the copy and before the cut: doing it again finds the
// copy (an identical retry) and cuts. A keep partition holding other
// batches at those offsets is refused and nothing is cut.
func TestTruncateKeepingCutResumesAndRefusesForeignKeep(t *testing.T) {
	b := startBroker(t, t.TempDir(), nil)
	repairLog(t, b)
	p := b.srv.cluster.topic("m").Partition(1)
	l, _ := partitionLog(p)
	kt, err := b.srv.ensureKeepTopic("keep", p.Topic)
	if err != nil {
		t.Fatal(err)
	}
	kl, _ := partitionLog(kt.Partition(1))
	if _, _, _, err := copyTail(ctxT(t), l, kl, 7); err != nil {
		t.Fatal(err)
	}
	res, err := b.srv.TruncateKeepingCut(ctxT(t), "m", 1, 7, "keep")
	if err != nil || res.TruncatedTo != 7 || kl.LogEndOffset() != 11 {
		t.Fatalf("completing an interrupted truncation: %+v %v (keep end %d)", res, err, kl.LogEndOffset())
	}
	// New batches at 7.. differ from the kept ones.
	mirrorTo(t, b, "m", 1, data(7, 6, 3).encode(t), 7)
	_, err = b.srv.TruncateKeepingCut(ctxT(t), "m", 1, 7, "keep")
	if !errors.Is(err, kerr.InvalidRequest) || l.LogEndOffset() != 10 {
		t.Fatalf("truncation into a keep topic holding other batches: %v (leo %d)", err, l.LogEndOffset())
	}
	// Refusals: a mirror as keep topic, the topic itself, internal topics,
	// a keep topic with too few partitions.
	createTopic(t, b, "other", 2, map[string]*string{"mirror.mode": sp("push")})
	createTopic(t, b, "small", 1, nil)
	for _, keep := range []string{"other", "m", "__consumer_offsets", "small"} {
		if _, err := b.srv.TruncateKeepingCut(ctxT(t), "m", 1, 8, keep); err == nil {
			t.Fatalf("keep topic %s accepted", keep)
		}
	}
	if _, err := b.srv.TruncateKeepingCut(ctxT(t), "nope", 0, 0, ""); !errors.Is(err, kerr.UnknownTopicOrPartition) {
		t.Fatalf("unknown topic: %v", err)
	}
	if l.LogEndOffset() != 10 {
		t.Fatalf("a refused truncation cut the log to %d", l.LogEndOffset())
	}
}

// The failback's conversion: an ordinary topic and a stopped push mirror
// become pull mirrors of a link (clients refused, state "mirroring" with
// no writer, writer epochs kept so the link's registration is above
// them); a repeated conversion for the same link does nothing, another
// link or a live mirror is refused.
func TestConvertToPullMirror(t *testing.T) {
	b := startBroker(t, t.TempDir(), nil)
	createTopic(t, b, "o", 1, nil)
	if pr := produceOne(t, b, 9, "o", 0, encodeBatch(t, 0, -1, 0, []byte("local"))); pr.ErrorCode != 0 {
		t.Fatalf("produce: %v", kerr.ErrorForCode(pr.ErrorCode))
	}
	if err := b.srv.ConvertToPullMirror(ctxT(t), "o", "back", "src-B"); err != nil {
		t.Fatal(err)
	}
	cfg := b.srv.cluster.topic("o").Config()
	if !cfg.MirrorPull || cfg.MirrorLink != "back" || cfg.MirrorSourceClusterID != "src-B" {
		t.Fatalf("config after conversion: %v", cfg.Overrides())
	}
	if pr := produceOne(t, b, 9, "o", 0, encodeBatch(t, 0, -1, 0, []byte("late"))); pr.ErrorCode != kerr.PolicyViolation.Code {
		t.Fatalf("a client produce after the conversion: %v", kerr.ErrorForCode(pr.ErrorCode))
	}
	if err := b.srv.ConvertToPullMirror(ctxT(t), "o", "back", "src-B"); err != nil {
		t.Fatalf("repeated conversion: %v", err)
	}
	if err := b.srv.ConvertToPullMirror(ctxT(t), "o", "other", ""); !errors.Is(err, kerr.InvalidRequest) {
		t.Fatalf("conversion to another link: %v", err)
	}

	// A push mirror: refused while live; once stopped, converted with its
	// writer epoch kept.
	createTopic(t, b, "m", 1, map[string]*string{"mirror.mode": sp("push")})
	mirrorTo(t, b, "m", 0, data(0, 3, 2).encode(t), 0)
	if err := b.srv.ConvertToPullMirror(ctxT(t), "m", "back", ""); !errors.Is(err, kerr.InvalidRequest) {
		t.Fatalf("conversion of a live mirror: %v", err)
	}
	if err, msg := incrementalAlter(t, b, "m", false, iacDelete("mirror.mode")); err != nil {
		t.Fatalf("stop: %v %s", err, msg)
	}
	mt := b.srv.cluster.topic("m")
	before, _ := b.srv.mirrorStateOf(mt)
	if err := b.srv.ConvertToPullMirror(ctxT(t), "m", "back", ""); err != nil {
		t.Fatal(err)
	}
	st, _ := b.srv.mirrorStateOf(mt)
	ps := st.Partitions[0]
	if st.State != mirrorStateMirroring || ps.Stopping || ps.WriterID != (writerID{}) || ps.WriterEpoch != before.Partitions[0].WriterEpoch || ps.WriterEpoch < 0 {
		t.Fatalf("mirror state after converting a stopped mirror: %+v (before %+v)", st, before)
	}
	if !mt.Config().MirrorPull {
		t.Fatalf("config %v", mt.Config().Overrides())
	}
	if err := b.srv.ConvertToPullMirror(ctxT(t), "__consumer_offsets", "back", ""); err == nil {
		t.Fatal("an internal topic was converted")
	}
}

func TestMirrorStopPoint(t *testing.T) {
	b := startBroker(t, t.TempDir(), nil)
	createTopic(t, b, "m", 1, map[string]*string{"mirror.mode": sp("push")})
	mirrorTo(t, b, "m", 0, data(0, 3, 4).encode(t), 0)
	if _, _, ok := b.srv.MirrorStopPoint("m", 0); ok {
		t.Fatal("a stop point before any stop")
	}
	if err, msg := incrementalAlter(t, b, "m", false, iacDelete("mirror.mode")); err != nil {
		t.Fatalf("stop: %v %s", err, msg)
	}
	if pr := produceOne(t, b, 9, "m", 0, encodeBatch(t, 0, -1, 0, []byte("local"))); pr.ErrorCode != 0 {
		t.Fatalf("produce after the stop: %v", kerr.ErrorForCode(pr.ErrorCode))
	}
	if off, epoch, ok := b.srv.MirrorStopPoint("m", 0); !ok || off != 3 || epoch != 3 {
		t.Fatalf("stop point %d epoch %d ok %v, want 3 epoch 3", off, epoch, ok)
	}
	if _, _, ok := b.srv.MirrorStopPoint("nope", 0); ok {
		t.Fatal("a stop point of a missing topic")
	}
}

package broker

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/verbatim-kafka/verbatim/coordlog/coordlogtest"
	"github.com/verbatim-kafka/verbatim/kbatch"
	"github.com/verbatim-kafka/verbatim/kbatch/kbatchtest"
	"github.com/verbatim-kafka/verbatim/storage"
)

// stopBatch is a source batch for the stop tests: n records from producer
// pid (-1: none) with epoch pepoch and base sequence seq, transactional
// when txn.
func stopBatch(t *testing.T, base int64, epoch int32, pid int64, seq int32, n int, txn bool) []byte {
	t.Helper()
	var recs []kbatch.Record
	for i := 0; i < n; i++ {
		recs = append(recs, kbatch.Record{OffsetDelta: int32(i), Key: []byte("k"), Value: []byte(fmt.Sprintf("mirrored-%d", base+int64(i)))})
	}
	bt := kbatch.NewBatch(1_700_000_000_000+base, recs...)
	bt.BaseOffset, bt.LeaderEpoch = base, epoch
	if pid >= 0 {
		bt.ProducerID, bt.ProducerEpoch, bt.BaseSequence = pid, 0, seq
	}
	if txn {
		bt.Attributes |= kbatch.TransactionalBit
	}
	return kbatchtest.Encode(t, bt)
}

// mirrorTo sends one mirror produce of set to partition part (writer
// epoch 1) and fails the test unless it is accepted.
func mirrorTo(t *testing.T, b *testBroker, topic string, part int32, set []byte, expected int64) {
	t.Helper()
	pr := rawRequest[*kmsg.ProduceResponse](t, b, mirrorProduce(11, topic, part, set, expected, -1)).Topics[0].Partitions[0]
	if pr.ErrorCode != 0 {
		t.Fatalf("mirror produce at %d: %v %v", expected, kerr.ErrorForCode(pr.ErrorCode), strPtr(pr.ErrorMessage))
	}
}

func strPtr(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// incrementalAlter sends one IncrementalAlterConfigs for topic and
// returns the resource's error and message.
func incrementalAlter(t *testing.T, b *testBroker, topic string, validateOnly bool, cfgs ...kmsg.IncrementalAlterConfigsRequestResourceConfig) (error, string) {
	t.Helper()
	req := kmsg.NewPtrIncrementalAlterConfigsRequest()
	req.ValidateOnly = validateOnly
	rr := kmsg.NewIncrementalAlterConfigsRequestResource()
	rr.ResourceType, rr.ResourceName, rr.Configs = kmsg.ConfigResourceTypeTopic, topic, cfgs
	req.Resources = append(req.Resources, rr)
	resp := rawRequest[*kmsg.IncrementalAlterConfigsResponse](t, b, req)
	return kerr.ErrorForCode(resp.Resources[0].ErrorCode), strPtr(resp.Resources[0].ErrorMessage)
}

func iacDelete(name string) kmsg.IncrementalAlterConfigsRequestResourceConfig {
	c := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
	c.Name, c.Op = name, kmsg.IncrementalAlterConfigOpDelete
	return c
}

func iacSet(name, v string) kmsg.IncrementalAlterConfigsRequestResourceConfig {
	c := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
	c.Name, c.Op, c.Value = name, kmsg.IncrementalAlterConfigOpSet, &v
	return c
}

// storedBatches reads every batch of p's log from offset from.
func storedBatches(t *testing.T, p *Partition, from int64) [][]byte {
	t.Helper()
	l, err := partitionLog(p)
	if err != nil {
		t.Fatal(err)
	}
	var out [][]byte
	for next := max(from, l.LogStartOffset()); next < l.LogEndOffset(); {
		sl, err := l.Read(next, 1<<20)
		if err != nil {
			t.Fatal(err)
		}
		buf, err := sl.Bytes(nil)
		if err != nil || len(buf) == 0 {
			t.Fatalf("reading %s at %d: %d bytes, %v", p.Dir(), next, len(buf), err)
		}
		for len(buf) >= kbatch.HeaderSize {
			n := kbatch.LogOverhead + int(kbatch.Length(buf))
			out = append(out, buf[:n:n])
			next = kbatch.BaseOffset(buf) + int64(kbatch.LastOffsetDelta(buf)) + 1
			buf = buf[n:]
		}
	}
	return out
}

func batchPID(b []byte) int64 { return int64(binary.BigEndian.Uint64(b[kbatch.ProducerIDOffset:])) }

// controlBatches counts, in batches, the control batches of type typ
// (for ABORT: of producer pid).
func controlBatches(bs [][]byte, typ int16, pid int64) int {
	n := 0
	for _, b := range bs {
		if ct, ok := kbatch.ControlType(b); ok && ct == typ && (typ == kbatch.ControlMirrorPidReset || batchPID(b) == pid) {
			n++
		}
	}
	return n
}

// TestMirrorStop is brief I6 behind an IncrementalAlterConfigs DELETE of
// mirror.mode: validateOnly changes nothing; the stop bumps the leader
// epoch above every mirrored one, aborts the open transaction, writes the
// type-7 barrier with the recorded source cluster id, clears producer
// state and makes the topic writable; afterwards a raw producer reusing a
// mirrored producer id/epoch/sequence, a kgo idempotent producer (whose
// allocated id collides with a mirrored one) and a kgo transactional
// producer all append at new offsets, none acknowledged as a duplicate.
func TestMirrorStop(t *testing.T) {
	dir := t.TempDir()
	// A manual coordinator clock: the periodic producer id scan
	// (pidScanInterval) must not move the allocator above the mirrored
	// ids mid-test; the collision below is the point.
	clk := coordlogtest.NewClock(time.Now())
	b := startClockBroker(t, dir, clk)
	createTopic(t, b, "m", 1, map[string]*string{"mirror.mode": sp("push"), "mirror.source.cluster.id": sp("src-A"), "retention.ms": sp("-1")})
	// Producers 0..3 wrote one record each (sequence 0) on the source:
	// the ids a fresh Verbatim hands out first. Producer 7 left a
	// transaction open.
	sets := [][]byte{
		stopBatch(t, 0, 2, 0, 0, 1, false),
		stopBatch(t, 1, 2, 1, 0, 1, false),
		stopBatch(t, 5, 5, 2, 0, 1, false), // gap 2..4
		stopBatch(t, 6, 5, 3, 0, 1, false),
		stopBatch(t, 7, 6, 7, 0, 2, true), // open: 7..8
	}
	expect := int64(0)
	for _, s := range sets {
		mirrorTo(t, b, "m", 0, s, expect)
		expect = kbatch.BaseOffset(s) + int64(kbatch.LastOffsetDelta(s)) + 1
	}
	p := b.srv.cluster.topic("m").Partition(0)
	l, _ := partitionLog(p)
	epochBefore := p.LeaderEpoch()
	if epochBefore < 6+storage.MirrorEpochHeadroom {
		t.Fatalf("leader epoch %d after mirroring epoch 6", epochBefore)
	}

	// Refusals: changing mirror.*, a legacy AlterConfigs dropping it.
	if err, msg := incrementalAlter(t, b, "m", false, iacSet("mirror.source.cluster.id", "other")); !errors.Is(err, kerr.InvalidConfig) || !strings.Contains(msg, "cannot be changed") {
		t.Fatalf("changing mirror.source.cluster.id: %v %q", err, msg)
	}
	rs, _ := b.admin().AlterTopicConfigsState(ctxT(t), []kadm.AlterConfig{{Name: "retention.ms", Value: sp("-1")}}, "m")
	if !errors.Is(rs[0].Err, kerr.InvalidConfig) || !strings.Contains(rs[0].ErrMessage, "IncrementalAlterConfigs DELETE") {
		t.Fatalf("legacy AlterConfigs dropping mirror.mode: %v %q", rs[0].Err, rs[0].ErrMessage)
	}
	// validateOnly checks the stop and does nothing.
	if err, msg := incrementalAlter(t, b, "m", true, iacDelete("mirror.mode")); err != nil {
		t.Fatalf("validateOnly stop: %v %q", err, msg)
	}
	if st, _ := b.srv.mirrorStateOf(p.Topic); !p.Topic.Config().MirrorPush || st.State != mirrorStateMirroring || l.LogEndOffset() != 9 || p.LeaderEpoch() != epochBefore {
		t.Fatalf("validateOnly changed something: mirror %v state %s leo %d epoch %d", p.Topic.Config().MirrorPush, st.State, l.LogEndOffset(), p.LeaderEpoch())
	}
	// Client DeleteRecords stay refused while a mirror.
	if low, err := deleteRecords(p, 1, false); err == nil {
		t.Fatalf("client DeleteRecords on a mirror: low watermark %d", low)
	}

	// The stop, with another config change in the same request (ten
	// years: the retention the stop wakes must keep the 2023 batches
	// checked below; the new value reaches the live log at once).
	if err, msg := incrementalAlter(t, b, "m", false, iacDelete("mirror.mode"), iacSet("retention.ms", "315360000000")); err != nil {
		t.Fatalf("stop: %v %q", err, msg)
	}
	cfg := p.Topic.Config()
	ov := cfg.Overrides()
	if cfg.MirrorPush || ov["mirror.source.cluster.id"] != "" || ov["retention.ms"] != "315360000000" {
		t.Fatalf("config after stop: %v", ov)
	}
	newEpoch := p.LeaderEpoch()
	if newEpoch != max(epochBefore, 6)+1 {
		t.Fatalf("leader epoch after stop %d, want %d", newEpoch, max(epochBefore, 6)+1)
	}
	md, err := b.admin().Metadata(ctxT(t), "m")
	if err != nil || md.Topics["m"].Partitions[0].LeaderEpoch != newEpoch {
		t.Fatalf("metadata leader epoch: %v %v", md.Topics["m"].Partitions, err)
	}
	got := storedBatches(t, p, 9)
	if len(got) != 2 {
		t.Fatalf("stop wrote %d batches, want ABORT + barrier", len(got))
	}
	abort, barrier := got[0], got[1]
	if ct, _ := kbatch.ControlType(abort); ct != kbatch.ControlAbort || batchPID(abort) != 7 || kbatch.LeaderEpoch(abort) != newEpoch || kbatch.BaseOffset(abort) != 9 {
		t.Fatalf("abort marker: type %d pid %d epoch %d offset %d", ct, batchPID(abort), kbatch.LeaderEpoch(abort), kbatch.BaseOffset(abort))
	}
	recs, err := kbatch.Records(barrier)
	if ct, _ := kbatch.ControlType(barrier); err != nil || ct != kbatch.ControlMirrorPidReset || kbatch.LeaderEpoch(barrier) != newEpoch ||
		!bytes.Equal(recs[0].Value, kbatch.MirrorPidResetValue("src-A")) {
		t.Fatalf("barrier: type %d epoch %d %v", ct, kbatch.LeaderEpoch(barrier), err)
	}
	if n := len(l.Producers()); n != 0 || l.LastStableOffset() != 11 || l.LogEndOffset() != 11 {
		t.Fatalf("after stop: %d producers, LSO %d, LEO %d", n, l.LastStableOffset(), l.LogEndOffset())
	}
	fr := fetchAll(t, b, "m", 0, 1)
	if len(fr.AbortedTransactions) != 1 || fr.AbortedTransactions[0].ProducerID != 7 || fr.AbortedTransactions[0].FirstOffset != 7 {
		t.Fatalf("read_committed aborted list %+v", fr.AbortedTransactions)
	}
	// Mirror writes are over.
	if pr := mirrorOne(t, b, "m", stopBatch(t, 11, 6, -1, -1, 1, false), 11, -1); pr.ErrorCode != kerr.PolicyViolation.Code {
		t.Fatalf("mirror produce after stop: %v", kerr.ErrorForCode(pr.ErrorCode))
	}

	// A raw producer reusing mirrored producer 3's id, epoch and sequence.
	raw := encodeBatch(t, 0, 3, 0, []byte("local raw"))
	if pr := produceOne(t, b, 9, "m", 0, raw); pr.ErrorCode != 0 || pr.BaseOffset != 11 {
		t.Fatalf("raw produce as producer 3 seq 0: %v base %d (the mirrored batch is at 6)", kerr.ErrorForCode(pr.ErrorCode), pr.BaseOffset)
	}
	// kgo's idempotent producer gets a fresh id, one the mirror used.
	idem := b.client(kgo.DefaultProduceTopic("m"))
	var acked []*kgo.Record
	for i := 0; i < 3; i++ {
		r, err := idem.ProduceSync(ctxT(t), kgo.StringRecord(fmt.Sprintf("idem-%d", i))).First()
		if err != nil {
			t.Fatal(err)
		}
		acked = append(acked, r)
	}
	if pid := acked[0].ProducerID; pid < 0 || pid > 3 {
		t.Fatalf("kgo's producer id %d does not collide with a mirrored one (0..3): the allocator changed, pick the mirrored ids anew", pid)
	}
	txn := b.client(kgo.DefaultProduceTopic("m"), kgo.TransactionalID("after-stop"))
	if err := txn.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 2; i++ {
		r, err := txn.ProduceSync(ctxT(t), kgo.StringRecord(fmt.Sprintf("txn-%d", i))).First()
		if err != nil {
			t.Fatal(err)
		}
		acked = append(acked, r)
	}
	if err := txn.EndTransaction(ctxT(t), kgo.TryCommit); err != nil {
		t.Fatal(err)
	}
	last := int64(11)
	for _, r := range acked {
		if r.Offset <= last {
			t.Fatalf("%q acknowledged at %d, not after %d", r.Value, r.Offset, last)
		}
		last = r.Offset
	}
	byOffset := map[int64]string{}
	for _, r := range readAll(t, b, "m", true, 10) {
		byOffset[r.Offset] = string(r.Value)
	}
	for _, r := range append(acked, &kgo.Record{Offset: 11, Value: []byte("local raw")}) {
		if byOffset[r.Offset] != string(r.Value) {
			t.Errorf("offset %d holds %q, acknowledged %q", r.Offset, byOffset[r.Offset], r.Value)
		}
	}
	if len(byOffset) != 10 {
		t.Errorf("read_committed read %d records, want 4 mirrored + 6 local: %v", len(byOffset), byOffset)
	}

	// After a restart: still stopped, epoch kept, nothing open.
	b.stop()
	b = startBroker(t, dir, nil)
	p = b.srv.cluster.topic("m").Partition(0)
	l, _ = partitionLog(p)
	st, err := b.srv.mirrorStateOf(p.Topic)
	if err != nil || st.State != mirrorStateStopped || p.Topic.Config().MirrorPush || p.LeaderEpoch() != newEpoch {
		t.Fatalf("after restart: state %q (%v) mirror %v epoch %d", st.State, err, p.Topic.Config().MirrorPush, p.LeaderEpoch())
	}
	if len(l.OngoingTransactions()) != 0 || l.LastStableOffset() != l.LogEndOffset() {
		t.Fatalf("after restart: open %v LSO %d LEO %d", l.OngoingTransactions(), l.LastStableOffset(), l.LogEndOffset())
	}
	// No mirrored state survives: neither a mirrored producer id that no
	// local client was given nor any batch from before the barrier
	// (offset 10).
	local := map[int64]bool{3: true} // the raw producer
	for _, r := range acked {
		local[r.ProducerID] = true
	}
	for _, pi := range l.Producers() {
		if (pi.ProducerID == 7 || pi.ProducerID == 2) && !local[pi.ProducerID] {
			t.Fatalf("mirrored producer %d survived the barrier on recovery", pi.ProducerID)
		}
		for _, bm := range pi.Batches {
			if bm.LastOffset < 11 {
				t.Fatalf("producer %d keeps a batch ending at %d, before the barrier, after recovery", pi.ProducerID, bm.LastOffset)
			}
		}
	}
	// Client DeleteRecords are accepted on the former mirror.
	if low, err := deleteRecords(p, 1, false); err != nil || low != 1 {
		t.Fatalf("DeleteRecords after stop: %d %v", low, err)
	}
}

// stopFixture creates a two-partition mirror topic whose partitions each
// hold mirrored data and one open transaction (producer 100+partition).
func stopFixture(t *testing.T, b *testBroker) {
	t.Helper()
	createTopic(t, b, "m", 2, map[string]*string{"mirror.mode": sp("push"), "mirror.source.cluster.id": sp("src-B")})
	for part := int32(0); part < 2; part++ {
		mirrorTo(t, b, "m", part, stopBatch(t, 0, 3, -1, -1, 3, false), 0)
		mirrorTo(t, b, "m", part, stopBatch(t, 3, 4, 100+int64(part), 0, 2, true), 3)
	}
}

// checkStopped asserts the complete outcome of a stop of stopFixture's
// topic: exactly one ABORT per open transaction and one barrier after the
// mirrored data, nothing open, the epoch above the mirrored ones, the
// topic writable.
func checkStopped(t *testing.T, b *testBroker) {
	t.Helper()
	tp := b.srv.cluster.topic("m")
	st, err := b.srv.mirrorStateOf(tp)
	if err != nil || st.State != mirrorStateStopped || tp.Config().MirrorPush {
		t.Fatalf("state %q (%v), mirror.mode still set: %v", st.State, err, tp.Config().MirrorPush)
	}
	for _, p := range tp.Partitions() {
		bs := storedBatches(t, p, 5)
		if a, r := controlBatches(bs, kbatch.ControlAbort, 100+int64(p.Index)), controlBatches(bs, kbatch.ControlMirrorPidReset, -1); a != 1 || r != 1 || len(bs) != 2 {
			t.Fatalf("%s: %d batches after the mirrored data, %d ABORT, %d barriers", p.Dir(), len(bs), a, r)
		}
		l, _ := partitionLog(p)
		if len(l.Producers()) != 0 || l.LastStableOffset() != 7 {
			t.Fatalf("%s: producers %v, LSO %d", p.Dir(), l.Producers(), l.LastStableOffset())
		}
		if p.LeaderEpoch() <= 4 || kbatch.LeaderEpoch(bs[1]) != p.LeaderEpoch() {
			t.Fatalf("%s: leader epoch %d, barrier epoch %d", p.Dir(), p.LeaderEpoch(), kbatch.LeaderEpoch(bs[1]))
		}
	}
	if pr := produceOne(t, b, 9, "m", 1, encodeBatch(t, 0, -1, -1, []byte("local"))); pr.ErrorCode != 0 || pr.BaseOffset != 7 {
		t.Fatalf("produce after stop: %v at %d", kerr.ErrorForCode(pr.ErrorCode), pr.BaseOffset)
	}
}

// TestMirrorStopCrashRecovery interrupts the stop after each of its steps
// (as a crash would: the hook ends it there) and shows it is completed,
// never half-stopped: by the next start of the broker on the same data
// dir, or by repeating the DELETE.
func TestMirrorStopCrashRecovery(t *testing.T) {
	points := []struct {
		part int32
		step int
	}{
		{0, stopStepRecorded}, {0, stopStepEpoch}, {0, stopStepAborts}, {0, stopStepBarrier},
		{1, stopStepRecorded}, {1, stopStepAborts}, {-1, stopStepWritable},
	}
	for _, restart := range []bool{true, false} {
		for _, pt := range points {
			t.Run(fmt.Sprintf("restart=%v/partition=%d/step=%d", restart, pt.part, pt.step), func(t *testing.T) {
				dir := t.TempDir()
				b := startBroker(t, dir, nil)
				stopFixture(t, b)
				crash := errors.New("injected crash")
				hook := func(topic string, part int32, step int) error {
					if part == pt.part && step == pt.step {
						return crash
					}
					return nil
				}
				mirrorStopHook.Store(&hook)
				t.Cleanup(func() { mirrorStopHook.Store(nil) })
				if err, msg := incrementalAlter(t, b, "m", false, iacDelete("mirror.mode")); err == nil {
					t.Fatal("the interrupted stop was answered as a success")
				} else if !strings.Contains(msg, "injected crash") {
					t.Fatalf("interrupted stop: %v %q", err, msg)
				}
				// Half-way: mirror writes are refused.
				if pr := mirrorOne(t, b, "m", stopBatch(t, 5, 4, -1, -1, 1, false), 5, -1); pr.ErrorCode != kerr.PolicyViolation.Code {
					t.Fatalf("mirror produce while stopping: %v", kerr.ErrorForCode(pr.ErrorCode))
				}
				mirrorStopHook.Store(nil)
				if restart {
					b.stop()
					b = startBroker(t, dir, nil)
				} else if err, msg := incrementalAlter(t, b, "m", false, iacDelete("mirror.mode")); err != nil {
					t.Fatalf("repeated stop: %v %q", err, msg)
				}
				checkStopped(t, b)
			})
		}
	}
}

// TestMirrorRetentionDormant: while a topic is a mirror the retention
// round leaves its segments alone (the source's log start is forwarded
// instead); the stop wakes it with the topic's own retention config.
func TestMirrorRetentionDormant(t *testing.T) {
	b := startBroker(t, t.TempDir(), nil)
	createTopic(t, b, "m", 1, map[string]*string{"mirror.mode": sp("push"), "retention.ms": sp("1000"), "segment.ms": sp("1")})
	expect := int64(0)
	for i := int64(0); i < 4; i++ {
		s := stopBatch(t, i*10, 1, -1, -1, 2, false)
		mirrorTo(t, b, "m", 0, s, expect)
		expect = i*10 + 2
	}
	p := b.srv.cluster.topic("m").Partition(0)
	l, _ := partitionLog(p)
	if l.NumSegments() < 2 {
		t.Fatalf("%d segments: the test needs rolled segments", l.NumSegments())
	}
	b.srv.applyRetention(time.Now().UnixMilli())
	if l.LogStartOffset() != 0 {
		t.Fatalf("retention ran on a mirror topic: log start %d", l.LogStartOffset())
	}
	if err, msg := incrementalAlter(t, b, "m", false, iacDelete("mirror.mode")); err != nil {
		t.Fatalf("stop: %v %q", err, msg)
	}
	if l.LogStartOffset() == 0 {
		t.Fatalf("the stop did not wake retention (segments %d)", l.NumSegments())
	}
}

// TestMirrorStopChain: a downstream mirror of a stopped topic (a chain
// B -> C) stores B's ABORT markers and barrier verbatim and ends with the
// same producer state, LSO and epoch cache as B: the barrier clears the
// mirrored producer state downstream exactly as it did upstream.
func TestMirrorStopChain(t *testing.T) {
	b := startBroker(t, t.TempDir(), nil)
	createTopic(t, b, "m", 1, map[string]*string{"mirror.mode": sp("push"), "mirror.source.cluster.id": sp("src-A")})
	createTopic(t, b, "c", 1, map[string]*string{"mirror.mode": sp("push"), "mirror.source.cluster.id": sp("verbatim-B")})
	mirrorTo(t, b, "m", 0, stopBatch(t, 0, 1, 0, 0, 2, false), 0)
	mirrorTo(t, b, "m", 0, stopBatch(t, 2, 2, 5, 0, 2, true), 2) // left open
	if err, msg := incrementalAlter(t, b, "m", false, iacDelete("mirror.mode")); err != nil {
		t.Fatalf("stop: %v %q", err, msg)
	}
	// Local writes on B after the stop, one of them reusing producer 0.
	if pr := produceOne(t, b, 9, "m", 0, encodeBatch(t, 0, 0, 0, []byte("b-local"))); pr.ErrorCode != 0 {
		t.Fatalf("local write on B: %v", kerr.ErrorForCode(pr.ErrorCode))
	}
	if pr := produceOne(t, b, 9, "m", 0, encodeBatch(t, 0, 0, 1, []byte("b-local-2"))); pr.ErrorCode != 0 {
		t.Fatalf("local write on B: %v", kerr.ErrorForCode(pr.ErrorCode))
	}
	src := b.srv.cluster.topic("m").Partition(0)
	expect := int64(0)
	for _, bt := range storedBatches(t, src, 0) {
		mirrorTo(t, b, "c", 0, bt, expect)
		expect = kbatch.BaseOffset(bt) + int64(kbatch.LastOffsetDelta(bt)) + 1
	}
	dst := b.srv.cluster.topic("c").Partition(0)
	ls, _ := partitionLog(src)
	ld, _ := partitionLog(dst)
	sb, db := storedBatches(t, src, 0), storedBatches(t, dst, 0)
	if len(sb) != len(db) {
		t.Fatalf("%d batches on B, %d on C", len(sb), len(db))
	}
	for i := range sb {
		if !bytes.Equal(sb[i], db[i]) {
			t.Fatalf("batch %d differs", i)
		}
	}
	if controlBatches(db, kbatch.ControlMirrorPidReset, -1) != 1 {
		t.Fatal("C does not hold B's barrier")
	}
	producers := func(l interface{ Producers() []storage.ProducerInfo }) string {
		var out []string
		for _, pi := range l.Producers() {
			out = append(out, fmt.Sprintf("%d/%d/%d/%d", pi.ProducerID, pi.Epoch, pi.LastSequence, pi.CurrentTxnFirstOffset))
		}
		return strings.Join(out, ",")
	}
	if ps, pd := producers(ls), producers(ld); ps != pd || ps != "0/0/1/-1" {
		t.Fatalf("producer state B %q, C %q; want only B's local producer 0 (seq 1)", ps, pd)
	}
	if ls.LastStableOffset() != ld.LastStableOffset() || len(ld.OngoingTransactions()) != 0 {
		t.Fatalf("LSO B %d C %d, open on C %v", ls.LastStableOffset(), ld.LastStableOffset(), ld.OngoingTransactions())
	}
	if es, ed := fmt.Sprint(ls.EpochCache().Entries()), fmt.Sprint(ld.EpochCache().Entries()); es != ed {
		t.Fatalf("epoch cache B %s, C %s", es, ed)
	}
}

package broker

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/verbatim-kafka/verbatim/kbatch"
	"github.com/verbatim-kafka/verbatim/wireext"
)

// mirrorAs sends set as writer epoch we with the zero id; it returns the
// partition answer.
func mirrorAs(t *testing.T, b *testBroker, we int32, set []byte, expected int64) kmsg.ProduceResponseTopicPartition {
	t.Helper()
	return mirrorAsID(t, b, we, writerID{}, set, expected)
}

// TestMirrorWriterEpochFencing: registration assigns writer epochs; only
// the writer registered last on a partition writes it, across restarts.
// An earlier registrant's produces (identical retries included) and
// log-start forwards are PRODUCER_FENCED and change nothing, and so is the
// current epoch sent with another id; an epoch never assigned is
// INVALID_PRODUCER_EPOCH.
func TestMirrorWriterEpochFencing(t *testing.T) {
	dir := t.TempDir()
	b := startBroker(t, dir, nil)
	createTopic(t, b, "m", 1, map[string]*string{"mirror.mode": sp("push")})
	l, _ := partitionLog(b.srv.cluster.topic("m").Partition(0))
	b0 := stopBatch(t, 0, 1, -1, -1, 2, false)
	b1 := stopBatch(t, 2, 1, -1, -1, 2, false)
	b2 := stopBatch(t, 4, 1, -1, -1, 2, false)
	ida, idb := writerID{0xa}, writerID{0xb}
	ea := registerAs(t, b, "m", ida, 0)
	if ea != testWriterEpoch+1 {
		t.Fatalf("second registration: epoch %d", ea)
	}
	if pr := mirrorAsID(t, b, testWriterEpoch, writerID{}, b0, 0); pr.ErrorCode != kerr.ProducerFenced.Code {
		t.Fatalf("the first registrant after a second one: %v", kerr.ErrorForCode(pr.ErrorCode))
	}
	if pr := mirrorAsID(t, b, ea, ida, b0, 0); pr.ErrorCode != 0 {
		t.Fatalf("writer a: %v", kerr.ErrorForCode(pr.ErrorCode))
	}
	eb := registerAs(t, b, "m", idb, 0)
	pr := mirrorAsID(t, b, ea, ida, b1, 2)
	want := fmt.Sprintf("mirror writer epoch %d is older than %d, the writer registered last on m-0", ea, eb)
	if pr.ErrorCode != kerr.ProducerFenced.Code || !strings.Contains(strPtr(pr.ErrorMessage), want) {
		t.Fatalf("writer a after b registered: %v %q", kerr.ErrorForCode(pr.ErrorCode), strPtr(pr.ErrorMessage))
	}
	if pr := mirrorAsID(t, b, ea, ida, b0, 0); pr.ErrorCode != kerr.ProducerFenced.Code {
		t.Fatalf("writer a's identical retry after b registered: %v", kerr.ErrorForCode(pr.ErrorCode))
	}
	if pr := mirrorAsID(t, b, eb, ida, b1, 2); pr.ErrorCode != kerr.ProducerFenced.Code || !strings.Contains(strPtr(pr.ErrorMessage), "is not the registrant of epoch") {
		t.Fatalf("b's epoch with a's id: %v %q", kerr.ErrorForCode(pr.ErrorCode), strPtr(pr.ErrorMessage))
	}
	if pr := mirrorAsID(t, b, eb+1, idb, b1, 2); pr.ErrorCode != kerr.InvalidProducerEpoch.Code || !strings.Contains(strPtr(pr.ErrorMessage), "was never assigned") {
		t.Fatalf("an epoch above the assigned: %v %q", kerr.ErrorForCode(pr.ErrorCode), strPtr(pr.ErrorMessage))
	}
	if l.LogEndOffset() != 2 {
		t.Fatalf("a refused produce appended: log end %d", l.LogEndOffset())
	}
	if pr := mirrorAsID(t, b, eb, idb, b1, 2); pr.ErrorCode != 0 {
		t.Fatalf("writer b: %v", kerr.ErrorForCode(pr.ErrorCode))
	}
	if dr := mirrorDeleteAsID(t, b, ea, ida, 2); dr.ErrorCode != kerr.ProducerFenced.Code || l.LogStartOffset() != 0 {
		t.Fatalf("log-start forward by writer a: %v, log start %d", kerr.ErrorForCode(dr.ErrorCode), l.LogStartOffset())
	}

	b.stop()
	b = startBroker(t, dir, nil)
	l, _ = partitionLog(b.srv.cluster.topic("m").Partition(0))
	if pr := mirrorAsID(t, b, ea, ida, b2, 4); pr.ErrorCode != kerr.ProducerFenced.Code {
		t.Fatalf("writer a after a restart: %v", kerr.ErrorForCode(pr.ErrorCode))
	}
	if dr := mirrorDeleteAsID(t, b, eb, idb, 2); dr.ErrorCode != 0 || dr.LowWatermark != 2 {
		t.Fatalf("log-start forward by writer b: %v low %d", kerr.ErrorForCode(dr.ErrorCode), dr.LowWatermark)
	}
	if pr := mirrorAsID(t, b, eb, idb, b2, 4); pr.ErrorCode != 0 || l.LogEndOffset() != 6 {
		t.Fatalf("writer b after a restart: %v, log end %d", kerr.ErrorForCode(pr.ErrorCode), l.LogEndOffset())
	}
	if e := registerAs(t, b, "m", ida, 0); e != eb+1 {
		t.Fatalf("registration after a restart: epoch %d, want %d", e, eb+1)
	}
}

// TestMirrorForgedWriterEpoch: a mirror produce or log-start forward with
// a client-chosen epoch (2147483647, the attack on clock-based epochs) is
// INVALID_PRODUCER_EPOCH, on a partition with a writer and on one without,
// and locks nobody out: the registered writer goes on, the next
// registration gets the next epoch.
func TestMirrorForgedWriterEpoch(t *testing.T) {
	b := startBroker(t, t.TempDir(), nil)
	createTopic(t, b, "m", 2, map[string]*string{"mirror.mode": sp("push")})
	ida := writerID{0xa}
	ea := registerAs(t, b, "m", ida, 0)
	for _, part := range []int32{0, 1} {
		req := mirrorProduce(11, "m", part, stopBatch(t, 0, 1, -1, -1, 1, false), 0, -1)
		req.UnknownTags.Set(wireext.MirrorTag, writerTagID(math.MaxInt32, writerID{0xff}))
		if pr := rawRequest[*kmsg.ProduceResponse](t, b, req).Topics[0].Partitions[0]; pr.ErrorCode != kerr.InvalidProducerEpoch.Code {
			t.Fatalf("partition %d: a forged epoch: %v", part, kerr.ErrorForCode(pr.ErrorCode))
		}
	}
	if dr := mirrorDeleteAsID(t, b, math.MaxInt32, writerID{}, 0); dr.ErrorCode != kerr.InvalidProducerEpoch.Code {
		t.Fatalf("a forged forward: %v", kerr.ErrorForCode(dr.ErrorCode))
	}
	if pr := mirrorAsID(t, b, ea, ida, stopBatch(t, 0, 1, -1, -1, 1, false), 0); pr.ErrorCode != 0 {
		t.Fatalf("the registered writer after the forgeries: %v", kerr.ErrorForCode(pr.ErrorCode))
	}
	if e := registerAs(t, b, "m", writerID{0xc}, 0, 1); e != ea+1 {
		t.Fatalf("the next registration: epoch %d, want %d", e, ea+1)
	}
	st, _ := b.srv.mirrorStateOf(b.srv.cluster.topic("m"))
	if st.Partitions[0].WriterEpoch != ea+1 || st.Partitions[1].WriterEpoch != ea+1 {
		t.Fatalf("state %+v", st.Partitions)
	}
}

// TestMirrorRegistrationOneEpoch: a registration gives all its partitions
// one epoch, above the highest any had, answered in every partition's tag
// and persisted; partitions of an ordinary topic are refused without one,
// and so are those of a stopped mirror.
func TestMirrorRegistrationOneEpoch(t *testing.T) {
	b := startBroker(t, t.TempDir(), nil)
	createTopic(t, b, "m", 2, map[string]*string{"mirror.mode": sp("push")})
	createTopic(t, b, "plain", 1, nil)
	for i := 0; i < 3; i++ {
		registerAs(t, b, "m", writerID{1}, 0)
	}
	if e := registerAs(t, b, "m", writerID{2}, 0, 1); e != testWriterEpoch+4 {
		t.Fatalf("registration of partitions at epochs 3 and 0: %d, want 4", e)
	}
	st, _ := b.srv.mirrorStateOf(b.srv.cluster.topic("m"))
	for _, ps := range st.Partitions {
		if ps.WriterEpoch != 4 || ps.WriterID != (writerID{2}) {
			t.Fatalf("persisted %+v", st.Partitions)
		}
	}
	resp := rawRequest[*kmsg.DeleteRecordsResponse](t, b, registration("plain", writerID{3}, 0))
	if p := resp.Topics[0].Partitions[0]; p.ErrorCode != kerr.PolicyViolation.Code || assignedEpoch(t, p) != -1 {
		t.Fatalf("registration on an ordinary topic: %v epoch %d", kerr.ErrorForCode(p.ErrorCode), assignedEpoch(t, p))
	}
	if err, msg := incrementalAlter(t, b, "m", false, iacDelete("mirror.mode")); err != nil {
		t.Fatalf("stop: %v %q", err, msg)
	}
	resp = rawRequest[*kmsg.DeleteRecordsResponse](t, b, registration("m", writerID{3}, 0))
	if p := resp.Topics[0].Partitions[0]; p.ErrorCode != kerr.PolicyViolation.Code || assignedEpoch(t, p) != -1 {
		t.Fatalf("registration after the stop: %v epoch %d", kerr.ErrorForCode(p.ErrorCode), assignedEpoch(t, p))
	}
}

// TestMirrorWriterMigration: a data dir from before broker-assigned epochs
// (state version 1) holding a poisoned writer record (2147483647) and a
// clock-based one: at the first start both are reset, clock epochs are
// refused (INVALID_PRODUCER_EPOCH), the next registration gets epoch 0 and
// writes; the migrated state is persisted (version 2).
func TestMirrorWriterMigration(t *testing.T) {
	dir := t.TempDir()
	b := startBroker(t, dir, nil)
	createTopic(t, b, "m", 2, map[string]*string{"mirror.mode": sp("push")})
	tp := b.srv.cluster.topic("m")
	name := filepath.Join(dir, filepath.FromSlash(mirrorStateDir), mirrorStateName(tp.ID))
	b.stop()
	old := fmt.Sprintf(`{"version":1,"topic":"m","topic_id":"%x","state":"mirroring","partitions":[`+
		`{"writer_epoch":2147483647,"writer_id":"00000000000000000000000000000000","last_mirrored_offset":-1,"last_mirrored_epoch":-1,"stop_from":-1,"new_epoch":-1},`+
		`{"writer_epoch":1700000000,"writer_id":"17f0000000000000a1a2a3a4a5a6a7a8","last_mirrored_offset":-1,"last_mirrored_epoch":-1,"stop_from":-1,"new_epoch":-1}]}`, tp.ID[:])
	if err := os.WriteFile(name, []byte(old), 0o644); err != nil {
		t.Fatal(err)
	}
	b = startBroker(t, dir, nil)
	data, err := os.ReadFile(name)
	if err != nil || !strings.Contains(string(data), `"version": 2`) || strings.Contains(string(data), "2147483647") {
		t.Fatalf("state file after the first start (%v):\n%s", err, data)
	}
	set := stopBatch(t, 0, 1, -1, -1, 1, false)
	if pr := mirrorAsID(t, b, math.MaxInt32, writerID{}, set, 0); pr.ErrorCode != kerr.InvalidProducerEpoch.Code {
		t.Fatalf("the poisoned epoch after the migration: %v", kerr.ErrorForCode(pr.ErrorCode))
	}
	req := mirrorProduce(11, "m", 1, set, 0, -1)
	req.UnknownTags.Set(wireext.MirrorTag, writerTagID(1_700_000_000, writerID{0x17, 0xf0, 8: 0xa1, 0xa2, 0xa3, 0xa4, 0xa5, 0xa6, 0xa7, 0xa8}))
	if pr := rawRequest[*kmsg.ProduceResponse](t, b, req).Topics[0].Partitions[0]; pr.ErrorCode != kerr.InvalidProducerEpoch.Code {
		t.Fatalf("a clock-based pusher after the migration: %v", kerr.ErrorForCode(pr.ErrorCode))
	}
	id := writerID{9}
	if e := registerAs(t, b, "m", id, 0, 1); e != 0 {
		t.Fatalf("the first registration after the migration: epoch %d", e)
	}
	if pr := mirrorAsID(t, b, 0, id, set, 0); pr.ErrorCode != 0 {
		t.Fatalf("the registered writer: %v", kerr.ErrorForCode(pr.ErrorCode))
	}
}

// TestMirrorLeaderEpochRule is brief I3 with KIP-1279's rule: the current
// leader epoch is raised to max(current, batch epoch) + 10 only when a
// stored batch epoch comes above current - 3 (docs/protocol.md), persisted (Metadata after a restart), and
// the epoch cache holds only the stored batches' epochs.
func TestMirrorLeaderEpochRule(t *testing.T) {
	dir := t.TempDir()
	b := startBroker(t, dir, nil)
	createTopic(t, b, "m", 1, map[string]*string{"mirror.mode": sp("push")})
	p := b.srv.cluster.topic("m").Partition(0)
	steps := []struct {
		epoch int32
		want  int32 // current leader epoch after the append
	}{
		{2, 12},  // 2 > 0-3: max(0, 2)+10
		{5, 12},  // 5 <= 12-3: kept
		{9, 12},  // 9 <= 9: kept
		{10, 22}, // 10 > 9: max(12, 10)+10
		{32, 42}, // a batch epoch above the current one: max(22, 32)+10
	}
	expect := int64(0)
	for i, st := range steps {
		set := stopBatch(t, int64(i)*3, st.epoch, -1, -1, 3, false)
		mirrorTo(t, b, "m", 0, set, expect)
		expect += 3
		if got := p.LeaderEpoch(); got != st.want {
			t.Fatalf("after a batch at epoch %d: leader epoch %d, want %d", st.epoch, got, st.want)
		}
	}
	l, _ := partitionLog(p)
	var epochs []int32
	for _, e := range l.EpochCache().Entries() {
		epochs = append(epochs, e.Epoch)
	}
	if want := []int32{2, 5, 9, 10, 32}; !slices.Equal(epochs, want) {
		t.Fatalf("epoch cache %v, want the stored batches' %v", epochs, want)
	}
	b.stop()
	b = startBroker(t, dir, nil)
	md, err := b.admin().Metadata(ctxT(t), "m")
	if err != nil || md.Topics["m"].Partitions[0].LeaderEpoch != 42 {
		t.Fatalf("metadata leader epoch after restart: %+v %v", md.Topics["m"].Partitions[0], err)
	}
	// A sender with the old epoch is fenced, the current one accepted.
	set := stopBatch(t, 15, 32, -1, -1, 1, false)
	if pr := mirrorOne(t, b, "m", set, 15, 22); pr.ErrorCode != kerr.FencedLeaderEpoch.Code {
		t.Fatalf("current epoch 22 sent, 42 current: %v", kerr.ErrorForCode(pr.ErrorCode))
	}
	if pr := mirrorOne(t, b, "m", set, 15, 43); pr.ErrorCode != kerr.UnknownLeaderEpoch.Code {
		t.Fatalf("current epoch 43 sent, 42 current: %v", kerr.ErrorForCode(pr.ErrorCode))
	}
	if pr := mirrorOne(t, b, "m", set, 15, 42); pr.ErrorCode != 0 {
		t.Fatalf("current epoch 42: %v", kerr.ErrorForCode(pr.ErrorCode))
	}
	if e := kbatch.LeaderEpoch(storedBatches(t, b.srv.cluster.topic("m").Partition(0), 15)[0]); e != 32 {
		t.Fatalf("stored batch epoch %d, sent 32", e)
	}
}

// writerTagID is the MirrorProduce value of a version-1 pusher: writer
// epoch we and WriterID id in the struct's tagged field 0.
func writerTagID(we int32, id writerID) []byte {
	return (&wireext.MirrorProduce{WriterEpoch: we, WriterID: id}).AppendTo(nil)
}

func mirrorAsID(t *testing.T, b *testBroker, we int32, id writerID, set []byte, expected int64) kmsg.ProduceResponseTopicPartition {
	t.Helper()
	req := mirrorProduce(11, "m", 0, set, expected, -1)
	req.UnknownTags.Set(wireext.MirrorTag, writerTagID(we, id))
	return rawRequest[*kmsg.ProduceResponse](t, b, req).Topics[0].Partitions[0]
}

// mirrorDeleteAsID forwards a log start as writer (we, id).
func mirrorDeleteAsID(t *testing.T, b *testBroker, we int32, id writerID, offset int64) kmsg.DeleteRecordsResponseTopicPartition {
	t.Helper()
	req := registration("m", id, 0)
	req.UnknownTags.Set(wireext.MirrorTag, writerTagID(we, id))
	req.Topics[0].Partitions[0].Offset = offset
	return rawRequest[*kmsg.DeleteRecordsResponse](t, b, req).Topics[0].Partitions[0]
}

// TestMirrorMalformedWriterID: a WriterID that is not 16 bytes makes the
// request malformed: the connection is closed, nothing is written.
func TestMirrorMalformedWriterID(t *testing.T) {
	b := startBroker(t, t.TempDir(), nil)
	createTopic(t, b, "m", 1, map[string]*string{"mirror.mode": sp("push")})
	req := mirrorProduce(11, "m", 0, stopBatch(t, 0, 1, -1, -1, 1, false), 0, -1)
	bad := writerTagID(testWriterEpoch, writerID{0x20})
	bad[8] = 15
	req.UnknownTags.Set(wireext.MirrorTag, bad[:len(bad)-1])
	rc := dialRaw(t, b.addr)
	rc.write(appendRequestFrame(nil, req, 1, "t"))
	rc.expectClosed()
	if l, _ := partitionLog(b.srv.cluster.topic("m").Partition(0)); l.LogEndOffset() != 0 {
		t.Fatalf("a malformed request appended: log end %d", l.LogEndOffset())
	}
}

// TestMirrorWriterRegistrationRace: pushers that start at the same
// instant register on both partitions concurrently, each in one request;
// whatever the interleaving, each gets a distinct epoch, and afterwards
// exactly one of them, the highest epoch, may write and every other is
// PRODUCER_FENCED on every partition.
func TestMirrorWriterRegistrationRace(t *testing.T) {
	b := startBroker(t, t.TempDir(), nil)
	createTopic(t, b, "m", 2, map[string]*string{"mirror.mode": sp("push")})
	const n = 8
	epochs := make([]int32, n)
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range epochs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			resp, err := rawRoundTrip(b.addr, registration("m", writerID{byte(i)}, 0, 1))
			if err != nil {
				errs <- err
				return
			}
			ps := resp.(*kmsg.DeleteRecordsResponse).Topics[0].Partitions
			// A registrant overtaken between its assignment and its
			// (no-op) delete is already fenced; the epoch is answered
			// only with success.
			epochs[i] = -1
			for _, p := range ps {
				if p.ErrorCode == 0 {
					epochs[i] = assignedEpoch(t, p)
				} else if p.ErrorCode != kerr.ProducerFenced.Code {
					errs <- kerr.ErrorForCode(p.ErrorCode)
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	st, _ := b.srv.mirrorStateOf(b.srv.cluster.topic("m"))
	top := st.Partitions[0].WriterEpoch
	if top != testWriterEpoch+n || st.Partitions[1].WriterEpoch != top || st.Partitions[0].WriterID != st.Partitions[1].WriterID {
		t.Fatalf("after %d registrations: %+v", n, st.Partitions)
	}
	winner := int(st.Partitions[0].WriterID[0])
	if epochs[winner] != top {
		t.Fatalf("the winner %d was answered epoch %d, the state has %d", winner, epochs[winner], top)
	}
	seen := map[int32]bool{}
	for i, e := range epochs {
		if e >= 0 && seen[e] {
			t.Fatalf("epoch %d answered twice (%v)", e, epochs)
		}
		seen[e] = true
		for part := int32(0); part < 2; part++ {
			req := mirrorProduce(11, "m", part, stopBatch(t, 0, 1, -1, -1, 1, false), 0, -1)
			req.UnknownTags.Set(wireext.MirrorTag, writerTagID(e, writerID{byte(i)}))
			pr := rawRequest[*kmsg.ProduceResponse](t, b, req).Topics[0].Partitions[0]
			want := kerr.ProducerFenced.Code
			if i == winner {
				want = 0
			} else if e < 0 {
				want = kerr.InvalidProducerEpoch.Code
			}
			if pr.ErrorCode != want {
				t.Fatalf("partition %d, pusher %d (epoch %d): %v, want %v", part, i, e, kerr.ErrorForCode(pr.ErrorCode), kerr.ErrorForCode(want))
			}
		}
	}
}

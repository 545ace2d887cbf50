package broker

import (
	"strings"
	"sync"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/verbatim-kafka/verbatim/kbatch"
	"github.com/verbatim-kafka/verbatim/wireext"
)

// writerTag is the request-level MirrorProduce value with writer epoch we.
func writerTag(we int32) []byte {
	return (&wireext.MirrorProduce{WriterEpoch: we}).AppendTo(nil)
}

// mirrorAs sends set as writer epoch we; it returns the partition answer.
func mirrorAs(t *testing.T, b *testBroker, we int32, set []byte, expected int64) kmsg.ProduceResponseTopicPartition {
	t.Helper()
	req := mirrorProduce(11, "m", 0, set, expected, -1)
	req.UnknownTags.Set(wireext.MirrorTag, writerTag(we))
	return rawRequest[*kmsg.ProduceResponse](t, b, req).Topics[0].Partitions[0]
}

// mirrorDeleteAs forwards a log start as writer epoch we.
func mirrorDeleteAs(t *testing.T, b *testBroker, we int32, offset int64) kmsg.DeleteRecordsResponseTopicPartition {
	t.Helper()
	req := kmsg.NewPtrDeleteRecordsRequest()
	req.Version = 2
	req.TimeoutMillis = 10000
	req.UnknownTags.Set(wireext.MirrorTag, writerTag(we))
	rt := kmsg.NewDeleteRecordsRequestTopic()
	rt.Topic = "m"
	rp := kmsg.NewDeleteRecordsRequestTopicPartition()
	rp.Partition, rp.Offset = 0, offset
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	return rawRequest[*kmsg.DeleteRecordsResponse](t, b, req).Topics[0].Partitions[0]
}

// TestMirrorWriterEpochFencing: a partition remembers the highest mirror
// writer epoch that wrote to it, across restarts; an older writer's
// produces (identical retries included) and log-start forwards are
// PRODUCER_FENCED and change nothing; equal and newer epochs go on.
func TestMirrorWriterEpochFencing(t *testing.T) {
	dir := t.TempDir()
	b := startBroker(t, dir, nil)
	createTopic(t, b, "m", 1, map[string]*string{"mirror.mode": sp("push")})
	b0 := stopBatch(t, 0, 1, -1, -1, 2, false)
	b1 := stopBatch(t, 2, 1, -1, -1, 2, false)
	b2 := stopBatch(t, 4, 1, -1, -1, 2, false)
	if pr := mirrorAs(t, b, 5, b0, 0); pr.ErrorCode != 0 {
		t.Fatalf("writer 5: %v", kerr.ErrorForCode(pr.ErrorCode))
	}
	pr := mirrorAs(t, b, 3, b1, 2)
	if pr.ErrorCode != kerr.ProducerFenced.Code || !strings.Contains(strPtr(pr.ErrorMessage), "mirror writer epoch 3 is older than 5, the newest that wrote to m-0") {
		t.Fatalf("writer 3 after 5: %v %q", kerr.ErrorForCode(pr.ErrorCode), strPtr(pr.ErrorMessage))
	}
	l, _ := partitionLog(b.srv.cluster.topic("m").Partition(0))
	if l.LogEndOffset() != 2 {
		t.Fatalf("a fenced produce appended: log end %d", l.LogEndOffset())
	}
	if pr := mirrorAs(t, b, 5, b1, 2); pr.ErrorCode != 0 {
		t.Fatalf("writer 5 again: %v", kerr.ErrorForCode(pr.ErrorCode))
	}
	if pr := mirrorAs(t, b, 9, b2, 4); pr.ErrorCode != 0 {
		t.Fatalf("writer 9 takes over: %v", kerr.ErrorForCode(pr.ErrorCode))
	}
	// The writer that was taken over from is fenced, even for an
	// identical retry of what it wrote.
	if pr := mirrorAs(t, b, 5, b1, 2); pr.ErrorCode != kerr.ProducerFenced.Code {
		t.Fatalf("writer 5 retry after 9: %v", kerr.ErrorForCode(pr.ErrorCode))
	}
	if dr := mirrorDeleteAs(t, b, 5, 2); dr.ErrorCode != kerr.ProducerFenced.Code || l.LogStartOffset() != 0 {
		t.Fatalf("log-start forward by writer 5: %v, log start %d", kerr.ErrorForCode(dr.ErrorCode), l.LogStartOffset())
	}

	b.stop()
	b = startBroker(t, dir, nil)
	l, _ = partitionLog(b.srv.cluster.topic("m").Partition(0))
	if pr := mirrorAs(t, b, 8, stopBatch(t, 6, 1, -1, -1, 1, false), 6); pr.ErrorCode != kerr.ProducerFenced.Code {
		t.Fatalf("writer 8 after a restart (9 seen): %v", kerr.ErrorForCode(pr.ErrorCode))
	}
	if dr := mirrorDeleteAs(t, b, 9, 2); dr.ErrorCode != 0 || dr.LowWatermark != 2 {
		t.Fatalf("log-start forward by writer 9: %v low %d", kerr.ErrorForCode(dr.ErrorCode), dr.LowWatermark)
	}
	if pr := mirrorAs(t, b, 10, stopBatch(t, 6, 1, -1, -1, 1, false), 6); pr.ErrorCode != 0 || l.LogEndOffset() != 7 {
		t.Fatalf("writer 10: %v, log end %d", kerr.ErrorForCode(pr.ErrorCode), l.LogEndOffset())
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
	if want := []int32{2, 5, 9, 10, 32}; !equalInt32s(epochs, want) {
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

func equalInt32s(a, b []int32) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
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

// claimAsID is a pusher's start: a mirror DeleteRecords to offset 0 (a
// no-op on the log) that only registers the writer on partition part.
func claimAsID(b *testBroker, part int32, we int32, id writerID) (int16, error) {
	req := kmsg.NewPtrDeleteRecordsRequest()
	req.Version = 2
	req.TimeoutMillis = 10000
	req.UnknownTags.Set(wireext.MirrorTag, writerTagID(we, id))
	rt := kmsg.NewDeleteRecordsRequestTopic()
	rt.Topic = "m"
	rp := kmsg.NewDeleteRecordsRequestTopicPartition()
	rp.Partition, rp.Offset = part, 0
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := rawRoundTrip(b.addr, req)
	if err != nil {
		return 0, err
	}
	return resp.(*kmsg.DeleteRecordsResponse).Topics[0].Partitions[0].ErrorCode, nil
}

// TestMirrorWriterIDTieBreak: writers with the same epoch are ordered by
// WriterID; the one that lost the tie is PRODUCER_FENCED with a message
// saying so, a writer without an id (a pusher from before WriterID) loses
// every tie, the order survives a restart, and a higher epoch still wins
// whatever the ids.
func TestMirrorWriterIDTieBreak(t *testing.T) {
	dir := t.TempDir()
	b := startBroker(t, dir, nil)
	createTopic(t, b, "m", 1, map[string]*string{"mirror.mode": sp("push")})
	lo, hi := writerID{0x10, 15: 9}, writerID{0x20}
	set := func(base int64) []byte { return stopBatch(t, base, 1, -1, -1, 1, false) }
	if pr := mirrorAsID(t, b, 7, lo, set(0), 0); pr.ErrorCode != 0 {
		t.Fatalf("writer lo: %v", kerr.ErrorForCode(pr.ErrorCode))
	}
	if pr := mirrorAs(t, b, 7, set(1), 1); pr.ErrorCode != kerr.ProducerFenced.Code {
		t.Fatalf("a writer without id, same epoch, after lo: %v", kerr.ErrorForCode(pr.ErrorCode))
	}
	if pr := mirrorAsID(t, b, 7, hi, set(1), 1); pr.ErrorCode != 0 {
		t.Fatalf("writer hi takes over: %v", kerr.ErrorForCode(pr.ErrorCode))
	}
	pr := mirrorAsID(t, b, 7, lo, set(2), 2)
	want := "mirror writer epoch 7 (writer id 10000000000000000000000000000009) lost the tie with writer epoch 7 (writer id 20000000000000000000000000000000), the newest that wrote to m-0"
	if pr.ErrorCode != kerr.ProducerFenced.Code || !strings.Contains(strPtr(pr.ErrorMessage), want) {
		t.Fatalf("writer lo after hi: %v %q", kerr.ErrorForCode(pr.ErrorCode), strPtr(pr.ErrorMessage))
	}
	if dr := mirrorDeleteAs(t, b, 7, 1); dr.ErrorCode != kerr.ProducerFenced.Code {
		t.Fatalf("log-start forward without id after hi: %v", kerr.ErrorForCode(dr.ErrorCode))
	}
	b.stop()
	b = startBroker(t, dir, nil)
	if pr := mirrorAsID(t, b, 7, lo, set(2), 2); pr.ErrorCode != kerr.ProducerFenced.Code {
		t.Fatalf("writer lo after a restart: %v", kerr.ErrorForCode(pr.ErrorCode))
	}
	if pr := mirrorAsID(t, b, 7, hi, set(2), 2); pr.ErrorCode != 0 {
		t.Fatalf("writer hi after a restart: %v", kerr.ErrorForCode(pr.ErrorCode))
	}
	if pr := mirrorAs(t, b, 8, set(3), 3); pr.ErrorCode != 0 {
		t.Fatalf("epoch 8 without id after 7/hi: %v", kerr.ErrorForCode(pr.ErrorCode))
	}
	if pr := mirrorAsID(t, b, 7, hi, set(4), 4); pr.ErrorCode != kerr.ProducerFenced.Code {
		t.Fatalf("7/hi after epoch 8: %v", kerr.ErrorForCode(pr.ErrorCode))
	}
	st, _ := b.srv.mirrorStateOf(b.srv.cluster.topic("m"))
	if st.Partitions[0].WriterEpoch != 8 || st.Partitions[0].WriterID != (writerID{}) {
		t.Fatalf("state %+v", st.Partitions[0])
	}
	// A WriterID that is not 16 bytes makes the request malformed: the
	// connection is closed, nothing is written.
	req := mirrorProduce(11, "m", 0, set(4), 4, -1)
	bad := writerTagID(9, hi)
	bad[8] = 15
	req.UnknownTags.Set(wireext.MirrorTag, bad[:len(bad)-1])
	rc := dialRaw(t, b.addr)
	rc.write(appendRequestFrame(nil, req, 1, "t"))
	rc.expectClosed()
	if st, _ := b.srv.mirrorStateOf(b.srv.cluster.topic("m")); st.Partitions[0].WriterEpoch != 8 {
		t.Fatalf("a malformed request moved the writer epoch: %+v", st.Partitions[0])
	}
}

// TestMirrorWriterSameEpochRace: pushers that start at the same instant
// (same writer epoch, distinct ids) register on both partitions
// concurrently; whatever the interleaving, afterwards exactly one of them,
// the highest id, may write and every other is PRODUCER_FENCED on every
// partition.
func TestMirrorWriterSameEpochRace(t *testing.T) {
	b := startBroker(t, t.TempDir(), nil)
	createTopic(t, b, "m", 2, map[string]*string{"mirror.mode": sp("push")})
	const n = 8
	ids := make([]writerID, n)
	for i := range ids {
		ids[i] = writerID{byte(n - i), 15: byte(i)} // ids[0] is the highest
	}
	var wg sync.WaitGroup
	errs := make(chan error, 2*n)
	for i := range ids {
		for part := int32(0); part < 2; part++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				// A claim that lost may already be fenced; both answers
				// are fine here, what counts is the state afterwards.
				code, err := claimAsID(b, part, 42, ids[i])
				if err == nil && code != 0 && code != kerr.ProducerFenced.Code {
					err = kerr.ErrorForCode(code)
				}
				if err != nil {
					errs <- err
				}
			}()
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	for part := int32(0); part < 2; part++ {
		for i := n - 1; i >= 0; i-- {
			req := mirrorProduce(11, "m", part, stopBatch(t, 0, 1, -1, -1, 1, false), 0, -1)
			req.UnknownTags.Set(wireext.MirrorTag, writerTagID(42, ids[i]))
			pr := rawRequest[*kmsg.ProduceResponse](t, b, req).Topics[0].Partitions[0]
			if want := map[bool]int16{true: 0, false: kerr.ProducerFenced.Code}[i == 0]; pr.ErrorCode != want {
				t.Fatalf("partition %d, pusher %d: %v, want %v", part, i, kerr.ErrorForCode(pr.ErrorCode), kerr.ErrorForCode(want))
			}
		}
	}
}

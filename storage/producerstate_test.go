package storage

import (
	"errors"
	"math"
	"math/rand"
	"reflect"
	"strings"
	"testing"

	"github.com/verbatim-kafka/verbatim/kbatch"
	"github.com/verbatim-kafka/verbatim/kbatch/kbatchtest"
)

// dataHeader is the header of an n-record data batch.
func dataHeader(pid int64, epoch int16, seq int32, base int64, n int32, ts int64, txn bool) *kbatch.Header {
	h := &kbatch.Header{
		BaseOffset:      base,
		Magic:           2,
		LastOffsetDelta: n - 1,
		BaseTimestamp:   ts,
		MaxTimestamp:    ts,
		ProducerID:      pid,
		ProducerEpoch:   epoch,
		BaseSequence:    seq,
		RecordCount:     n,
	}
	if txn {
		h.Attributes |= kbatch.TransactionalBit
	}
	return h
}

// controlBatch encodes a real control batch and decodes it back, so the
// tests go through ParseControlBatch.
func controlBatch(t testing.TB, pid int64, epoch int16, base int64, typ int16, coordEpoch int32, ts int64) (*kbatch.Header, ControlRecord) {
	t.Helper()
	var value []byte
	switch typ {
	case kbatch.ControlAbort, kbatch.ControlCommit:
		value = kbatch.EndTxnMarkerValue(coordEpoch)
	case kbatch.ControlMirrorPidReset:
		value = kbatch.MirrorPidResetValue("source-cluster")
	default:
		value = []byte{0, 0}
	}
	b := kbatch.NewBatch(ts, kbatch.Record{Key: kbatch.ControlKey(typ), Value: value})
	b.BaseOffset = base
	b.Attributes = kbatch.ControlBit | kbatch.TransactionalBit
	b.ProducerID = pid
	b.ProducerEpoch = epoch
	raw := kbatchtest.Encode(t, b)
	h, err := kbatch.ParseHeader(raw)
	if err != nil {
		t.Fatal(err)
	}
	ctl, err := ParseControlBatch(raw)
	if err != nil {
		t.Fatal(err)
	}
	return &h, ctl
}

func newTestProducerState(t testing.TB) *ProducerState {
	t.Helper()
	s, err := OpenProducerState(nil, "", ProducerStateConfig{})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// apply prepares and, when accepted and not a duplicate, commits one batch.
func apply(s *ProducerState, h *kbatch.Header, ctl ControlRecord, o ProducerOrigin) (PrepareResult, []CompletedTxn, error) {
	r, err := s.Prepare(h, ctl, o)
	if err != nil {
		s.Discard()
		return r, nil, err
	}
	if r.Duplicate {
		return r, nil, nil
	}
	return r, s.Commit(nil), nil
}

func mustApply(t *testing.T, s *ProducerState, h *kbatch.Header, ctl ControlRecord, o ProducerOrigin) []CompletedTxn {
	t.Helper()
	r, done, err := apply(s, h, ctl, o)
	if err != nil {
		t.Fatalf("batch at %d: %v", h.BaseOffset, err)
	}
	if r.Duplicate {
		t.Fatalf("batch at %d: unexpected duplicate of %+v", h.BaseOffset, r.Original)
	}
	return done
}

func wantErr(t *testing.T, err, target error) {
	t.Helper()
	if !errors.Is(err, target) {
		t.Fatalf("error %v, want %v", err, target)
	}
}

func TestProducerUnknownProducerAcceptsAnySequence(t *testing.T) {
	s := newTestProducerState(t)
	mustApply(t, s, dataHeader(1, 0, 17, 0, 3, 100, false), ControlRecord{}, OriginClient)
	p, ok := s.Producer(1)
	if !ok || p.Epoch != 0 || p.LastSequence != 19 || p.LastTimestamp != 100 {
		t.Fatalf("state %+v", p)
	}
	if s.MapEndOffset() != 3 {
		t.Fatalf("map end %d", s.MapEndOffset())
	}
}

func TestProducerSequenceContinuity(t *testing.T) {
	s := newTestProducerState(t)
	mustApply(t, s, dataHeader(1, 0, 0, 0, 5, 1, false), ControlRecord{}, OriginClient)
	mustApply(t, s, dataHeader(1, 0, 5, 5, 5, 1, false), ControlRecord{}, OriginClient)
	_, _, err := apply(s, dataHeader(1, 0, 11, 10, 1, 1, false), ControlRecord{}, OriginClient)
	wantErr(t, err, ErrOutOfOrderSequence)
	_, _, err = apply(s, dataHeader(1, 0, 9, 10, 1, 1, false), ControlRecord{}, OriginClient)
	wantErr(t, err, ErrOutOfOrderSequence) // overlaps but not a retained batch
	if p, _ := s.Producer(1); p.LastSequence != 9 || len(p.Batches) != 2 {
		t.Fatalf("refused batches changed state: %+v", p)
	}
	mustApply(t, s, dataHeader(1, 0, 10, 10, 1, 1, false), ControlRecord{}, OriginClient)
}

func TestProducerSequenceWrapAround(t *testing.T) {
	s := newTestProducerState(t)
	// A batch whose records cross MaxInt32: last sequence wraps to 1.
	mustApply(t, s, dataHeader(1, 0, math.MaxInt32-1, 0, 4, 1, false), ControlRecord{}, OriginClient)
	if p, _ := s.Producer(1); p.LastSequence != 1 {
		t.Fatalf("last sequence %d, want 1", p.LastSequence)
	}
	// Its retry is recognised despite the wrap.
	r, _, err := apply(s, dataHeader(1, 0, math.MaxInt32-1, 4, 4, 1, false), ControlRecord{}, OriginClient)
	if err != nil || !r.Duplicate || r.Original.FirstOffset() != 0 || r.Original.LastOffset != 3 || r.Original.FirstSeq() != math.MaxInt32-1 {
		t.Fatalf("retry across wrap: %+v %v", r, err)
	}
	mustApply(t, s, dataHeader(1, 0, 2, 4, 1, 1, false), ControlRecord{}, OriginClient)

	// Exactly at MaxInt32 the next sequence is 0.
	s = newTestProducerState(t)
	mustApply(t, s, dataHeader(2, 0, math.MaxInt32, 0, 1, 1, false), ControlRecord{}, OriginClient)
	_, _, err = apply(s, dataHeader(2, 0, 1, 1, 1, 1, false), ControlRecord{}, OriginClient)
	wantErr(t, err, ErrOutOfOrderSequence)
	mustApply(t, s, dataHeader(2, 0, 0, 1, 1, 1, false), ControlRecord{}, OriginClient)
}

func TestProducerEpochBumpResetsSequence(t *testing.T) {
	s := newTestProducerState(t)
	mustApply(t, s, dataHeader(1, 3, 0, 0, 10, 1, false), ControlRecord{}, OriginClient)
	_, _, err := apply(s, dataHeader(1, 4, 10, 10, 1, 1, false), ControlRecord{}, OriginClient)
	wantErr(t, err, ErrOutOfOrderSequence) // a new epoch must start at 0
	mustApply(t, s, dataHeader(1, 4, 0, 10, 2, 1, false), ControlRecord{}, OriginClient)
	p, _ := s.Producer(1)
	if p.Epoch != 4 || len(p.Batches) != 1 || p.LastSequence != 1 {
		t.Fatalf("after bump: %+v", p)
	}
	// The old epoch is fenced, retries of its batches included.
	_, _, err = apply(s, dataHeader(1, 3, 0, 12, 10, 1, false), ControlRecord{}, OriginClient)
	wantErr(t, err, ErrInvalidProducerEpoch)
	_, _, err = apply(s, dataHeader(1, 3, 10, 12, 1, 1, false), ControlRecord{}, OriginClient)
	wantErr(t, err, ErrInvalidProducerEpoch)
	// Epochs need not be consecutive.
	mustApply(t, s, dataHeader(1, 9, 0, 12, 1, 1, false), ControlRecord{}, OriginClient)
}

func TestProducerDuplicatesOfLastFiveBatches(t *testing.T) {
	s := newTestProducerState(t)
	type sent struct {
		seq        int32
		first, end int64
		ts         int64
	}
	var batches []sent
	off, seq := int64(0), int32(0)
	for i := 0; i < 6; i++ {
		n := int32(i + 2)
		h := dataHeader(42, 1, seq, off, n, int64(1000+i), false)
		mustApply(t, s, h, ControlRecord{}, OriginClient)
		batches = append(batches, sent{seq: seq, first: off, end: off + int64(n) - 1, ts: int64(1000 + i)})
		off += int64(n) + 3 // the log may have other producers' batches in between
		seq += n
	}
	end := s.MapEndOffset()
	// Each of the last five is acknowledged with its original offsets and
	// timestamp, whatever offsets the retry was assigned.
	for i := 1; i < 6; i++ {
		b := batches[i]
		n := int32(b.end - b.first + 1)
		r, _, err := apply(s, dataHeader(42, 1, b.seq, 9000, n, 5, false), ControlRecord{}, OriginClient)
		if err != nil || !r.Duplicate {
			t.Fatalf("retry of batch %d: %+v %v", i, r, err)
		}
		if r.Original.FirstOffset() != b.first || r.Original.LastOffset != b.end || r.Original.Timestamp != b.ts {
			t.Fatalf("retry of batch %d acknowledged with %d..%d ts %d, want %d..%d ts %d",
				i, r.Original.FirstOffset(), r.Original.LastOffset, r.Original.Timestamp, b.first, b.end, b.ts)
		}
	}
	if s.MapEndOffset() != end || s.Staged() != 0 {
		t.Fatal("duplicates changed state")
	}
	// The sixth-oldest is forgotten: out of order.
	b := batches[0]
	_, _, err := apply(s, dataHeader(42, 1, b.seq, 9000, int32(b.end-b.first+1), 5, false), ControlRecord{}, OriginClient)
	wantErr(t, err, ErrOutOfOrderSequence)
	// Same sequences with a different count are not duplicates.
	b = batches[3]
	_, _, err = apply(s, dataHeader(42, 1, b.seq, 9000, 1, 5, false), ControlRecord{}, OriginClient)
	wantErr(t, err, ErrOutOfOrderSequence)
	// Verbatim appends never detect duplicates: the log owner compares bytes.
	r, _, err := apply(s, dataHeader(42, 1, batches[5].seq, 9000, int32(batches[5].end-batches[5].first+1), 5, false), ControlRecord{}, OriginVerbatim)
	if err != nil || r.Duplicate {
		t.Fatalf("verbatim: %+v %v", r, err)
	}
}

func TestProducerVerbatimAcceptsEverything(t *testing.T) {
	s := newTestProducerState(t)
	steps := []*kbatch.Header{
		dataHeader(5, 2, 10, 100, 2, 50, false), // sequence gap from nothing
		dataHeader(5, 2, 40, 130, 3, 60, false), // gap (compacted source)
		dataHeader(5, 1, 7, 200, 1, 70, false),  // lower epoch: warning only in Kafka
		dataHeader(5, 1, 3, 210, 1, 80, false),  // going backwards
	}
	for _, h := range steps {
		mustApply(t, s, h, ControlRecord{}, OriginVerbatim)
	}
	p, _ := s.Producer(5)
	if p.Epoch != 1 || p.LastSequence != 3 || len(p.Batches) != 2 || p.LastTimestamp != 80 {
		t.Fatalf("state %+v", p)
	}
	if s.MapEndOffset() != 211 {
		t.Fatalf("map end %d", s.MapEndOffset())
	}
	// The same history refused in client mode.
	c := newTestProducerState(t)
	mustApply(t, c, steps[0], ControlRecord{}, OriginClient)
	_, _, err := apply(c, steps[1], ControlRecord{}, OriginClient)
	wantErr(t, err, ErrOutOfOrderSequence)
}

func TestProducerNegativeProducerIDNotTracked(t *testing.T) {
	s := newTestProducerState(t)
	mustApply(t, s, dataHeader(-1, -1, -1, 0, 5, 1, false), ControlRecord{}, OriginClient)
	mustApply(t, s, dataHeader(-7, 0, 0, 5, 5, 1, true), ControlRecord{}, OriginVerbatim)
	if s.ProducerCount() != 0 || s.MapEndOffset() != 10 {
		t.Fatalf("count %d, map end %d", s.ProducerCount(), s.MapEndOffset())
	}
	if _, ok := s.FirstUnstableOffset(); ok {
		t.Fatal("negative producer id opened a transaction")
	}
}

func TestProducerTransactions(t *testing.T) {
	for _, origin := range []ProducerOrigin{OriginClient, OriginVerbatim} {
		t.Run(origin.String(), func(t *testing.T) {
			markerOrigin := origin
			if origin == OriginClient {
				markerOrigin = OriginCoordinator
			}
			s := newTestProducerState(t)
			mustApply(t, s, dataHeader(1, 0, 0, 10, 2, 1, true), ControlRecord{}, origin)
			mustApply(t, s, dataHeader(2, 0, 0, 12, 2, 1, true), ControlRecord{}, origin)
			mustApply(t, s, dataHeader(1, 0, 2, 14, 1, 1, true), ControlRecord{}, origin)
			if off, ok := s.FirstUnstableOffset(); !ok || off != 10 {
				t.Fatalf("first unstable %d %v", off, ok)
			}
			if got := s.OngoingTxns(); !reflect.DeepEqual(got, []OngoingTxn{{1, 10}, {2, 12}}) {
				t.Fatalf("ongoing %v", got)
			}
			h, ctl := controlBatch(t, 1, 0, 15, kbatch.ControlCommit, 3, 2)
			done := mustApply(t, s, h, ctl, markerOrigin)
			want := []CompletedTxn{{ProducerID: 1, FirstOffset: 10, LastOffset: 15, Aborted: false, LastStableOffset: 12}}
			if !reflect.DeepEqual(done, want) {
				t.Fatalf("completed %+v, want %+v", done, want)
			}
			// Decided but not yet below the high watermark: still unstable.
			if off, _ := s.FirstUnstableOffset(); off != 10 {
				t.Fatalf("first unstable after commit %d", off)
			}
			s.OnHighWatermarkUpdated(16)
			if off, _ := s.FirstUnstableOffset(); off != 12 {
				t.Fatalf("first unstable after hw %d", off)
			}
			h, ctl = controlBatch(t, 2, 0, 16, kbatch.ControlAbort, 3, 2)
			done = mustApply(t, s, h, ctl, markerOrigin)
			want = []CompletedTxn{{ProducerID: 2, FirstOffset: 12, LastOffset: 16, Aborted: true, LastStableOffset: 17}}
			if !reflect.DeepEqual(done, want) {
				t.Fatalf("completed %+v, want %+v", done, want)
			}
			if done[0].AbortedTxn() != (AbortedTxn{ProducerID: 2, FirstOffset: 12, LastOffset: 16, LastStableOffset: 17}) {
				t.Fatalf("index entry %+v", done[0].AbortedTxn())
			}
			s.OnHighWatermarkUpdated(17)
			if _, ok := s.FirstUnstableOffset(); ok {
				t.Fatal("still unstable after both markers")
			}
			p, _ := s.Producer(1)
			if p.CurrentTxnFirstOffset != -1 || p.CoordinatorEpoch != 3 {
				t.Fatalf("producer after commit %+v", p)
			}
			// A new transaction of the same producer opens at its first batch.
			mustApply(t, s, dataHeader(1, 0, 3, 17, 1, 1, true), ControlRecord{}, origin)
			if off, _ := s.FirstUnstableOffset(); off != 17 {
				t.Fatalf("new transaction first unstable %d", off)
			}
		})
	}
}

// Kafka applies all producer updates of one append before resolving the
// completed transactions, so a transaction opened by a later batch of the
// same append bounds the LSO of an earlier marker.
func TestProducerCommitOrderWithinOneAppend(t *testing.T) {
	s := newTestProducerState(t)
	mustApply(t, s, dataHeader(1, 0, 0, 0, 1, 1, true), ControlRecord{}, OriginVerbatim)
	h, ctl := controlBatch(t, 1, 0, 1, kbatch.ControlAbort, 0, 1)
	if _, err := s.Prepare(h, ctl, OriginVerbatim); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Prepare(dataHeader(2, 0, 0, 2, 1, 1, true), ControlRecord{}, OriginVerbatim); err != nil {
		t.Fatal(err)
	}
	done := s.Commit(nil)
	if len(done) != 1 || done[0].LastStableOffset != 2 {
		t.Fatalf("completed %+v, want LSO 2", done)
	}
	if s.MapEndOffset() != 3 {
		t.Fatalf("map end %d", s.MapEndOffset())
	}
}

func TestProducerMarkerWithoutOpenTransaction(t *testing.T) {
	s := newTestProducerState(t)
	// Unknown producer: its data was compacted or trimmed away.
	h, ctl := controlBatch(t, 9, 4, 50, kbatch.ControlAbort, 7, 123)
	if done := mustApply(t, s, h, ctl, OriginVerbatim); len(done) != 0 {
		t.Fatalf("completed %+v", done)
	}
	p, ok := s.Producer(9)
	if !ok || p.Epoch != 4 || p.CoordinatorEpoch != 7 || p.LastTimestamp != 123 || p.CurrentTxnFirstOffset != -1 {
		t.Fatalf("state %+v %v", p, ok)
	}
	// Known producer without a transaction: only epochs move.
	mustApply(t, s, dataHeader(9, 4, 0, 51, 1, 1, false), ControlRecord{}, OriginVerbatim)
	h, ctl = controlBatch(t, 9, 4, 52, kbatch.ControlCommit, 8, 124)
	if done := mustApply(t, s, h, ctl, OriginVerbatim); len(done) != 0 {
		t.Fatalf("completed %+v", done)
	}
	if _, ok := s.FirstUnstableOffset(); ok {
		t.Fatal("unstable offset without a transaction")
	}
}

func TestProducerTV2MarkerBumpsEpoch(t *testing.T) {
	s := newTestProducerState(t)
	mustApply(t, s, dataHeader(3, 5, 0, 0, 3, 1, true), ControlRecord{}, OriginVerbatim)
	h, ctl := controlBatch(t, 3, 6, 3, kbatch.ControlCommit, 1, 2) // TV2: marker at epoch+1
	if done := mustApply(t, s, h, ctl, OriginVerbatim); len(done) != 1 || done[0].Aborted {
		t.Fatalf("completed %+v", done)
	}
	p, _ := s.Producer(3)
	if p.Epoch != 6 || len(p.Batches) != 0 {
		t.Fatalf("after TV2 marker %+v", p)
	}
	// The producer continues at the bumped epoch from sequence 0; the old
	// epoch is fenced.
	mustApply(t, s, dataHeader(3, 6, 0, 4, 1, 1, true), ControlRecord{}, OriginClient)
	_, _, err := apply(s, dataHeader(3, 5, 3, 5, 1, 1, true), ControlRecord{}, OriginClient)
	wantErr(t, err, ErrInvalidProducerEpoch)
}

func TestProducerCoordinatorChecks(t *testing.T) {
	s := newTestProducerState(t)
	mustApply(t, s, dataHeader(1, 2, 0, 0, 1, 1, true), ControlRecord{}, OriginClient)
	h, ctl := controlBatch(t, 1, 2, 1, kbatch.ControlCommit, 5, 1)
	mustApply(t, s, h, ctl, OriginCoordinator)

	// A zombie coordinator (lower coordinator epoch) is fenced.
	mustApply(t, s, dataHeader(1, 2, 1, 2, 1, 1, true), ControlRecord{}, OriginClient)
	h, ctl = controlBatch(t, 1, 2, 3, kbatch.ControlAbort, 4, 1)
	_, _, err := apply(s, h, ctl, OriginCoordinator)
	wantErr(t, err, ErrTransactionCoordinatorFenced)
	// A lower producer epoch is invalid.
	h, ctl = controlBatch(t, 1, 1, 3, kbatch.ControlAbort, 5, 1)
	_, _, err = apply(s, h, ctl, OriginCoordinator)
	wantErr(t, err, ErrInvalidProducerEpoch)
	// TV2: the marker must carry a bumped epoch while a transaction is open.
	h, ctl = controlBatch(t, 1, 2, 3, kbatch.ControlAbort, 5, 1)
	ctl.TransactionVersion = 2
	_, _, err = apply(s, h, ctl, OriginCoordinator)
	wantErr(t, err, ErrInvalidProducerEpoch)
	h, ctl = controlBatch(t, 1, 3, 3, kbatch.ControlAbort, 5, 1)
	ctl.TransactionVersion = 2
	if done := mustApply(t, s, h, ctl, OriginCoordinator); len(done) != 1 || !done[0].Aborted {
		t.Fatalf("completed %+v", done)
	}
	// TV2 retry of the same marker once the transaction is over is allowed.
	h, ctl = controlBatch(t, 1, 3, 4, kbatch.ControlAbort, 5, 1)
	ctl.TransactionVersion = 2
	if done := mustApply(t, s, h, ctl, OriginCoordinator); len(done) != 0 {
		t.Fatalf("retry completed %+v", done)
	}
	// In verbatim mode the same zombie marker is stored and tracked.
	h, ctl = controlBatch(t, 1, 1, 5, kbatch.ControlAbort, 1, 1)
	mustApply(t, s, h, ctl, OriginVerbatim)
	if p, _ := s.Producer(1); p.Epoch != 1 || p.CoordinatorEpoch != 1 {
		t.Fatalf("verbatim zombie marker: %+v", p)
	}
}

func TestProducerNonTransactionalWriteDuringTransaction(t *testing.T) {
	s := newTestProducerState(t)
	mustApply(t, s, dataHeader(1, 0, 0, 0, 1, 1, true), ControlRecord{}, OriginClient)
	_, _, err := apply(s, dataHeader(1, 0, 1, 1, 1, 1, false), ControlRecord{}, OriginClient)
	wantErr(t, err, ErrInvalidTxnState)
	// Verbatim: stored, the transaction stays open.
	mustApply(t, s, dataHeader(1, 0, 1, 1, 1, 1, false), ControlRecord{}, OriginVerbatim)
	if p, _ := s.Producer(1); p.CurrentTxnFirstOffset != 0 || p.LastSequence != 1 {
		t.Fatalf("state %+v", p)
	}
}

func TestProducerMirrorPidResetClearsState(t *testing.T) {
	s := newTestProducerState(t)
	mustApply(t, s, dataHeader(1, 0, 0, 0, 5, 1, false), ControlRecord{}, OriginVerbatim)
	mustApply(t, s, dataHeader(2, 0, 0, 5, 5, 1, true), ControlRecord{}, OriginVerbatim)
	h, ctl := controlBatch(t, -1, -1, 10, kbatch.ControlMirrorPidReset, 0, 1)
	if ctl.Type != kbatch.ControlMirrorPidReset || !ctl.Present {
		t.Fatalf("control %+v", ctl)
	}
	mustApply(t, s, h, ctl, OriginVerbatim)
	if s.ProducerCount() != 0 {
		t.Fatalf("producers after reset: %v", s.Producers())
	}
	if _, ok := s.FirstUnstableOffset(); ok {
		t.Fatal("open transaction survived the reset")
	}
	if s.MapEndOffset() != 11 {
		t.Fatalf("map end %d", s.MapEndOffset())
	}
	// I6: a new local producer reusing an id and sequence range of the
	// mirrored producer is appended, not acknowledged as a duplicate.
	r, _, err := apply(s, dataHeader(1, 0, 0, 11, 5, 1, false), ControlRecord{}, OriginClient)
	if err != nil || r.Duplicate {
		t.Fatalf("local producer after reset: %+v %v", r, err)
	}

	// Staged batches before the barrier are wiped by it; those after survive.
	s = newTestProducerState(t)
	mustApply(t, s, dataHeader(7, 0, 0, 0, 1, 1, false), ControlRecord{}, OriginVerbatim)
	if _, err := s.Prepare(dataHeader(8, 0, 0, 1, 1, 1, false), ControlRecord{}, OriginVerbatim); err != nil {
		t.Fatal(err)
	}
	h, ctl = controlBatch(t, 12, 3, 2, kbatch.ControlMirrorPidReset, 0, 1) // whatever producer id it carries
	if _, err := s.Prepare(h, ctl, OriginVerbatim); err != nil {
		t.Fatal(err)
	}
	// A batch after the barrier sees empty state while still staged.
	if _, err := s.Prepare(dataHeader(8, 0, 9, 3, 1, 1, false), ControlRecord{}, OriginClient); err != nil {
		t.Fatal(err)
	}
	s.Commit(nil)
	got := s.Producers()
	if len(got) != 1 || got[0].ProducerID != 8 || got[0].LastSequence != 9 {
		t.Fatalf("after staged reset: %+v", got)
	}
}

func TestProducerDiscardLeavesStateUntouched(t *testing.T) {
	s := newTestProducerState(t)
	mustApply(t, s, dataHeader(1, 0, 0, 0, 1, 1, false), ControlRecord{}, OriginClient)
	before := s.SnapshotEntries()
	if _, err := s.Prepare(dataHeader(1, 0, 1, 1, 1, 1, true), ControlRecord{}, OriginClient); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Prepare(dataHeader(2, 0, 0, 2, 1, 1, true), ControlRecord{}, OriginClient); err != nil {
		t.Fatal(err)
	}
	s.Discard() // the write failed
	if got := s.SnapshotEntries(); !reflect.DeepEqual(got, before) {
		t.Fatalf("state changed: %+v", got)
	}
	if s.MapEndOffset() != 1 {
		t.Fatalf("map end %d", s.MapEndOffset())
	}
	if _, ok := s.FirstUnstableOffset(); ok {
		t.Fatal("discarded transaction is open")
	}
	// Multi-batch staging validates against staged state.
	if _, err := s.Prepare(dataHeader(1, 0, 1, 1, 2, 1, false), ControlRecord{}, OriginClient); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Prepare(dataHeader(1, 0, 3, 3, 2, 1, false), ControlRecord{}, OriginClient); err != nil {
		t.Fatal(err)
	}
	_, err := s.Prepare(dataHeader(1, 0, 3, 5, 2, 1, false), ControlRecord{}, OriginClient)
	wantErr(t, err, ErrOutOfOrderSequence)
	if s.Staged() != 2 {
		t.Fatalf("staged %d after a refused batch", s.Staged())
	}
	s.Commit(nil)
	if p, _ := s.Producer(1); p.LastSequence != 4 || len(p.Batches) != 3 {
		t.Fatalf("after multi-batch commit %+v", p)
	}
}

func TestProducerEmptyAndUnknownControlBatches(t *testing.T) {
	s := newTestProducerState(t)
	mustApply(t, s, dataHeader(1, 2, 0, 0, 1, 1, true), ControlRecord{}, OriginVerbatim)
	// Empty control batch (records compacted away): no effect on a known producer.
	h := &kbatch.Header{BaseOffset: 1, Magic: 2, Attributes: kbatch.ControlBit | kbatch.TransactionalBit, ProducerID: 1, ProducerEpoch: 3}
	if done := mustApply(t, s, h, ControlRecord{}, OriginVerbatim); len(done) != 0 {
		t.Fatal(done)
	}
	if p, _ := s.Producer(1); p.Epoch != 2 || p.CurrentTxnFirstOffset != 0 {
		t.Fatalf("empty control batch changed %+v", p)
	}
	// For an unknown producer Kafka registers an empty entry.
	h2 := *h
	h2.ProducerID, h2.BaseOffset = 5, 2
	mustApply(t, s, &h2, ControlRecord{}, OriginVerbatim)
	if p, ok := s.Producer(5); !ok || p.Epoch != NoProducerEpoch || p.LastTimestamp != NoTimestamp || len(p.Batches) != 0 {
		t.Fatalf("empty entry %+v %v", p, ok)
	}
	// Unknown control type: stored without effect in verbatim mode,
	// refused when validating.
	h3, ctl := controlBatch(t, 1, 2, 3, 5, 0, 1)
	mustApply(t, s, h3, ctl, OriginVerbatim)
	if p, _ := s.Producer(1); p.CurrentTxnFirstOffset != 0 {
		t.Fatalf("unknown control type changed %+v", p)
	}
	if s.MapEndOffset() != 4 {
		t.Fatalf("map end %d", s.MapEndOffset())
	}
	_, _, err := apply(s, h3, ctl, OriginCoordinator)
	wantErr(t, err, ErrUnsupportedControlType)
}

func TestProducerExpiration(t *testing.T) {
	s, _ := OpenProducerState(nil, "", ProducerStateConfig{ProducerIDExpirationMs: 1000})
	mustApply(t, s, dataHeader(1, 0, 0, 0, 1, 5000, false), ControlRecord{}, OriginClient)
	mustApply(t, s, dataHeader(2, 0, 0, 1, 1, 5500, false), ControlRecord{}, OriginClient)
	mustApply(t, s, dataHeader(3, 0, 0, 2, 1, 100, true), ControlRecord{}, OriginClient) // old but in a transaction
	s.RemoveExpiredProducers(5999)
	if s.ProducerCount() != 3 {
		t.Fatalf("expired too early: %v", s.Producers())
	}
	s.RemoveExpiredProducers(6000) // exactly the expiration: expired (>=)
	got := s.Producers()
	if len(got) != 2 || got[0].ProducerID != 2 || got[1].ProducerID != 3 {
		t.Fatalf("after 6000: %+v", got)
	}
	s.RemoveExpiredProducers(1 << 40)
	if got := s.Producers(); len(got) != 1 || got[0].ProducerID != 3 {
		t.Fatalf("producer with open transaction expired: %+v", got)
	}
	if d := DefaultProducerIDExpirationMs; d != 86400000 {
		t.Fatal(d)
	}
}

func TestParseControlBatch(t *testing.T) {
	_, ctl := controlBatch(t, 1, 0, 0, kbatch.ControlCommit, 77, 1234)
	if ctl != (ControlRecord{Present: true, Type: kbatch.ControlCommit, CoordinatorEpoch: 77, Timestamp: 1234}) {
		t.Fatalf("commit %+v", ctl)
	}
	_, ctl = controlBatch(t, 1, 0, 0, kbatch.ControlAbort, 0, 5)
	if ctl.Type != kbatch.ControlAbort || ctl.CoordinatorEpoch != 0 {
		t.Fatalf("abort %+v", ctl)
	}
	// A compressed control batch takes the slow path with the same result.
	for _, codec := range []kbatch.Codec{kbatch.CodecGzip, kbatch.CodecSnappy, kbatch.CodecLZ4, kbatch.CodecZstd} {
		b := kbatch.NewBatch(10, kbatch.Record{TimestampDelta: 3, Key: kbatch.ControlKey(kbatch.ControlAbort), Value: kbatch.EndTxnMarkerValue(9)})
		b.Attributes = kbatch.ControlBit | int16(codec)
		raw := kbatchtest.Encode(t, b)
		ctl, err := ParseControlBatch(raw)
		if err != nil || ctl != (ControlRecord{Present: true, Type: kbatch.ControlAbort, CoordinatorEpoch: 9, Timestamp: 13}) {
			t.Fatalf("%v: %+v %v", codec, ctl, err)
		}
	}
	// LogAppendTime: the batch max timestamp.
	b := kbatch.NewBatch(10, kbatch.Record{TimestampDelta: 3, Key: kbatch.ControlKey(kbatch.ControlCommit), Value: kbatch.EndTxnMarkerValue(1)})
	b.Attributes = kbatch.ControlBit | kbatch.TimestampTypeBit
	b.MaxTimestamp = 999
	raw, _ := kbatch.Encode(b)
	if ctl, err := ParseControlBatch(raw); err != nil || ctl.Timestamp != 999 {
		t.Fatalf("log append time: %+v %v", ctl, err)
	}
	// Empty control batch.
	b = kbatch.NewBatch(10)
	b.Attributes = kbatch.ControlBit
	raw, _ = kbatch.Encode(b)
	if ctl, err := ParseControlBatch(raw); err != nil || ctl.Present {
		t.Fatalf("empty: %+v %v", ctl, err)
	}
	// Malformed inputs give errors, never panics.
	bad := map[string][]byte{}
	bad["short"] = raw[:20]
	data := kbatch.NewBatch(1, kbatch.Record{Key: []byte("k")})
	rawData, _ := kbatch.Encode(data)
	bad["not control"] = rawData
	short := kbatch.NewBatch(1, kbatch.Record{Key: []byte{0, 0}, Value: kbatch.EndTxnMarkerValue(1)})
	short.Attributes = kbatch.ControlBit
	bad["short key"], _ = kbatch.Encode(short)
	shortVal := kbatch.NewBatch(1, kbatch.Record{Key: kbatch.ControlKey(kbatch.ControlCommit), Value: []byte{0, 0, 1}})
	shortVal.Attributes = kbatch.ControlBit
	bad["short value"], _ = kbatch.Encode(shortVal)
	negVer := kbatch.NewBatch(1, kbatch.Record{Key: []byte{0xff, 0xff, 0, 1}, Value: kbatch.EndTxnMarkerValue(1)})
	negVer.Attributes = kbatch.ControlBit
	bad["negative key version"], _ = kbatch.Encode(negVer)
	trunc, _ := controlBatch(t, 1, 0, 0, kbatch.ControlCommit, 1, 1)
	_ = trunc
	okRaw, _ := kbatch.Encode(func() kbatch.Batch {
		b := kbatch.NewBatch(1, kbatch.Record{Key: kbatch.ControlKey(1), Value: kbatch.EndTxnMarkerValue(1)})
		b.Attributes = kbatch.ControlBit
		return b
	}())
	bad["truncated records"] = okRaw[:len(okRaw)-8]
	for name, in := range bad {
		ctl, err := ParseControlBatch(in)
		if !errors.Is(err, ErrMalformedControl) || ctl.Type != -1 {
			t.Fatalf("%s: %+v %v", name, ctl, err)
		}
	}
}

func FuzzParseControlBatch(f *testing.F) {
	for _, typ := range []int16{0, 1, 7, 3} {
		b := kbatch.NewBatch(5, kbatch.Record{Key: kbatch.ControlKey(typ), Value: kbatch.EndTxnMarkerValue(2)})
		b.Attributes = kbatch.ControlBit
		raw, _ := kbatch.Encode(b)
		f.Add(raw)
	}
	// Compressed control batches (a verbatim append stores them) take the
	// streaming path.
	for _, c := range []kbatch.Codec{kbatch.CodecGzip, kbatch.CodecSnappy, kbatch.CodecLZ4, kbatch.CodecZstd} {
		b := kbatch.NewBatch(5, kbatch.Record{Key: kbatch.ControlKey(1), Value: kbatch.EndTxnMarkerValue(2)})
		b.Attributes = kbatch.ControlBit | int16(c)
		raw, _ := kbatch.Encode(b)
		f.Add(raw)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		ctl, err := ParseControlBatch(b)
		if err != nil {
			if !errors.Is(err, ErrMalformedControl) {
				t.Fatalf("error does not wrap ErrMalformedControl: %v", err)
			}
			return
		}
		if ctl.Present && ctl.Type != kbatch.ControlAbort && ctl.Type != kbatch.ControlCommit && ctl.CoordinatorEpoch != -1 {
			t.Fatalf("coordinator epoch %d for type %d", ctl.CoordinatorEpoch, ctl.Type)
		}
		// Whatever parses can be fed to producer state without panicking.
		h, herr := kbatch.ParseHeader(b)
		if herr != nil {
			return
		}
		s := newTestProducerState(t)
		if _, err := s.Prepare(&h, ctl, OriginVerbatim); err != nil {
			t.Fatalf("verbatim prepare refused: %v", err)
		}
		s.Commit(nil)
		if _, err := s.Prepare(&h, ctl, OriginCoordinator); err != nil && !strings.HasPrefix(err.Error(), "storage: ") {
			t.Fatal(err)
		}
	})
}

// FuzzProducerStateOps drives producer state with batch sequences decoded
// from the input (8 bytes per batch) in verbatim mode, with snapshot and
// reload steps, checking its invariants: verbatim never refuses, open
// transactions and producers agree, the first unstable offset is the
// earliest open transaction, and a snapshot reload keeps what a snapshot
// records.
func FuzzProducerStateOps(f *testing.F) {
	f.Add([]byte{0, 1, 0, 0, 2, 1, 0, 0, 8, 1, 0, 0, 3, 0, 0, 0})
	f.Add([]byte{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 200, 201, 202, 203, 204, 205, 206, 207})
	f.Add([]byte{2, 0, 5, 1, 0, 0, 0, 0, 14, 0, 5, 0, 0, 0, 0, 0, 2, 1, 6, 1, 0, 0, 0, 0})
	// Transactional data, snapshot, reload, marker, snapshot, reload.
	f.Add([]byte{1, 2, 0, 0, 2, 0, 1, 0, 12, 0, 0, 0, 0, 0, 0, 0, 13, 0, 0, 0, 0, 0, 0, 0,
		8, 2, 0, 0, 0, 0, 2, 1, 12, 0, 0, 0, 0, 0, 0, 0, 13, 0, 0, 0, 0, 0, 0, 0})
	f.Fuzz(func(t *testing.T, b []byte) {
		fsys := newStateTestFS()
		s, err := OpenProducerState(fsys, "p", ProducerStateConfig{})
		if err != nil {
			t.Fatal(err)
		}
		off := int64(0)
		for len(b) >= 8 {
			op, pid, epoch, seq := b[0], int64(b[1]%4)-1, int16(b[2]%3), int32(b[3])
			cnt := int32(b[4]%5) + 1
			gap := int64(b[5] % 4)
			ts := int64(b[6]) * 1000
			coord := int32(b[7] % 3)
			b = b[8:]
			off += gap
			var h *kbatch.Header
			var ctl ControlRecord
			switch op % 16 {
			case 0, 1, 2, 3, 4, 5:
				h = dataHeader(pid, epoch, seq, off, cnt, ts, op%2 == 1)
			case 6, 7:
				h, ctl = controlBatch(t, pid, epoch, off, kbatch.ControlCommit, coord, ts)
			case 8, 9:
				h, ctl = controlBatch(t, pid, epoch, off, kbatch.ControlAbort, coord, ts)
			case 10:
				h, ctl = controlBatch(t, pid, epoch, off, kbatch.ControlMirrorPidReset, 0, ts)
			case 11:
				h = &kbatch.Header{BaseOffset: off, Magic: 2, Attributes: kbatch.ControlBit, ProducerID: pid, ProducerEpoch: epoch}
			case 12:
				if err := s.TakeSnapshot(); err != nil {
					t.Fatal(err)
				}
				continue
			case 13:
				// A fresh state recovering at this end offset: when the newest
				// snapshot is exactly here, it must hold what a snapshot records.
				end := s.MapEndOffset()
				r, err := OpenProducerState(fsys, "p", ProducerStateConfig{})
				if err != nil {
					t.Fatal(err)
				}
				if err := r.TruncateAndReload(0, end, 0); err != nil {
					t.Fatal(err)
				}
				if latest, ok := s.LatestSnapshotOffset(); ok && latest == end && end > 0 {
					if got, want := r.SnapshotEntries(), s.SnapshotEntries(); !reflect.DeepEqual(got, want) {
						t.Fatalf("reloaded snapshot at %d:\n%+v\nwant\n%+v", end, got, want)
					}
					if got, want := r.OngoingTxns(), s.OngoingTxns(); !reflect.DeepEqual(got, want) {
						t.Fatalf("reloaded open transactions %v, want %v", got, want)
					}
					checkProducerInvariants(t, r)
				}
				continue
			case 14:
				s.RemoveExpiredProducers(ts)
				continue
			default:
				s.OnHighWatermarkUpdated(off)
				continue
			}
			if _, err := s.Prepare(h, ctl, OriginVerbatim); err != nil {
				t.Fatalf("verbatim refused a batch: %v", err)
			}
			s.Commit(nil)
			off = h.NextOffset()
			if s.MapEndOffset() != off {
				t.Fatalf("map end %d, want %d", s.MapEndOffset(), off)
			}
			checkProducerInvariants(t, s)
		}
	})
}

func checkProducerInvariants(t *testing.T, s *ProducerState) {
	t.Helper()
	ongoing := s.OngoingTxns()
	byPid := map[int64]int64{}
	for i, o := range ongoing {
		if i > 0 && o.FirstOffset <= ongoing[i-1].FirstOffset {
			t.Fatalf("open transactions out of order: %v", ongoing)
		}
		byPid[o.ProducerID] = o.FirstOffset
	}
	for _, p := range s.Producers() {
		if p.ProducerID < 0 {
			t.Fatalf("negative producer id tracked: %+v", p)
		}
		first, open := byPid[p.ProducerID]
		if (p.CurrentTxnFirstOffset >= 0) != open || (open && first != p.CurrentTxnFirstOffset) {
			t.Fatalf("producer %+v vs open transactions %v", p, ongoing)
		}
		if len(p.Batches) > ProducerBatchesRetained {
			t.Fatalf("%d batches retained", len(p.Batches))
		}
		delete(byPid, p.ProducerID)
	}
	if len(byPid) != 0 {
		t.Fatalf("open transactions of unknown producers: %v", byPid)
	}
	fu, ok := s.FirstUndecidedOffset()
	if ok != (len(ongoing) > 0) || (ok && fu != ongoing[0].FirstOffset) {
		t.Fatalf("first undecided %d/%v with %v", fu, ok, ongoing)
	}
	if us, uok := s.FirstUnstableOffset(); ok && (!uok || us > fu) {
		t.Fatalf("first unstable %d/%v above first undecided %d", us, uok, fu)
	}
}

// Property: the batches a leader accepts (client mode, duplicates and
// refusals dropped), replayed verbatim as a mirror receives them, give the
// mirror exactly the leader's producer state, retained batches included.
func TestProducerVerbatimTracksLikeLeader(t *testing.T) {
	rng := rand.New(rand.NewSource(5))
	var accepted, dups, refused int
	for iter := 0; iter < 200; iter++ {
		leader := newTestProducerState(t)
		type prod struct {
			epoch int16
			seq   int32
		}
		prods := map[int64]*prod{}
		var log []logBatch
		off := int64(0)
		for step := 0; step < 50; step++ {
			pid := int64(rng.Intn(3))
			p := prods[pid]
			if p == nil {
				p = &prod{seq: int32(rng.Intn(3))}
				prods[pid] = p
			}
			n := int32(1 + rng.Intn(3))
			seq := p.seq
			epoch := p.epoch
			switch rng.Intn(10) {
			case 0: // retry of an earlier range
				seq -= int32(1 + rng.Intn(8))
			case 1: // epoch bump (new session)
				epoch++
				seq = 0
			case 2: // stale epoch
				epoch--
			case 3: // sequence jump
				seq += int32(1 + rng.Intn(3))
			}
			h := dataHeader(pid, epoch, seq, off, n, int64(step), false)
			r, _, err := apply(leader, h, ControlRecord{}, OriginClient)
			switch {
			case err != nil:
				refused++
				continue
			case r.Duplicate:
				dups++
				continue
			}
			accepted++
			log = append(log, logBatch{h: h})
			p.epoch, p.seq = epoch, seq+n
			off = h.NextOffset()
		}
		mirror := newTestProducerState(t)
		for _, b := range log {
			mustApply(t, mirror, b.h, b.ctl, OriginVerbatim)
		}
		if a, b := mirror.Producers(), leader.Producers(); !reflect.DeepEqual(a, b) {
			t.Fatalf("iter %d: mirror\n%+v\nleader\n%+v", iter, a, b)
		}
		if mirror.MapEndOffset() != leader.MapEndOffset() {
			t.Fatalf("map end %d vs %d", mirror.MapEndOffset(), leader.MapEndOffset())
		}
	}
	if accepted < 1000 || dups < 100 || refused < 100 {
		t.Fatalf("weak coverage: %d accepted, %d duplicates, %d refused", accepted, dups, refused)
	}
}

func BenchmarkProducerStatePrepareCommit(b *testing.B) {
	s := newTestProducerState(b)
	h := dataHeader(1, 0, 0, 0, 100, 0, false)
	var done []CompletedTxn
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		if _, err := s.Prepare(h, ControlRecord{}, OriginClient); err != nil {
			b.Fatal(err)
		}
		done = s.Commit(done[:0])
		h.BaseOffset += 100
		h.BaseSequence = int32((int64(h.BaseSequence) + 100) % (1 << 31)) // Kafka's wrap-around
	}
}

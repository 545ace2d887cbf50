package storage

import (
	"testing"

	"github.com/verbatim-kafka/verbatim/kbatch"
)

// TestProducerMarkerLSOIgnoresLaterTransactions: one verbatim append holds
// producer 1's aborted transaction (10-14, marker 15), its second aborted
// transaction (16-18, marker 19) and producer 2's transaction starting at
// 20. Each marker's LSO must be the one the source leader recorded when it
// wrote that marker alone (marker+1: nothing else was open), not 20, the
// start of a transaction that did not exist yet. With 20, a read_committed
// fetch bounded below 20 stops collecting after the first entry and shows
// the second aborted transaction as committed data.
func TestProducerMarkerLSOIgnoresLaterTransactions(t *testing.T) {
	s := newTestProducerState(t)
	stage(t, s, dataHeader(1, 0, 0, 10, 5, 1, true), ControlRecord{})
	h, ctl := controlBatch(t, 1, 0, 15, kbatch.ControlAbort, 0, 1)
	stage(t, s, h, ctl)
	stage(t, s, dataHeader(1, 0, 5, 16, 3, 1, true), ControlRecord{})
	h, ctl = controlBatch(t, 1, 0, 19, kbatch.ControlAbort, 0, 1)
	stage(t, s, h, ctl)
	stage(t, s, dataHeader(2, 0, 0, 20, 2, 1, true), ControlRecord{})
	done := s.Commit(nil)
	want := []CompletedTxn{
		{ProducerID: 1, FirstOffset: 10, LastOffset: 15, Aborted: true, LastStableOffset: 16},
		{ProducerID: 1, FirstOffset: 16, LastOffset: 19, Aborted: true, LastStableOffset: 20},
	}
	if len(done) != len(want) {
		t.Fatalf("completed %+v, want %+v", done, want)
	}
	for i := range want {
		if done[i] != want[i] {
			t.Fatalf("completed[%d] = %+v, want %+v", i, done[i], want[i])
		}
	}
}

// TestProducerMarkerLSOCountsTransactionsOpenAtTheMarker: a transaction
// that started below a marker and completes later in the same append was
// open when the marker was written, so it bounds that marker's LSO.
func TestProducerMarkerLSOCountsTransactionsOpenAtTheMarker(t *testing.T) {
	s := newTestProducerState(t)
	stage(t, s, dataHeader(2, 0, 0, 5, 1, 1, true), ControlRecord{})
	stage(t, s, dataHeader(1, 0, 0, 10, 5, 1, true), ControlRecord{})
	h, ctl := controlBatch(t, 1, 0, 15, kbatch.ControlAbort, 0, 1)
	stage(t, s, h, ctl)
	h, ctl = controlBatch(t, 2, 0, 16, kbatch.ControlCommit, 0, 1)
	stage(t, s, h, ctl)
	done := s.Commit(nil)
	if len(done) != 2 || done[0].LastStableOffset != 5 || done[1].LastStableOffset != 17 {
		t.Fatalf("completed %+v, want LSO 5 for producer 1's marker and 17 for producer 2's", done)
	}
}

// stage prepares one verbatim batch of one append (Commit applies them).
func stage(t *testing.T, s *ProducerState, h *kbatch.Header, ctl ControlRecord) {
	t.Helper()
	if _, err := s.Prepare(h, ctl, OriginVerbatim); err != nil {
		t.Fatalf("batch at %d: %v", h.BaseOffset, err)
	}
}

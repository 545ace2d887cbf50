//go:build !race

package storage

import (
	"testing"

	"github.com/verbatim-kafka/verbatim/kbatch"
	"github.com/verbatim-kafka/verbatim/kbatch/kbatchtest"
)

// TestAllocProducerStatePrepareCommit: preparing and committing a batch of
// a known producer allocates nothing once the staging buffer and the
// transaction lists have grown, in every origin and for transactional
// batches and their markers.
func TestAllocProducerStatePrepareCommit(t *testing.T) {
	s := newTestProducerState(t)
	var done []CompletedTxn
	seq, off := int32(0), int64(0)
	next := func(txn bool) *kbatch.Header {
		h := dataHeader(77, 0, seq, off, 10, off, txn)
		seq += 10
		off += 10
		return h
	}
	// Warm up: the producer exists, buffers have grown.
	for i := 0; i < 8; i++ {
		mustApply(t, s, next(false), ControlRecord{}, OriginClient)
	}
	h := dataHeader(77, 0, seq, off, 10, off, false)
	for _, o := range []struct {
		name   string
		origin ProducerOrigin
	}{{"client", OriginClient}, {"verbatim", OriginVerbatim}} {
		allocs := testing.AllocsPerRun(1000, func() {
			h.BaseOffset, h.BaseSequence = off, seq
			off += 10
			seq += 10
			if _, err := s.Prepare(h, ControlRecord{}, o.origin); err != nil {
				t.Fatal(err)
			}
			done = s.Commit(done[:0])
		})
		if allocs != 0 {
			t.Fatalf("%s prepare+commit: %v allocations per batch", o.name, allocs)
		}
	}
	// A duplicate is answered without allocating either.
	dup := dataHeader(77, 0, seq-10, 0, 10, 0, false)
	allocs := testing.AllocsPerRun(1000, func() {
		r, err := s.Prepare(dup, ControlRecord{}, OriginClient)
		if err != nil || !r.Duplicate {
			t.Fatal(r, err)
		}
	})
	if allocs != 0 {
		t.Fatalf("duplicate detection: %v allocations", allocs)
	}
	// Transactions: data batch opens, marker closes (markers parsed from bytes).
	ctlBytes := func(base int64) []byte {
		b := kbatch.NewBatch(1, kbatch.Record{Key: kbatch.ControlKey(kbatch.ControlAbort), Value: kbatch.EndTxnMarkerValue(1)})
		b.Attributes = kbatch.ControlBit | kbatch.TransactionalBit
		b.ProducerID, b.ProducerEpoch, b.BaseOffset = 77, 0, base
		return kbatchtest.Encode(t, b)
	}
	raw := ctlBytes(0)
	mh, _ := kbatch.ParseHeader(raw)
	th := dataHeader(77, 0, 0, 0, 10, 0, true)
	runTxn := func() {
		th.BaseOffset, th.BaseSequence = off, seq
		off += 10
		seq += 10
		if _, err := s.Prepare(th, ControlRecord{}, OriginVerbatim); err != nil {
			t.Fatal(err)
		}
		done = s.Commit(done[:0])
		kbatch.SetBaseOffset(raw, off)
		mh.BaseOffset = off
		off++
		ctl, err := ParseControlBatch(raw)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.Prepare(&mh, ctl, OriginVerbatim); err != nil {
			t.Fatal(err)
		}
		done = s.Commit(done[:0])
		if len(done) != 1 || !done[0].Aborted {
			t.Fatalf("completed %+v", done)
		}
		s.OnHighWatermarkUpdated(off)
	}
	runTxn() // warm up the transaction lists
	allocs = testing.AllocsPerRun(500, runTxn)
	if allocs != 0 {
		t.Fatalf("transaction (data batch, parsed marker): %v allocations", allocs)
	}
}

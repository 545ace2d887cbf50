package storage

import (
	"fmt"

	"github.com/verbatim-kafka/verbatim/kbatch"
)

// producerHooks connects the Log to the producer state (ProducerState,
// producerstate.go) and the per-segment transaction indexes (TxnIndex,
// txnindex.go). ProducerState is two-phase: batches are prepared before the
// write and committed after it, so a failed write leaves it untouched.
type producerHooks struct {
	ps        *ProducerState
	completed []CompletedTxn // scratch for Commit
}

// controlOf returns the control record of b for Prepare. A control batch
// that cannot be decoded is passed as an unknown type: verbatim appends
// store it anyway, and producer state ignores unknown types.
func controlOf(b []byte, h *kbatch.Header) ControlRecord {
	if !h.IsControl() {
		return ControlRecord{}
	}
	ctl, err := ParseControlBatch(b)
	if err != nil {
		return ControlRecord{Present: true, Type: -1}
	}
	return ctl
}

// prepareSet stages every batch of set (with its final offsets already in
// the bytes, or given by assign) under origin. For a leader set, offsets
// are assigned from firstOffset; for a verbatim set firstOffset is
// ignored. It returns a duplicate's original offsets when a client batch
// repeats one of its producer's last five. On error or duplicate nothing
// stays staged.
func (p *producerHooks) prepareSet(set []byte, origin ProducerOrigin, assign bool, firstOffset int64,
	leaderEpoch int32, txnVersion int16) (dup bool, first, last int64, err error) {
	off := firstOffset
	for it := kbatch.Batches(set); it.Next(); {
		b := it.Batch()
		h, _ := kbatch.ParseHeader(b)
		if assign {
			h.BaseOffset = off
			h.LeaderEpoch = leaderEpoch
			off = h.NextOffset()
		}
		ctl := controlOf(b, &h)
		ctl.TransactionVersion = txnVersion
		r, perr := p.ps.Prepare(&h, ctl, origin)
		if perr != nil {
			p.ps.Discard()
			return false, 0, 0, perr
		}
		if r.Duplicate {
			p.ps.Discard()
			return true, r.Original.FirstOffset(), r.Original.LastOffset, nil
		}
	}
	return false, 0, 0, nil
}

// commit applies the staged batches now in the log and appends the
// aborted transactions they completed to the transaction index of s.
// hw is the new high watermark (= log end on a single node).
func (p *producerHooks) commit(s *segment, hw int64) error {
	p.completed = p.ps.Commit(p.completed[:0])
	for i := range p.completed {
		t := &p.completed[i]
		if !t.Aborted {
			continue
		}
		if err := s.txn.Append(t.AbortedTxn()); err != nil {
			return fmt.Errorf("transaction index %s: %w", s.txn.Name(), err)
		}
	}
	p.ps.OnHighWatermarkUpdated(hw)
	return nil
}

// openTxnIndex opens the transaction index of s.
func openTxnIndex(s *segment) error {
	x, err := OpenTxnIndex(s.fs, s.path(TxnIndexSuffix), s.base)
	if err != nil {
		return err
	}
	s.txn = x
	return nil
}

// LastStableOffset is the offset below which every transaction is decided
// (Kafka's LSO): min(high watermark, first unstable offset).
func (l *Log) LastStableOffset() int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.lsoLocked()
}

func (l *Log) lsoLocked() int64 {
	if fu, ok := l.producer.ps.FirstUnstableOffset(); ok && fu < l.leo {
		return fu
	}
	return l.leo
}

// AbortedTransactions appends to dst the aborted transactions that
// overlap [from, upTo) (Fetch isolation READ_COMMITTED): every transaction
// index entry with LastOffset >= from and FirstOffset < upTo, searching
// the segments from the one holding from until an entry's last stable
// offset shows later segments cannot matter.
func (l *Log) AbortedTransactions(from, upTo int64, dst []AbortedTxn) ([]AbortedTxn, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.checkLocked(); err != nil {
		return dst, err
	}
	i := l.segmentFor(from)
	if i < 0 {
		i = 0
	}
	for ; i < len(l.segs); i++ {
		// No stop at segments starting at or after upTo: an ABORT marker
		// (and so its index entry) can sit in a later segment than the
		// aborted data it covers. Only an entry whose LSO reaches upTo
		// proves later segments cannot matter, as in Kafka.
		var complete bool
		dst, complete = l.segs[i].txn.CollectAborted(from, upTo, dst)
		if complete {
			break
		}
	}
	return dst, nil
}

// Producers returns the tracked producers (DescribeProducers).
func (l *Log) Producers() []ProducerInfo {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.producer.ps.Producers()
}

// OngoingTransactions returns the open transactions by first offset.
func (l *Log) OngoingTransactions() []OngoingTxn {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.producer.ps.OngoingTxns()
}

// snapshot writes a producer snapshot named off (the new segment's base
// on roll, the log end on close), as Kafka's takeSnapshot after
// updateMapEndOffset.
func (p *producerHooks) snapshot(off int64) error {
	if off > p.ps.MapEndOffset() {
		p.ps.UpdateMapEndOffset(off)
	}
	return p.ps.TakeSnapshot()
}

// RemoveExpiredProducers forgets producers without an open transaction
// whose last batch timestamp is producer.id.expiration.ms before nowMs
// (Kafka runs this periodically; the broker's housekeeping should too).
func (l *Log) RemoveExpiredProducers(nowMs int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.producer.ps.RemoveExpiredProducers(nowMs)
}

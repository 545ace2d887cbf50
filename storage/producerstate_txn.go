package storage

import "sort"

// Transactions in producer state: completing them at their markers, the
// last stable offset, the first unstable and undecided offsets, and what
// the high watermark and the log start let go of.

// completeTxns computes each transaction's last stable offset and marks it
// complete (Kafka's lastStableOffset then completeTxn), in order.
func (s *ProducerState) completeTxns(txns []CompletedTxn) {
	for i := range txns {
		t := &txns[i]
		t.LastStableOffset = s.lastStableOffsetFor(t.ProducerID, t.LastOffset)
		k := findTxn(s.ongoing, t.FirstOffset)
		if k < 0 {
			// Not started as far as this state knows (cannot happen when
			// the state was built from the log); Kafka would fail here.
			continue
		}
		copy(s.ongoing[k:], s.ongoing[k+1:])
		s.ongoing = s.ongoing[:len(s.ongoing)-1]
		s.unreplicated = insertTxn(s.unreplicated, txnMeta{producerID: t.ProducerID, firstOffset: t.FirstOffset, lastOffset: t.LastOffset})
	}
}

// lastStableOffsetFor is the LSO right after producer pid's marker at
// lastOffset: the first transaction of another producer that was open at
// that point, else lastOffset+1.
//
// Transactions that start above the marker are not counted, although one
// verbatim append may already have started them: the source leader wrote
// the marker on its own, before they existed, and its transaction index
// holds the LSO of that moment. Kafka's follower append counts them (it
// resolves markers after applying the whole append), which gives an entry
// an LSO above later aborted transactions and makes read_committed
// fetches stop collecting aborted transactions too early; a mirror must
// keep the source's answers.
func (s *ProducerState) lastStableOffsetFor(pid, lastOffset int64) int64 {
	for _, t := range s.ongoing { // ordered by first offset
		if t.firstOffset > lastOffset {
			break
		}
		if t.producerID != pid {
			return t.firstOffset
		}
	}
	return lastOffset + 1
}

// LastStableOffsetAfter returns what Commit puts in CompletedTxn's
// LastStableOffset for a marker of producer pid at markerOffset, given the
// current (committed) ongoing transactions.
func (s *ProducerState) LastStableOffsetAfter(pid, markerOffset int64) int64 {
	return s.lastStableOffsetFor(pid, markerOffset)
}

func findTxn(ts []txnMeta, firstOffset int64) int {
	i := sort.Search(len(ts), func(i int) bool { return ts[i].firstOffset >= firstOffset })
	if i < len(ts) && ts[i].firstOffset == firstOffset {
		return i
	}
	return -1
}

// insertTxn inserts t keeping ts ordered by first offset (replacing an
// entry with the same first offset, as a map keyed by offset would).
func insertTxn(ts []txnMeta, t txnMeta) []txnMeta {
	i := sort.Search(len(ts), func(i int) bool { return ts[i].firstOffset >= t.firstOffset })
	if i < len(ts) && ts[i].firstOffset == t.firstOffset {
		ts[i] = t
		return ts
	}
	ts = append(ts, txnMeta{})
	copy(ts[i+1:], ts[i:])
	ts[i] = t
	return ts
}

// clearProducers forgets every producer and ongoing transaction (the
// MIRROR_PID_RESET barrier). Completed transactions awaiting the high
// watermark are kept: they are decided, only their visibility waits.
func (s *ProducerState) clearProducers() {
	clear(s.producers)
	s.ongoing = s.ongoing[:0]
}

// FirstUnstableOffset is the first offset of the earliest transaction that
// is ongoing or completed with its marker at or above the high watermark
// (Kafka's firstUnstableOffset); ok is false when there is none. The LSO is
// min(high watermark, this).
func (s *ProducerState) FirstUnstableOffset() (offset int64, ok bool) {
	offset, ok = -1, false
	if len(s.ongoing) > 0 {
		offset, ok = s.ongoing[0].firstOffset, true
	}
	if len(s.unreplicated) > 0 && (!ok || s.unreplicated[0].firstOffset < offset) {
		offset, ok = s.unreplicated[0].firstOffset, true
	}
	return offset, ok
}

// FirstUndecidedOffset is the first offset of the earliest ongoing
// transaction, ignoring replication.
func (s *ProducerState) FirstUndecidedOffset() (offset int64, ok bool) {
	if len(s.ongoing) == 0 {
		return -1, false
	}
	return s.ongoing[0].firstOffset, true
}

// OnHighWatermarkUpdated forgets completed transactions whose marker is
// below hw, letting the first unstable offset advance. The partition calls
// it whenever the high watermark moves (after every append on a single
// replica).
func (s *ProducerState) OnHighWatermarkUpdated(hw int64) {
	s.removeUnreplicated(hw)
}

func (s *ProducerState) removeUnreplicated(offset int64) {
	k := 0
	for _, t := range s.unreplicated {
		if t.lastOffset >= offset {
			s.unreplicated[k] = t
			k++
		}
	}
	s.unreplicated = s.unreplicated[:k]
}

// OnLogStartOffsetIncremented follows an advance of the log start offset
// (retention, DeleteRecords), as Kafka does.
func (s *ProducerState) OnLogStartOffsetIncremented(logStartOffset int64) {
	s.removeUnreplicated(logStartOffset)
	if s.lastMapOff < logStartOffset {
		s.lastMapOff = logStartOffset
	}
	if n := len(s.snapshots); n > 0 {
		s.lastSnapOff = s.snapshots[n-1]
	} else {
		s.lastSnapOff = logStartOffset
	}
}

// OngoingTxn is an open transaction: its producer and first offset.
type OngoingTxn struct {
	ProducerID  int64
	FirstOffset int64
}

// OngoingTxns returns the open transactions by first offset.
func (s *ProducerState) OngoingTxns() []OngoingTxn {
	out := make([]OngoingTxn, len(s.ongoing))
	for i, t := range s.ongoing {
		out[i] = OngoingTxn{ProducerID: t.producerID, FirstOffset: t.firstOffset}
	}
	return out
}

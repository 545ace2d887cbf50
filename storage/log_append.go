package storage

import (
	"bytes"
	"fmt"
	"math"

	"github.com/verbatim-kafka/verbatim/kbatch"
)

// AppendResult describes a successful append.
type AppendResult struct {
	// FirstOffset and LastOffset are the first and last offsets of the
	// record set: the base offset of its first batch and the last offset of
	// its last batch (assigned ones for AppendLeader, the batches' own for
	// AppendVerbatim). For a duplicate or an already-present retry they are
	// the offsets the batches were stored at originally.
	FirstOffset, LastOffset int64
	// LogStartOffset at the time of the append (Produce responses carry it).
	LogStartOffset int64
	// Duplicate: AppendLeader found the batch among the last five batches
	// of its producer (Kafka's DUPLICATE_SEQUENCE_NUMBER handling: answer
	// success with the original offsets). Nothing was written.
	Duplicate bool
	// AlreadyPresent: AppendVerbatim found every batch already stored,
	// byte for byte, at the same offsets (an identical retry). Nothing was
	// written. When only a prefix of the set was present, the rest was
	// appended and AlreadyPresent is false; FirstOffset is still the
	// set's first offset.
	AlreadyPresent bool
}

// AppendLeader appends a record set as the partition leader: offsets are
// assigned from the log end (the base offset and partition leader epoch of
// each batch are patched in place, outside the CRC), after producer-state
// checks as Kafka's leader does them.
//
// set must be whole v2 batches (the hot path has validated CRCs and
// record framing and, on LogAppendTime topics, stamped the timestamp type
// and max timestamp and recomputed the CRC); it is modified in place and
// written as is. nowMs is the
// append time in Unix milliseconds.
//
// Errors: ErrCorruptBatch, ErrUnsupportedMagic, the producer errors
// (ErrOutOfOrderSequence, ErrInvalidProducerEpoch, ... see
// producerstate.go), ErrNoSpace / ErrWrite (nothing appended, the log is
// unchanged), ErrOffline, ErrClosed. A duplicate of one of the producer's
// last five batches returns Duplicate with the original offsets and writes
// nothing.
//
// The data is written (page cache) when AppendLeader returns; under
// FlushAlways use OnDurable / WaitDurable for durability.
// Steady-state appends do not allocate.
func (l *Log) AppendLeader(set []byte, leaderEpoch int32, nowMs int64) (AppendResult, error) {
	return l.appendAssigned(set, leaderEpoch, nowMs, OriginClient, 0)
}

// AppendCoordinator appends control batches (COMMIT/ABORT markers) written
// by the broker for the transaction coordinator (WriteTxnMarkers): like
// AppendLeader, with Kafka's coordinator-origin checks (producer epoch and
// coordinator epoch, no sequence checks). txnVersion is the transaction
// version of the markers (2 applies KIP-890's strict epoch rule).
func (l *Log) AppendCoordinator(set []byte, leaderEpoch int32, nowMs int64, txnVersion int16) (AppendResult, error) {
	return l.appendAssigned(set, leaderEpoch, nowMs, OriginCoordinator, txnVersion)
}

// appendAssigned is AppendLeader and AppendCoordinator: under l.mu, a log
// that refuses operations or a malformed set fails before
// appendAssignedLocked.
func (l *Log) appendAssigned(set []byte, leaderEpoch int32, nowMs int64, origin ProducerOrigin, txnVersion int16) (AppendResult, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.checkLocked(); err != nil {
		return AppendResult{}, err
	}
	if _, err := checkSet(set, false); err != nil {
		return AppendResult{}, err
	}
	return l.appendAssignedLocked(set, leaderEpoch, nowMs, origin, txnVersion)
}

// appendAssignedLocked is the leader append: checks, offset assignment,
// write. REQUIRES: l.mu, set checked.
func (l *Log) appendAssignedLocked(set []byte, leaderEpoch int32, nowMs int64, origin ProducerOrigin, txnVersion int16) (AppendResult, error) {
	res := AppendResult{FirstOffset: l.leo, LogStartOffset: l.logStart}
	// Producer checks come before any change so that a refused set leaves
	// the log, the producer state and the caller's buffer untouched.
	dup, first, last, err := l.producer.prepareSet(set, origin, true, l.leo, leaderEpoch, txnVersion)
	if err != nil {
		return AppendResult{}, err
	}
	if dup {
		res.FirstOffset, res.LastOffset, res.Duplicate = first, last, true
		return res, nil
	}
	off := l.leo
	for rest := set; len(rest) > 0; {
		n := batchSize(rest)
		b := rest[:n:n]
		rest = rest[n:]
		kbatch.SetBaseOffset(b, off)
		kbatch.SetLeaderEpoch(b, leaderEpoch)
		off += int64(kbatch.LastOffsetDelta(b)) + 1
	}
	res.LastOffset = off - 1
	if err := l.writeLocked(set, nowMs, true); err != nil {
		l.producer.ps.Discard()
		return AppendResult{}, err
	}
	return res, nil
}

// AppendVerbatim appends a record set keeping every byte, as Kafka's
// follower append does: each batch keeps its base offset and leader epoch;
// gaps between batches and after the log end are allowed and preserved; no
// sequence or epoch validation is done; producer state, the leader-epoch
// cache and the transaction index are updated from the batches, and a
// producer "duplicate" never drops a batch.
//
// Base offsets must strictly increase inside the set. A set starting below
// the log end is accepted only as an identical retry: every batch below the
// log end must be stored at the same offset with the same bytes. If all
// are, AlreadyPresent is reported with the original offsets; if a suffix of
// the set is new, that suffix is appended. Anything else is
// ErrOffsetBelowLogEnd and nothing is written.
//
// Other errors as AppendLeader. A set whose offsets span more than 2^31
// (huge gaps) is written segment by segment; if a later part fails, the
// earlier parts stay in the log and an identical retry appends the rest.
// Steady-state appends do not allocate.
func (l *Log) AppendVerbatim(set []byte) (AppendResult, error) {
	return l.AppendVerbatimAt(set, l.cfg.NowMs())
}

// AppendVerbatimAt is AppendVerbatim at the caller's time nowMs (what the
// segment roll by age compares), so that a caller which already read the
// clock for its request does not read it again under the log's lock.
func (l *Log) AppendVerbatimAt(set []byte, nowMs int64) (AppendResult, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.checkLocked(); err != nil {
		return AppendResult{}, err
	}
	last, err := checkSet(set, true)
	if err != nil {
		return AppendResult{}, err
	}
	res := AppendResult{FirstOffset: kbatch.BaseOffset(set), LastOffset: last,
		LogStartOffset: l.logStart}
	if res.FirstOffset < l.leo {
		rest, err := l.matchStoredLocked(set)
		if err != nil {
			return AppendResult{}, err
		}
		if len(rest) == 0 {
			res.AlreadyPresent = true
			return res, nil
		}
		set = rest
	}
	if err := l.writeLocked(set, nowMs, false); err != nil {
		l.producer.ps.Discard()
		return AppendResult{}, err
	}
	return res, nil
}

// batchSize returns the size of the first batch of a set checked by
// checkSet.
func batchSize(b []byte) int { return kbatch.LogOverhead + int(kbatch.Length(b)) }

// checkSet checks the framing storage relies on: whole batches, v2, a
// non-negative last offset delta, and for verbatim sets non-negative,
// strictly increasing offsets that do not overflow. It returns the last
// offset of the last batch as the bytes say (the set's own for verbatim
// sets), so that nothing walks the set again for it.
func checkSet(set []byte, verbatim bool) (last int64, err error) {
	if len(set) == 0 {
		return 0, fmt.Errorf("%w: empty record set", ErrCorruptBatch)
	}
	prevLast := int64(-1)
	it := kbatch.Batches(set)
	for it.Next() {
		b, pos := it.Batch(), it.Pos()
		if kbatch.Magic(b) != 2 {
			return 0, fmt.Errorf("%w: batch at byte %d has magic %d", ErrUnsupportedMagic, pos, kbatch.Magic(b))
		}
		lod := kbatch.LastOffsetDelta(b)
		if lod < 0 {
			return 0, fmt.Errorf("%w: batch at byte %d has negative last offset delta %d", ErrCorruptBatch, pos, lod)
		}
		last = kbatch.BaseOffset(b) + int64(lod)
		if verbatim {
			base := kbatch.BaseOffset(b)
			if base < 0 || base > math.MaxInt64-int64(lod)-1 {
				return 0, fmt.Errorf("%w: batch at byte %d has base offset %d", ErrCorruptBatch, pos, base)
			}
			if base <= prevLast {
				return 0, fmt.Errorf("%w: batch at byte %d has base offset %d, not above the previous batch's last offset %d", ErrCorruptBatch, pos, base, prevLast)
			}
			prevLast = last
		}
	}
	if b, pos := it.Rest(), it.Pos(); len(b) > 0 {
		// Not a whole batch: say why.
		if len(b) >= kbatch.MagicOffset+1 && kbatch.Magic(b) != 2 {
			return 0, fmt.Errorf("%w: batch at byte %d has magic %d", ErrUnsupportedMagic, pos, kbatch.Magic(b))
		}
		if len(b) < kbatch.HeaderSize {
			return 0, fmt.Errorf("%w: %d bytes at byte %d are shorter than a batch header", ErrCorruptBatch, len(b), pos)
		}
		return 0, fmt.Errorf("%w: batch at byte %d has length %d, %d bytes available", ErrCorruptBatch, pos, kbatch.Length(b), len(b)-kbatch.LogOverhead)
	}
	return last, nil
}

// matchStoredLocked compares the batches of set that start below the log
// end with the stored ones and returns the remaining (new) batches.
// REQUIRES: l.mu.
func (l *Log) matchStoredLocked(set []byte) ([]byte, error) {
	it := kbatch.Batches(set)
	for it.Next() {
		b := it.Batch()
		base := kbatch.BaseOffset(b)
		if base >= l.leo {
			return set[it.Pos():], nil
		}
		n := len(b)
		if base < l.logStart {
			return nil, fmt.Errorf("%w: batch at offset %d is below the log start offset %d", ErrOffsetBelowLogEnd, base, l.logStart)
		}
		stored, err := l.storedBatchLocked(base)
		if err != nil {
			return nil, err
		}
		if stored.base != base || stored.size != int64(n) {
			return nil, fmt.Errorf("%w: offset %d (log end %d): stored batch is [%d, %d], %d bytes; offered batch has %d bytes", ErrOffsetBelowLogEnd, base, l.leo, stored.base, stored.last, stored.size, n)
		}
		if cap(l.cmpBuf) < n {
			l.cmpBuf = make([]byte, n)
		}
		buf := l.cmpBuf[:n]
		if err := readFull(stored.seg.log, buf, stored.pos); err != nil {
			return nil, fmt.Errorf("%w: reading stored batch at offset %d: %v", ErrCorruptLog, base, err)
		}
		if !bytes.Equal(buf, b) {
			return nil, fmt.Errorf("%w: offset %d (log end %d): stored batch differs from the offered one", ErrOffsetBelowLogEnd, base, l.leo)
		}
	}
	return it.Rest(), nil
}

type storedBatch struct {
	batchPos
	seg *segment
}

// storedBatchLocked returns the first stored batch whose last offset is >=
// offset, looking into later segments when offset falls in a gap at the
// end of a segment. REQUIRES: l.mu.
func (l *Log) storedBatchLocked(offset int64) (storedBatch, error) {
	i := l.segmentFor(offset)
	if i < 0 {
		i = 0
	}
	for ; i < len(l.segs); i++ {
		s := l.segs[i]
		bp, err := s.find(offset)
		if err == nil {
			return storedBatch{batchPos: bp, seg: s}, nil
		}
		if err != errNoBatch {
			return storedBatch{}, err
		}
	}
	return storedBatch{}, errNoBatch
}

// writeLocked writes a checked set whose offsets are final, rolling
// segments as needed, then updates indexes, the epoch cache, producer
// state and the log end. prepared says the producer state has staged the
// whole set already (leader appends); otherwise each chunk is staged with
// OriginVerbatim before its write. REQUIRES: l.mu.
func (l *Log) writeLocked(set []byte, nowMs int64, prepared bool) error {
	for len(set) > 0 {
		a := l.active()
		first := kbatch.BaseOffset(set)
		if l.shouldRoll(a, set, nowMs) {
			if err := l.rollLocked(first, nowMs); err != nil {
				return err
			}
			a = l.active()
		}
		// The chunk is the longest prefix whose offsets fit the segment's
		// int32 relative offsets (a longer one only with huge verbatim gaps).
		chunk := 0
		for it := kbatch.Batches(set); it.Next(); {
			b := it.Batch()
			if kbatch.BaseOffset(b)+int64(kbatch.LastOffsetDelta(b))-a.base > math.MaxInt32 {
				break
			}
			chunk = it.Pos() + len(b)
		}
		if chunk == 0 {
			// Unreachable after shouldRoll; kept as a guard against looping.
			return fmt.Errorf("%w: batch at offset %d does not fit a segment", ErrCorruptBatch, first)
		}
		if a.size+int64(chunk) > math.MaxInt32 {
			return fmt.Errorf("%w: %d bytes", ErrRecordSetTooLarge, chunk)
		}
		if !prepared {
			if _, _, _, err := l.producer.prepareSet(set[:chunk], OriginVerbatim, false, 0, 0, 0); err != nil {
				return fmt.Errorf("%w: %v", ErrCorruptBatch, err)
			}
		}
		if err := l.writeChunkLocked(a, set[:chunk]); err != nil {
			return err
		}
		set = set[chunk:]
	}
	if l.cfg.Flush == FlushAlways {
		l.signal()
	}
	return nil
}

func (l *Log) writeChunkLocked(a *segment, chunk []byte) error {
	// Leader epochs are recorded before the write, in memory only: the
	// checkpoint is written lazily (AssignDeferred), before a recovery
	// point or producer snapshot covers them (persistRecoveryPoint,
	// rollLocked); until then recovery re-learns them from the batches.
	// Entries starting at or after the log end describe no stored batch,
	// so truncating the cache to the log end undoes them (undoChunkLocked).
	for it := kbatch.Batches(chunk); it.Next(); {
		l.epochs.AssignDeferred(kbatch.LeaderEpoch(it.Batch()), kbatch.BaseOffset(it.Batch()))
	}
	pos := a.size
	if _, err := a.log.WriteAt(chunk, pos); err != nil {
		return l.undoChunkLocked(a, pos, true, "append to "+a.path(logSuffix), err)
	}
	for it := kbatch.Batches(chunk); it.Next(); {
		b := it.Batch()
		last := kbatch.BaseOffset(b) + int64(kbatch.LastOffsetDelta(b))
		a.noteBatch(pos, int64(len(b)), last, kbatch.MaxTimestamp(b))
		pos += int64(len(b))
		l.leo = last + 1
	}
	if err := l.producer.commit(a, l.leo); err != nil {
		return l.failLocked("producer state", err)
	}
	// Published after the transaction index entries the chunk added, so
	// that a sync covering these offsets covers those entries too.
	l.written.Store(l.leo)
	return nil
}

// undoChunkLocked reverts a chunk whose write or epoch update failed:
// staged producer state is dropped, the file is cut back to pos (when the
// write was attempted) and the epoch cache truncated to the log end. The
// failure is returned as ErrNoSpace or ErrWrite; if the undo itself fails
// the partition goes offline. REQUIRES: l.mu.
func (l *Log) undoChunkLocked(a *segment, pos int64, wrote bool, what string, cause error) error {
	l.producer.ps.Discard()
	if wrote {
		if terr := a.log.Truncate(pos); terr != nil {
			return l.failLocked("truncate after failed write", fmt.Errorf("%v (write error: %v)", terr, cause))
		}
	}
	if terr := l.epochs.TruncateFromEnd(l.leo); terr != nil && !isNoSpace(terr) {
		// ENOSPC here means the checkpoint file still holds the state
		// before the failed Assign, which the in-memory cache now matches.
		return l.failLocked("leader-epoch checkpoint", terr)
	}
	if !wrote && !isNoSpace(cause) {
		return l.failLocked(what, cause)
	}
	if isNoSpace(cause) {
		return fmt.Errorf("%w: %s: %v", ErrNoSpace, what, cause)
	}
	return fmt.Errorf("%w: %s: %v", ErrWrite, what, cause)
}

// shouldRoll applies Kafka's roll rules before appending set to a.
func (l *Log) shouldRoll(a *segment, set []byte, nowMs int64) bool {
	if a.size == 0 {
		// An empty segment is reused unless the first batch's offsets
		// cannot be expressed relative to its base.
		first := kbatch.BaseOffset(set)
		return first < a.base || first+int64(kbatch.LastOffsetDelta(set))-a.base > math.MaxInt32
	}
	if a.size > l.cfg.SegmentBytes-int64(len(set)) {
		return true
	}
	maxEntries := l.cfg.SegmentIndexBytes / offsetIndexEntrySize
	if a.offIdx.entries() >= maxEntries || a.timeIdx.entries() >= l.cfg.SegmentIndexBytes/timeIndexEntrySize {
		return true
	}
	first := kbatch.BaseOffset(set)
	if first+int64(kbatch.LastOffsetDelta(set))-a.base > math.MaxInt32 {
		return true
	}
	// Time: the new batch's timestamp against the first batch's, or the
	// segment's age when there are no timestamps (Kafka's
	// timeWaitedForRoll).
	var waited int64
	if ts := kbatch.MaxTimestamp(set); a.rollTs >= 0 && ts >= 0 {
		waited = ts - a.rollTs
	} else {
		waited = nowMs - a.createdMs
	}
	return waited > l.cfg.SegmentMs-l.cfg.SegmentJitterMs
}

// rollLocked closes the active segment for writing (final time index
// entry, index entries written to the files) and starts a new one at base
// (with a producer snapshot). The old segment is not synced here: it goes
// to the flusher, which syncs its log, indexes and transaction index in the
// background and then advances the recovery point (Kafka's roll followed by
// an asynchronous flushUptoOffsetExclusive). Appends continue in the new
// segment meanwhile. REQUIRES: l.mu.
func (l *Log) rollLocked(base int64, nowMs int64) error {
	old := l.active()
	if old.size == 0 {
		// An empty active segment that cannot take the batch (offsets
		// below its base after a failed write that had rolled, or too far
		// above it) is replaced.
		if err := l.retireEmptyActiveLocked(); err != nil {
			return err
		}
		return l.createActiveLocked(base, nowMs)
	}
	old.onRoll()
	if err := old.writeIndexes(); err != nil {
		if isNoSpace(err) {
			return fmt.Errorf("%w: writing the indexes of %s: %v", ErrNoSpace, old.path(logSuffix), err)
		}
		return l.failLocked("index write on roll", err)
	}
	// Queued before the new segment is published (see syncActive), and
	// its final size recorded before the new segment can hold data (see
	// RolledSegmentsFile).
	l.pushUnflushedLocked(old)
	if err := l.writeRolledSegmentsLocked(); err != nil {
		l.popUnflushedLocked()
		if isNoSpace(err) {
			return fmt.Errorf("%w: recording the roll of %s: %v", ErrNoSpace, old.path(logSuffix), err)
		}
		return l.failLocked("rolled-segments record", err)
	}
	if err := l.createActiveLocked(base, nowMs); err != nil {
		if l.active() == old {
			// No new segment (out of space, or offline): old stays
			// active and is synced as the active segment.
			l.popUnflushedLocked()
		}
		return err
	}
	l.signal()
	return nil
}

// retireEmptyActiveLocked deletes the empty active segment. The flusher may
// be syncing its file at this moment; the retired flag tells it that the
// failure of that sync means nothing (the segment held no data). Stale
// producer snapshots above the log end (named by the segment's base) go
// too. REQUIRES: l.mu.
func (l *Log) retireEmptyActiveLocked() error {
	old := l.active()
	old.retired.Store(true)
	old.closeFiles()
	old.txn.Close()
	if err := removeSegmentFiles(l.fs, l.dir, old.base); err != nil {
		return l.failLocked("remove empty segment", err)
	}
	l.segs = l.segs[:len(l.segs)-1]
	if err := l.producer.ps.DeleteSnapshotsAbove(l.leo); err != nil {
		return l.failLocked("producer snapshots", err)
	}
	if l.producer.ps.MapEndOffset() > l.leo {
		l.producer.ps.UpdateMapEndOffset(l.leo)
	}
	return nil
}

// createActiveLocked creates the segment at base and makes it active.
// REQUIRES: l.mu.
func (l *Log) createActiveLocked(base, nowMs int64) error {
	s, err := createSegment(l.fs, l.dir, base, int64(l.cfg.IndexIntervalBytes), nowMs)
	if err == nil {
		if err = openTxnIndex(s); err != nil {
			s.closeFiles()
		}
	}
	if err != nil {
		if !isNoSpace(err) {
			return l.failLocked("create segment", err)
		}
		// Out of space: remove what was created; the old segment stays
		// active and a later append rolls again.
		if rerr := removeSegmentFiles(l.fs, l.dir, base); rerr != nil {
			return l.failLocked("remove partial segment", rerr)
		}
		if len(l.segs) == 0 {
			// The empty active segment was retired and no segment can be
			// created: without an active segment the log cannot go on.
			return l.failLocked("create segment", err)
		}
		l.syncSeg.Store(l.active())
		return fmt.Errorf("%w: creating segment %d: %v", ErrNoSpace, base, err)
	}
	l.segs = append(l.segs, s)
	l.syncSeg.Store(s)
	// Kafka snapshots producer state on roll, named by the new base
	// offset. Without space the snapshot is skipped: recovery then replays
	// from an older one. Recovery replays from that snapshot, so the
	// leader epochs the appends below it deferred are written first
	// (without them the snapshot is skipped too).
	if err := l.epochs.SyncDeferred(); err != nil {
		if !isNoSpace(err) {
			return l.failLocked("leader-epoch checkpoint on roll", err)
		}
		return nil
	}
	if err := l.producer.snapshot(base); err != nil && !isNoSpace(err) {
		return l.failLocked("producer snapshot on roll", err)
	}
	return nil
}

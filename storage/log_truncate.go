package storage

import (
	"fmt"
	"time"
)

// Truncate removes every batch whose last offset is >= to (Kafka's
// truncateTo: a batch containing `to` goes whole). The log end becomes the
// end of the last remaining batch (or the base of the segment left empty).
// The leader-epoch cache is truncated to match and producer state is
// rebuilt from the newest snapshot at or below the new end plus a replay.
// If `to` is below the first segment the log is truncated fully and starts
// at `to`. `to` >= LogEndOffset does nothing. The truncation is made
// durable before returning, and it is all or nothing across a crash: the
// target is recorded first (truncation-checkpoint, log_truncate_intent.go)
// and Open completes a truncation a crash interrupted, so a reopened log is
// either the old one or the truncated one, never a longer prefix between.
func (l *Log) Truncate(to int64) error {
	if err := l.lockRewrite(); err != nil {
		return err
	}
	defer l.unlockRewrite()
	if to >= l.leo {
		return nil
	}
	if to < 0 {
		return fmt.Errorf("%w: truncation to negative offset %d", ErrOffsetOutOfRange, to)
	}
	if err := writeTruncationIntent(l.fs, l.dir, to); err != nil {
		return l.failLocked("truncation checkpoint", err)
	}
	if err := l.truncateLocked(to); err != nil {
		return err
	}
	if err := removeTruncationIntent(l.fs, l.dir); err != nil {
		return l.failLocked("truncation checkpoint removal", err)
	}
	return nil
}

// truncateLocked is Truncate's work, 0 <= to < l.leo. REQUIRES: l.syncMu,
// l.mu.
func (l *Log) truncateLocked(to int64) error {
	if to < l.segs[0].base {
		return l.truncateFullyLocked(to)
	}
	// Drop whole segments starting at or after `to` (keeping the first).
	for len(l.segs) > 1 && l.active().base >= to {
		if err := l.deleteSegmentLocked(len(l.segs) - 1); err != nil {
			return err
		}
	}
	a := l.active()
	// A rolled segment that is active again is synced below if it is
	// cut, and otherwise waits for the next roll, Flush or Close.
	l.dropUnflushedLocked(a)
	pos := a.size
	if bp, err := a.find(to); err == nil {
		pos = bp.pos
	} else if err != errNoBatch {
		return l.failLocked("truncate lookup", err)
	}
	if pos < a.size {
		if err := a.log.Truncate(pos); err != nil {
			return l.failLocked("truncate", err)
		}
		a.size = pos
		if err := a.rebuildIndexes(); err != nil {
			return l.failLocked("index rebuild after truncation", err)
		}
		if a.size == 0 {
			a.next = a.base
		}
		if err := a.log.Sync(); err != nil {
			return l.failLocked("sync after truncation", err)
		}
	}
	l.leo = a.next
	if a.size == 0 {
		l.leo = a.base
	}
	l.syncSeg.Store(l.active())
	l.written.Store(l.leo)
	l.dmu.Lock()
	if l.durable > l.leo {
		l.durable = l.leo
	}
	l.dmu.Unlock()
	if l.logStart > l.leo {
		l.logStart = l.leo
	}
	// Offsets from the new end on will be written again: the recorded
	// recovery point must not vouch for them. This also makes the
	// removal of the deleted segments' files durable (directory sync).
	l.lowerRecoveryPoint(l.leo)
	if err := l.persistRecoveryPoint(); err != nil {
		return l.failLocked("recovery point", err)
	}
	if err := l.epochs.TruncateFromEnd(l.leo); err != nil {
		return l.failLocked("leader-epoch checkpoint", err)
	}
	for _, s := range l.segs {
		if err := s.txn.TruncateTo(l.leo); err != nil {
			return l.failLocked("transaction index truncation", err)
		}
	}
	ps := l.producer.ps
	if err := ps.TruncateAndReload(l.logStart, l.leo, l.cfg.NowMs()); err != nil {
		return l.failLocked("producer state reload", err)
	}
	if err := l.replayLocked(ps.MapEndOffset(), false); err != nil {
		return l.failLocked("producer state replay", err)
	}
	return nil
}

// TruncateFullyAndStartAt deletes every segment and starts an empty log
// at offset (Kafka's truncateFullyAndStartAt): log start = log end =
// offset; the epoch cache and producer state are cleared.
func (l *Log) TruncateFullyAndStartAt(offset int64) error {
	if err := l.lockRewrite(); err != nil {
		return err
	}
	defer l.unlockRewrite()
	if offset < 0 {
		return fmt.Errorf("%w: negative start offset %d", ErrOffsetOutOfRange, offset)
	}
	return l.truncateFullyLocked(offset)
}

// REQUIRES: l.syncMu, l.mu.
func (l *Log) truncateFullyLocked(offset int64) error {
	nowMs := l.cfg.NowMs()
	// The new start is recorded first: if a crash interrupts the deletion,
	// Open deletes the old segments below it.
	if err := writeLogStartOffset(l.fs, l.dir, l.cfg.Topic, l.cfg.Partition, offset); err != nil {
		return l.failLocked("log start checkpoint", err)
	}
	for len(l.segs) > 0 {
		s := l.segs[len(l.segs)-1]
		if err := removeSegmentFiles(l.fs, l.dir, s.base); err != nil {
			return l.failLocked("delete segment", err)
		}
		l.dropUnflushedLocked(s)
		l.closeLaterLocked(s)
		l.segs = l.segs[:len(l.segs)-1]
	}
	s, err := createSegment(l.fs, l.dir, offset, int64(l.cfg.IndexIntervalBytes), nowMs)
	if err != nil {
		return l.failLocked("create segment", err)
	}
	if err := openTxnIndex(s); err != nil {
		s.closeFiles()
		return l.failLocked("open transaction index", err)
	}
	l.segs = []*segment{s}
	l.logStart, l.leo = offset, offset
	l.syncSeg.Store(s)
	l.written.Store(offset)
	l.dmu.Lock()
	l.durable = offset
	l.fireWaiters()
	l.dmu.Unlock()
	// Nothing below offset remains; nothing at or above it is written.
	// The rolled-segments record describes deleted segments: cleared.
	l.recoveryPoint.Store(offset)
	if err := l.persistRecoveryPoint(); err != nil {
		return l.failLocked("recovery point", err)
	}
	if err := l.writeRolledSegmentsLocked(); err != nil {
		return l.failLocked("rolled-segments record", err)
	}
	if err := l.epochs.Clear(); err != nil {
		return l.failLocked("leader-epoch checkpoint", err)
	}
	if err := l.producer.ps.TruncateFullyAndStartAt(offset); err != nil {
		return l.failLocked("producer state", err)
	}
	return nil
}

// deleteSegmentLocked closes and deletes segment i. REQUIRES: l.syncMu,
// l.mu.
func (l *Log) deleteSegmentLocked(i int) error {
	s := l.segs[i]
	if err := removeSegmentFiles(l.fs, l.dir, s.base); err != nil {
		return l.failLocked("delete segment", err)
	}
	l.dropUnflushedLocked(s)
	l.closeLaterLocked(s)
	l.segs = append(l.segs[:i], l.segs[i+1:]...)
	return nil
}

// DeleteRecords advances the log start offset to offset (Kafka's
// DeleteRecords / maybeIncrementLogStartOffset): offsets below it are no
// longer readable, segments entirely below it are deleted, the epoch
// cache and producer state follow. offset above the high watermark is
// ErrOffsetOutOfRange; offset at or below the current start does nothing.
// It returns the new log start offset.
func (l *Log) DeleteRecords(offset int64) (int64, error) {
	return l.deleteRecords(offset, UndefinedEpoch)
}

// deleteRecords is DeleteRecords, and with epoch >= 0 DeleteRecordsWithEpoch
// (epochcache_source.go).
func (l *Log) deleteRecords(offset int64, epoch int32) (int64, error) {
	if err := l.lockRewrite(); err != nil {
		return 0, err
	}
	defer l.unlockRewrite()
	if offset > l.leo || offset < 0 {
		return l.logStart, fmt.Errorf("%w: %d not in [0, %d]", ErrOffsetOutOfRange, offset, l.leo)
	}
	if epoch >= 0 {
		err := l.sourceStartLocked(offset, epoch)
		return l.logStart, err
	}
	if offset <= l.logStart {
		return l.logStart, nil
	}
	// Two statements: in `return l.logStart, f()` Go leaves unspecified
	// whether l.logStart is read before or after f runs.
	err := l.advanceLogStartLocked(offset)
	return l.logStart, err
}

// advanceLogStartLocked records a new log start offset and deletes the
// segments below it. REQUIRES: l.syncMu, l.mu.
func (l *Log) advanceLogStartLocked(offset int64) error {
	if err := writeLogStartOffset(l.fs, l.dir, l.cfg.Topic, l.cfg.Partition, offset); err != nil {
		return l.failLocked("log start checkpoint", err)
	}
	l.logStart = offset
	for len(l.segs) > 1 && l.segs[1].base <= offset {
		if err := l.deleteSegmentLocked(0); err != nil {
			return err
		}
	}
	if err := l.epochs.TruncateFromStart(offset); err != nil {
		return l.failLocked("leader-epoch checkpoint", err)
	}
	l.producer.ps.OnLogStartOffsetIncremented(offset)
	if err := l.producer.ps.DeleteSnapshotsBefore(l.segs[0].base); err != nil {
		return l.failLocked("producer snapshots", err)
	}
	return nil
}

// ApplyRetention deletes the oldest segments that retention.ms or
// retention.bytes no longer allow (Kafka's deleteOldSegments), advancing
// the log start offset to the first remaining segment. A segment is
// expired when its largest timestamp (its creation time when it has none)
// is more than RetentionMs before nowMs. When every segment including the
// active one expired, the active segment is rolled first so the log keeps
// an (empty) active segment at the log end. It returns the number of
// segments deleted.
func (l *Log) ApplyRetention(nowMs int64) (int, error) {
	if err := l.lockRewrite(); err != nil {
		return 0, err
	}
	defer l.unlockRewrite()
	expired := func(s *segment) bool {
		// An empty segment before the active one (a cleaned group whose
		// records all went) expires by its creation time, as Kafka's by
		// its file's modification time; the active one never does.
		if l.cfg.RetentionMs < 0 || (s.size == 0 && s == l.active()) {
			return false
		}
		ts := s.maxTs
		if ts < 0 {
			ts = s.createdMs
		}
		return nowMs-ts > l.cfg.RetentionMs
	}
	var total int64
	for _, s := range l.segs {
		total += s.size
	}
	over := func(s *segment) bool {
		return l.cfg.RetentionBytes >= 0 && total-s.size >= l.cfg.RetentionBytes
	}
	n := 0
	for {
		s := l.segs[0]
		if !expired(s) && !over(s) {
			break
		}
		if len(l.segs) == 1 {
			if s.size == 0 {
				break
			}
			if err := l.rollLocked(l.leo, nowMs); err != nil {
				return n, err
			}
		}
		total -= s.size
		next := l.segs[1].base
		if next < l.logStart {
			next = l.logStart
		}
		if err := writeLogStartOffset(l.fs, l.dir, l.cfg.Topic, l.cfg.Partition, next); err != nil {
			return n, l.failLocked("log start checkpoint", err)
		}
		if err := l.deleteSegmentLocked(0); err != nil {
			return n, err
		}
		n++
		l.logStart = next
	}
	if n > 0 {
		if err := l.epochs.TruncateFromStart(l.logStart); err != nil {
			return n, l.failLocked("leader-epoch checkpoint", err)
		}
		l.producer.ps.OnLogStartOffsetIncremented(l.logStart)
		if err := l.producer.ps.DeleteSnapshotsBefore(l.segs[0].base); err != nil {
			return n, l.failLocked("producer snapshots", err)
		}
	}
	return n, nil
}

// closeLaterLocked closes a deleted segment's files, except that its log
// file stays open for Config.FileDeleteDelay (Kafka's
// file.delete.delay.ms) so that fetches holding a Slice of it can finish:
// the name is gone, the open file still reads. Close closes what is still
// pending. REQUIRES: l.mu.
func (l *Log) closeLaterLocked(s *segment) {
	f := s.log
	s.log = nil
	s.closeFiles()
	s.txn.Close()
	if f == nil {
		return
	}
	l.pendingClose = append(l.pendingClose, f)
	time.AfterFunc(l.cfg.FileDeleteDelay, func() {
		l.mu.Lock()
		defer l.mu.Unlock()
		for i, p := range l.pendingClose {
			if p == f {
				f.Close()
				l.pendingClose = append(l.pendingClose[:i], l.pendingClose[i+1:]...)
				return
			}
		}
	})
}

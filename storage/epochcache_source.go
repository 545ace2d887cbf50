package storage

// Leader-epoch entries learnt from a mirror's source (BRIEF I3, wave 2).
//
// The cache is built from the stored batches. Where a compacted source's
// first batches were cleaned away before they were copied, nothing stored
// tells at which epoch the log starts: the source's cache still starts its
// first epoch at its log start (it learnt it when that batch was
// appended), the destination's at its first surviving batch, so
// ListOffsets EARLIEST answers an epoch on the source and -1 here. A
// mirror's pusher forwards the source's answer (the epoch at the source's
// log start) with its log-start forward, and DeleteRecordsWithEpoch
// records it when it agrees with what is stored.

import (
	"errors"
	"fmt"

	"github.com/verbatim-kafka/verbatim/kbatch"
)

// ErrEpochInconsistent: a leader-epoch entry from a mirror's source
// contradicts the stored batches or the cache derived from them; nothing
// changed. Kafka (Verbatim's mirror DeleteRecords): POLICY_VIOLATION.
var ErrEpochInconsistent = errors.New("storage: source leader epoch inconsistent with the stored batches")

// planSourceEntry computes the cache after recording that the source's
// log has leader epoch epoch at start, where the first stored batch at or
// after start begins at firstBase with leader epoch firstEpoch. It
// returns changed false when an entry of epoch already covers start.
//
// Entries of epochs below firstEpoch describe offsets no stored batch
// holds (their batches were deleted, cleaned, or never copied): the
// source's answer replaces those that contradict it. The entry of
// firstEpoch and every later one are derived from stored batches and are
// never overridden: epoch must be at most firstEpoch, start at most
// firstBase, and an epoch below firstEpoch must start before firstEpoch's
// entry does. The entry of firstEpoch may move back to start (the
// source's epoch began before its first surviving batch), as Assign
// moves the latest epoch back. REQUIRES: c.mu held.
func (c *EpochCache) planSourceEntry(epoch int32, start, firstBase int64, firstEpoch int32) (out []EpochEntry, changed bool, err error) {
	cov, covered := UndefinedEpoch, false
	for _, e := range c.entries {
		if e.StartOffset > start {
			break
		}
		cov, covered = e.Epoch, true
	}
	if covered && cov == epoch {
		return nil, false, nil
	}
	if epoch < 0 || start < 0 {
		return nil, false, fmt.Errorf("%w: epoch %d at offset %d", ErrEpochInconsistent, epoch, start)
	}
	if start > firstBase || epoch > firstEpoch {
		return nil, false, fmt.Errorf("%w: epoch %d at offset %d, but the first stored batch is at offset %d with epoch %d", ErrEpochInconsistent, epoch, start, firstBase, firstEpoch)
	}
	for _, e := range c.entries {
		if e.Epoch >= firstEpoch && e.Epoch > epoch && e.StartOffset <= start {
			return nil, false, fmt.Errorf("%w: epoch %d at offset %d, but epoch %d (of the stored batches) starts at offset %d", ErrEpochInconsistent, epoch, start, e.Epoch, e.StartOffset)
		}
	}
	out = make([]EpochEntry, 0, len(c.entries)+1)
	for _, e := range c.entries {
		if e.StartOffset < start && e.Epoch < epoch {
			out = append(out, e)
		}
	}
	out = append(out, EpochEntry{Epoch: epoch, StartOffset: start})
	for _, e := range c.entries {
		if e.StartOffset > start && e.Epoch > epoch {
			out = append(out, e)
		}
	}
	return out, true, nil
}

// AssignFromSource records that the source of a mirror has leader epoch
// epoch at offset start, given the first stored batch at or after start
// (firstBase, firstEpoch). It is refused with ErrEpochInconsistent, and
// nothing changes, when that contradicts the stored batches (see
// planSourceEntry); it reports whether the cache changed and persists it
// before returning, like every change.
func (c *EpochCache) AssignFromSource(epoch int32, start, firstBase int64, firstEpoch int32) (changed bool, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	out, changed, err := c.planSourceEntry(epoch, start, firstBase, firstEpoch)
	if err != nil || !changed {
		return false, err
	}
	c.entries = append(c.entries[:0], out...)
	return true, c.writeLocked()
}

// checkSourceEntry is AssignFromSource without the change.
func (c *EpochCache) checkSourceEntry(epoch int32, start, firstBase int64, firstEpoch int32) error {
	c.mu.RLock()
	defer c.mu.RUnlock()
	_, _, err := c.planSourceEntry(epoch, start, firstBase, firstEpoch)
	return err
}

// DeleteRecordsWithEpoch is DeleteRecords(offset) of a mirror's log-start
// forward that also carries the source's leader epoch at offset (its
// ListOffsets EARLIEST answer): after the log start moved, the epoch is
// recorded in the leader-epoch cache (EpochCache.AssignFromSource against
// the first stored batch at or after offset), so that ListOffsets
// EARLIEST and OffsetForLeaderEpoch answer as the source where its first
// batches are gone. The entry is checked before anything changes: an
// offset below the log start, a log without a batch at or after offset,
// or an epoch that contradicts the stored batches is ErrEpochInconsistent
// and neither the log start nor the cache moves. An epoch the cache
// already has at offset changes nothing. It returns the new log start.
func (l *Log) DeleteRecordsWithEpoch(offset int64, epoch int32) (int64, error) {
	if epoch < 0 {
		return l.LogStartOffset(), fmt.Errorf("%w: epoch %d at offset %d", ErrEpochInconsistent, epoch, offset)
	}
	return l.deleteRecords(offset, epoch)
}

// sourceStartLocked is DeleteRecordsWithEpoch once offset is known to be
// in [0, log end]. REQUIRES: l.syncMu, l.mu.
func (l *Log) sourceStartLocked(offset int64, epoch int32) error {
	if offset < l.logStart {
		return fmt.Errorf("%w: epoch %d at offset %d, below the log start %d", ErrEpochInconsistent, epoch, offset, l.logStart)
	}
	base, first, ok, err := l.firstBatchLocked(offset)
	if err != nil {
		return err
	}
	if !ok {
		return fmt.Errorf("%w: epoch %d at offset %d, but no batch is stored at or after it", ErrEpochInconsistent, epoch, offset)
	}
	if err := l.epochs.checkSourceEntry(epoch, offset, base, first); err != nil {
		return err
	}
	if offset > l.logStart {
		if err := l.advanceLogStartLocked(offset); err != nil {
			return err
		}
	}
	if _, err := l.epochs.AssignFromSource(epoch, offset, base, first); err != nil {
		if errors.Is(err, ErrEpochInconsistent) {
			return err
		}
		return l.failLocked("leader-epoch checkpoint", err)
	}
	return nil
}

// firstBatchLocked finds the first stored batch whose last offset is at or
// after offset: its base offset and leader epoch; ok false when there is
// none. REQUIRES: l.mu.
func (l *Log) firstBatchLocked(offset int64) (base int64, epoch int32, ok bool, err error) {
	for _, s := range l.segs {
		if s.size == 0 {
			continue
		}
		bp, err := s.find(max(offset, s.base))
		if errors.Is(err, errNoBatch) {
			continue
		}
		if err != nil {
			return 0, 0, false, err
		}
		var hdr [kbatch.LogOverhead + 4]byte // up to PartitionLeaderEpoch
		if err := readFull(s.log, hdr[:], bp.pos); err != nil {
			return 0, 0, false, err
		}
		return bp.base, kbatch.LeaderEpoch(hdr[:]), true, nil
	}
	return 0, 0, false, nil
}

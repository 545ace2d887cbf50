package storage

import (
	"errors"
	"fmt"
	"math"
	"os"

	"github.com/verbatim-kafka/verbatim/kbatch"
)

// cleanShutdownFile marks a partition directory whose Log was closed
// cleanly (indexes, transaction indexes and a producer snapshot at the log
// end were written and synced). Kafka keeps one such marker per log
// directory (.kafka_cleanshutdown); Verbatim keeps one per partition. It
// is removed durably as soon as the Log is opened.
const cleanShutdownFile = ".verbatim_cleanshutdown"

// Open opens (creating if needed) the partition log in dir and recovers
// it:
//
//   - leftover temporary files are removed; segments entirely below the
//     checkpointed log start offset are deleted;
//   - segments wholly below the recovery point (all of them after a clean
//     shutdown) are trusted: their index files are checked and rebuilt
//     from the log if inconsistent;
//   - after an unclean shutdown every later segment is validated batch by
//     batch (length, magic, CRC, increasing offsets, the size recorded at
//     its roll); the first invalid byte (a torn or zero-filled tail) ends
//     the log there and later segments are deleted; their indexes are
//     rebuilt;
//   - the leader-epoch cache is truncated to the log end; producer state is
//     loaded from the newest usable snapshot and the log after it is
//     replayed (MIRROR_PID_RESET included), which also rebuilds the
//     transaction indexes of the replayed range.
//
// A partition that went offline comes back only through Open, which
// re-verifies the files like this.
func Open(fs FS, dir string, cfg Config) (*Log, error) {
	c := cfg.withDefaults(dir)
	if err := fs.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	l := &Log{fs: fs, dir: dir, cfg: c}
	l.durableCond.L = &l.dmu
	closeAll := func() {
		for _, s := range l.segs {
			s.closeFiles()
			if s.txn != nil {
				s.txn.Close()
			}
		}
	}
	if err := l.load(); err != nil {
		closeAll()
		return nil, fmt.Errorf("storage: open %s: %w", dir, err)
	}
	// What recovery read above the recovery point may have come from the
	// page cache: it is not durable yet. Under FlushAlways it is synced
	// now (it was nearly all synced before the crash); otherwise the
	// flusher syncs the recovered rolled segments in the background.
	l.durable = min(l.recoveryPoint.Load(), l.leo)
	l.written.Store(l.leo)
	l.syncSeg.Store(l.active())
	if c.Flush == FlushAlways && l.durable < l.leo {
		l.syncMu.Lock()
		err := l.syncActive(true)
		l.syncMu.Unlock()
		if err != nil {
			closeAll()
			return nil, fmt.Errorf("storage: open %s: %w", dir, err)
		}
	}
	l.startFlusher()
	if l.nUnflushed.Load() > 0 {
		l.signal()
	}
	// A truncation a crash interrupted is completed before anyone reads
	// or appends (log_truncate_intent.go).
	if err := l.completeTruncation(); err != nil {
		l.Close()
		return nil, fmt.Errorf("storage: open %s: completing an interrupted truncation: %w", dir, err)
	}
	return l, nil
}

// load does the work of Open: scan, plan, apply (recovery_plan.go).
// Errors leave files open in l.segs for the caller to close.
func (l *Log) load() error {
	fs, dir := l.fs, l.dir
	// A cleaner swap that committed is completed first (cleaner_swap.go);
	// one that did not leaves only stray files, removed below.
	if err := recoverCleanerFiles(fs, dir); err != nil {
		return err
	}
	sc, err := l.scan()
	if err != nil {
		return err
	}
	op := planOpen(&sc)
	for _, name := range op.remove {
		if err := fs.Remove(dir + "/" + name); err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
	}
	l.epochs = sc.epochs
	if op.discardEpochs {
		// Rebuilt from the batches below.
		if err := fs.Remove(dir + "/" + LeaderEpochCheckpointFile); err != nil {
			return err
		}
		if l.epochs, err = OpenEpochCache(fs, dir); err != nil {
			return err
		}
	}
	ps, err := OpenProducerState(fs, dir, ProducerStateConfig{})
	if err != nil {
		return err
	}
	l.producer.ps = ps
	l.persistedRP = sc.recoveryPoint
	if op.emptyAt >= 0 {
		if err := l.startEmpty(op.emptyAt); err != nil {
			return err
		}
		return l.removeCleanMarker(sc.cleanMarker)
	}
	for _, b := range op.dropBelowStart {
		if err := removeSegmentFiles(fs, dir, b); err != nil {
			return err
		}
	}

	recoverFrom, clean, err := l.loadSegments(&op, &sc)
	if err != nil {
		return err
	}

	a := l.active()
	// Appends add entries to the active segment's in-memory indexes,
	// which must therefore hold the entries already in the files.
	if err := a.ensureIndexes(); err != nil {
		return err
	}
	l.leo = a.next
	bp := planBounds(l.segs[0].base, l.leo, l.segs[recoverFrom].base, &sc, clean)
	if bp.restartAt >= 0 {
		for len(l.segs) > 0 {
			s := l.segs[len(l.segs)-1]
			s.closeFiles()
			s.txn.Close()
			if err := removeSegmentFiles(fs, dir, s.base); err != nil {
				return err
			}
			l.segs = l.segs[:len(l.segs)-1]
		}
		if err := l.startEmpty(bp.restartAt); err != nil {
			return err
		}
		return l.removeCleanMarker(sc.cleanMarker)
	}
	l.logStart = bp.logStart

	if err := l.loadState(&bp, recoverFrom, clean); err != nil {
		return err
	}
	// The marker goes whenever it was there, also when something was
	// validated or rebuilt: left behind, it would make the next crash
	// look like a clean shutdown.
	return l.removeCleanMarker(sc.cleanMarker)
}

// loadSegments opens the planned segments, loads the trusted prefix as
// trusted and validates the rest batch by batch, then opens the
// transaction indexes. recoverFrom is the first validated segment (the
// active one when none was); clean reports that nothing was validated or
// rebuilt.
func (l *Log) loadSegments(op *openPlan, sc *diskScan) (recoverFrom int, clean bool, err error) {
	nowMs := l.cfg.NowMs()
	for _, b := range op.open {
		s, err := openSegment(l.fs, l.dir, b, int64(l.cfg.IndexIntervalBytes), nowMs)
		if err != nil {
			return 0, false, err
		}
		l.segs = append(l.segs, s)
	}
	n := len(l.segs)
	recoverFrom, validate := planTrust(n, op.trustAll, sc.rolled, sc.recoveryPoint, func(k int) segProbe {
		s := l.segs[k]
		err := s.loadRolled()
		return segProbe{base: s.base, next: s.next, size: s.size, loaded: err == nil}
	})
	if validate {
		if err := l.recoverSegments(recoverFrom, sc.rolled); err != nil {
			return 0, false, err
		}
		recoverFrom = min(recoverFrom, len(l.segs)-1)
	}
	txnRebuilt, err := l.openTxnIndexes()
	if err != nil {
		return 0, false, err
	}
	return recoverFrom, !validate && !txnRebuilt, nil
}

// loadState brings the leader-epoch cache, producer state and the
// recovery point in line with the loaded segments (bounds bp): epochs
// beyond the log end or below its start go, producer state is the newest
// usable snapshot plus a replay of the log after it (which re-learns the
// epochs and rebuilds the transaction indexes of a recovered range).
func (l *Log) loadState(bp *boundsPlan, recoverFrom int, clean bool) error {
	ps := l.producer.ps
	// Leader epochs: forget epochs that start beyond the recovered end,
	// and re-learn the epochs of the recovered segment.
	if err := l.epochs.TruncateFromEnd(l.leo); err != nil {
		return err
	}
	if err := l.epochs.TruncateFromStart(l.logStart); err != nil {
		return err
	}

	// Producer state: newest usable snapshot, then replay.
	segBases := make([]int64, len(l.segs))
	for i, s := range l.segs {
		segBases[i] = s.base
	}
	if err := ps.RemoveStraySnapshots(segBases); err != nil {
		return err
	}
	if bp.snapshotsAbove >= 0 {
		if err := ps.DeleteSnapshotsAbove(bp.snapshotsAbove); err != nil {
			return err
		}
	}
	if err := ps.TruncateAndReload(l.logStart, l.leo, l.cfg.NowMs()); err != nil {
		return err
	}
	if err := l.replayLocked(ps.MapEndOffset(), !clean); err != nil {
		return err
	}
	l.recoveryPoint.Store(bp.recoveryPoint)
	if !clean {
		// The recovered segments before the active one go to the flusher.
		for _, s := range l.segs[recoverFrom : len(l.segs)-1] {
			l.pushUnflushedLocked(s)
		}
	}
	if bp.persistRP {
		if err := l.persistRecoveryPoint(); err != nil {
			return err
		}
	}
	return nil
}

// startEmpty makes the log one empty segment at offset: no leader
// epochs, no producer state, the recovery point at offset. REQUIRES:
// exclusive access (Open) and no segment.
func (l *Log) startEmpty(offset int64) error {
	s, err := createSegment(l.fs, l.dir, offset, int64(l.cfg.IndexIntervalBytes), l.cfg.NowMs())
	if err != nil {
		return err
	}
	if err := openTxnIndex(s); err != nil {
		return err
	}
	l.segs = []*segment{s}
	l.logStart, l.leo = offset, offset
	if err := l.epochs.Clear(); err != nil {
		return err
	}
	if err := l.producer.ps.TruncateFullyAndStartAt(offset); err != nil {
		return err
	}
	return l.resetRecoveryPoint(offset)
}

// openTxnIndexes opens the transaction index of every segment; a corrupt
// one is deleted and rebuilt empty (the replay fills it), which rebuilt
// reports.
func (l *Log) openTxnIndexes() (rebuilt bool, err error) {
	for _, s := range l.segs {
		if err := openTxnIndex(s); err != nil {
			if !errors.Is(err, ErrCorruptTxnIndex) {
				return rebuilt, err
			}
			if err := l.fs.Remove(s.path(TxnIndexSuffix)); err != nil {
				return rebuilt, err
			}
			if err := openTxnIndex(s); err != nil {
				return rebuilt, err
			}
			rebuilt = true
		}
	}
	return rebuilt, nil
}

// recoverSegments validates the segments from index from on, batch by
// batch (Kafka's recovery of the segments above the recovery point). The
// first segment with an invalid or torn batch is truncated there and every
// later segment is deleted first (durably, so a second crash cannot bring
// them back behind the cut); so is every segment after one that ends
// before the size and end offset recorded when it rolled. A recovered
// segment left empty whose base is below the previous segment's end goes
// too.
func (l *Log) recoverSegments(from int, rolled map[int64]rolledSegment) error {
	fs, dir := l.fs, l.dir
	dropAfter := func(i int) error {
		for len(l.segs) > i+1 {
			s := l.segs[len(l.segs)-1]
			s.closeFiles()
			if err := removeSegmentFiles(fs, dir, s.base); err != nil {
				return err
			}
			l.segs = l.segs[:len(l.segs)-1]
		}
		return fs.SyncDir(dir)
	}
	for i := from; i < len(l.segs); i++ {
		s := l.segs[i]
		prevNext := int64(math.MinInt64)
		if i > 0 {
			prevNext = l.segs[i-1].next
		}
		cut, err := s.recover(prevNext, func() error { return dropAfter(i) })
		if err != nil {
			return err
		}
		if i > 0 && s.size == 0 && s.base < prevNext {
			if err := dropAfter(i - 1); err != nil {
				return err
			}
			break
		}
		if cut {
			break
		}
		if want, ok := rolled[s.base]; ok && i < len(l.segs)-1 && (s.size < want.size || s.next < want.next) {
			// Shorter than when it rolled: its tail was lost at a
			// batch boundary, so nothing after it can follow it.
			if err := dropAfter(i); err != nil {
				return err
			}
			break
		}
	}
	return nil
}

// resetRecoveryPoint sets the recovery point of a log that starts empty
// at offset, recording it when the file holds another value.
func (l *Log) resetRecoveryPoint(offset int64) error {
	l.recoveryPoint.Store(offset)
	if l.persistedRP >= 0 && l.persistedRP != offset {
		return l.persistRecoveryPoint()
	}
	return nil
}

// removeCleanMarker deletes the clean-shutdown marker durably: from now on
// the files change and a crash must be recovered.
func (l *Log) removeCleanMarker(present bool) error {
	if !present {
		return nil
	}
	if err := l.fs.Remove(l.dir + "/" + cleanShutdownFile); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return l.fs.SyncDir(l.dir)
}

// replayLocked feeds the batches from offset `from` to the log end through
// producer state (OriginVerbatim) and, when learnEpochs, the leader-epoch
// cache, rebuilding the transaction indexes of the replayed range.
// REQUIRES: l.mu or exclusive access.
func (l *Log) replayLocked(from int64, learnEpochs bool) error {
	ps := l.producer.ps
	i := l.segmentFor(from)
	if i < 0 {
		i = 0
	}
	for _, s := range l.segs[i:] {
		if err := s.txn.TruncateTo(from); err != nil {
			return err
		}
	}
	for _, s := range l.segs[i:] {
		start := int64(0)
		if s.base < from {
			if bp, err := s.find(from); err == nil {
				start = bp.pos
			} else if err == errNoBatch {
				continue
			} else {
				return err
			}
		}
		var ferr error
		end, err := scanBatches(s.log, start, s.size, func(pos int64, b []byte) bool {
			if last := kbatch.BaseOffset(b) + int64(kbatch.LastOffsetDelta(b)); last < from {
				return true
			}
			h, _ := kbatch.ParseHeader(b)
			if learnEpochs {
				if _, err := l.epochs.Assign(h.LeaderEpoch, h.BaseOffset); err != nil {
					ferr = err
					return false
				}
			}
			if _, err := ps.Prepare(&h, controlOf(b, &h), OriginVerbatim); err != nil {
				ferr = err
				return false
			}
			if err := l.producer.commit(s, l.leo); err != nil {
				ferr = err
				return false
			}
			return true
		})
		if ferr != nil {
			return ferr
		}
		if err != nil {
			return err
		}
		if end != s.size {
			return fmt.Errorf("%w: replay of %s stopped at position %d of %d", ErrCorruptLog, s.path(logSuffix), end, s.size)
		}
	}
	return nil
}

// removeSegmentFiles deletes every file of the segment at base.
func removeSegmentFiles(fs FS, dir string, base int64) error {
	for _, suf := range []string{logSuffix, indexSuffix, timeIndexSuffix, TxnIndexSuffix} {
		if err := fs.Remove(dir + "/" + SegmentFileName(base, suf)); err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
	}
	return nil
}

package storage

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"sort"
	"strings"

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
	return l, nil
}

// load does the work of Open. Errors leave files open in l.segs for the
// caller to close.
func (l *Log) load() error {
	fs, dir := l.fs, l.dir
	names, err := fs.ReadDir(dir)
	if err != nil {
		return err
	}
	clean := false
	var bases []int64
	logs := map[int64]bool{}
	for _, name := range names {
		switch {
		case name == cleanShutdownFile:
			clean = true
		case strings.HasSuffix(name, ".tmp") || strings.HasSuffix(name, deletedSuffix) ||
			strings.HasSuffix(name, cleanedSuffix) || strings.HasSuffix(name, swapSuffix):
			if err := fs.Remove(dir + "/" + name); err != nil && !errors.Is(err, os.ErrNotExist) {
				return err
			}
		}
		if b, ok := parseSegmentFileName(name, logSuffix); ok {
			bases = append(bases, b)
			logs[b] = true
		}
	}
	// Index files without a log (the log's creation was lost) go away.
	for _, name := range names {
		for _, suf := range []string{indexSuffix, timeIndexSuffix, TxnIndexSuffix} {
			if b, ok := parseSegmentFileName(name, suf); ok && !logs[b] {
				if err := fs.Remove(dir + "/" + name); err != nil && !errors.Is(err, os.ErrNotExist) {
					return err
				}
			}
		}
	}
	sort.Slice(bases, func(i, j int) bool { return bases[i] < bases[j] })

	if l.epochs, err = OpenEpochCache(fs, dir); err != nil {
		if !errors.Is(err, ErrCorruptCheckpoint) {
			return err
		}
		// A corrupt checkpoint is rebuilt from the batches below.
		if err := fs.Remove(dir + "/" + LeaderEpochCheckpointFile); err != nil {
			return err
		}
		if l.epochs, err = OpenEpochCache(fs, dir); err != nil {
			return err
		}
		clean = false
	}
	ps, err := OpenProducerState(fs, dir, ProducerStateConfig{})
	if err != nil {
		return err
	}
	l.producer.ps = ps

	checkpointed, err := readLogStartOffset(fs, dir, l.cfg.Topic, l.cfg.Partition)
	if err != nil {
		if !errors.Is(err, ErrCorruptCheckpoint) {
			return err
		}
		checkpointed = -1
	}

	rp, err := readRecoveryPoint(fs, dir, l.cfg.Topic, l.cfg.Partition)
	if err != nil {
		if !errors.Is(err, ErrCorruptCheckpoint) {
			return err
		}
		// Unknown: nothing is trusted, every segment is validated.
		rp = -1
	}
	l.persistedRP = rp

	nowMs := l.cfg.NowMs()
	if len(bases) == 0 {
		start := checkpointed
		if start < 0 {
			start = 0
		}
		s, err := createSegment(fs, dir, start, int64(l.cfg.IndexIntervalBytes), nowMs)
		if err != nil {
			return err
		}
		if err := openTxnIndex(s); err != nil {
			return err
		}
		l.segs = []*segment{s}
		l.logStart, l.leo = start, start
		if err := l.epochs.Clear(); err != nil {
			return err
		}
		if err := ps.TruncateFullyAndStartAt(start); err != nil {
			return err
		}
		return l.resetRecoveryPoint(start)
	}

	// Segments entirely below the log start (their deletion did not reach
	// the disk) are deleted again.
	for len(bases) > 1 && checkpointed >= bases[1] {
		if err := removeSegmentFiles(fs, dir, bases[0]); err != nil {
			return err
		}
		bases = bases[1:]
	}

	// Segments below the recovery point (every batch ends before it; or
	// every segment after a clean shutdown) are trusted up to their size:
	// their indexes are checked and rebuilt if inconsistent. From the
	// first segment that is not (or that turns out inconsistent) on,
	// every segment is validated batch by batch.
	rolled, err := readRolledSegments(fs, dir)
	if err != nil {
		return err
	}
	recoverFrom := len(bases) - 1
	for i, b := range bases {
		s, err := openSegment(fs, dir, b, int64(l.cfg.IndexIntervalBytes), nowMs)
		if err != nil {
			return err
		}
		l.segs = append(l.segs, s)
		if i == len(bases)-1 || recoverFrom < len(bases)-1 {
			continue
		}
		if err := s.loadRolled(); err != nil || (i > 0 && s.base < l.segs[i-1].next) || (!clean && !trustedBelow(s, rolled, rp)) {
			recoverFrom = i
		}
	}
	if recoverFrom < len(bases)-1 {
		clean = false
	}
	if clean {
		if err := l.active().loadRolled(); err != nil {
			clean = false
		}
	}
	if !clean {
		if err := l.recoverSegments(recoverFrom, rolled); err != nil {
			return err
		}
		if recoverFrom > len(l.segs)-1 {
			recoverFrom = len(l.segs) - 1
		}
	}
	for _, s := range l.segs {
		if err := openTxnIndex(s); err != nil {
			if !errors.Is(err, ErrCorruptTxnIndex) {
				return err
			}
			// Rebuilt by the replay below.
			if err := fs.Remove(s.path(TxnIndexSuffix)); err != nil {
				return err
			}
			if err := openTxnIndex(s); err != nil {
				return err
			}
			clean = false
		}
	}

	a := l.active()
	// Appends add entries to the active segment's in-memory indexes,
	// which must therefore hold the entries already in the files.
	if err := a.ensureIndexes(); err != nil {
		return err
	}
	l.leo = a.next
	l.logStart = l.segs[0].base
	if checkpointed > l.logStart && checkpointed <= l.leo {
		l.logStart = checkpointed
	}
	if checkpointed > l.leo {
		// The checkpoint is the commit point of TruncateFullyAndStartAt
		// (and of DeleteRecords up to a log end that a crash then cut
		// back): every remaining batch is below the log start, so the log
		// restarts empty there, as Kafka's log loading does.
		for len(l.segs) > 0 {
			s := l.segs[len(l.segs)-1]
			s.closeFiles()
			s.txn.Close()
			if err := removeSegmentFiles(fs, dir, s.base); err != nil {
				return err
			}
			l.segs = l.segs[:len(l.segs)-1]
		}
		s, err := createSegment(fs, dir, checkpointed, int64(l.cfg.IndexIntervalBytes), nowMs)
		if err != nil {
			return err
		}
		if err := openTxnIndex(s); err != nil {
			return err
		}
		l.segs = []*segment{s}
		l.logStart, l.leo = checkpointed, checkpointed
		if err := l.epochs.Clear(); err != nil {
			return err
		}
		if err := ps.TruncateFullyAndStartAt(checkpointed); err != nil {
			return err
		}
		if err := l.resetRecoveryPoint(checkpointed); err != nil {
			return err
		}
		return l.removeCleanMarker(clean)
	}

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
	if !clean {
		// Only snapshots up to the first recovered segment's base are
		// known to describe durable data whose transaction indexes are
		// durable too: the replay from there rebuilds the rest.
		if err := ps.DeleteSnapshotsAbove(l.segs[recoverFrom].base); err != nil {
			return err
		}
	}
	if err := ps.TruncateAndReload(l.logStart, l.leo, nowMs); err != nil {
		return err
	}
	if err := l.replayLocked(ps.MapEndOffset(), !clean); err != nil {
		return err
	}
	if err := l.initRecoveryPoint(clean, recoverFrom); err != nil {
		return err
	}
	return l.removeCleanMarker(clean)
}

// trustedBelow reports whether a rolled segment, as loaded, lies wholly
// below the recovery point rp. Its end is the one recorded at its roll
// when there is one: a segment that lost its tail ends lower on disk than
// it did, possibly below rp although the lost batches were not.
func trustedBelow(s *segment, rolled map[int64]rolledSegment, rp int64) bool {
	end, size := s.next, s.size
	if want, ok := rolled[s.base]; ok {
		end, size = max(end, want.next), max(size, want.size)
	}
	return end <= rp && size == s.size
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

// initRecoveryPoint sets the in-memory recovery point after loading: the
// log end after a clean shutdown; otherwise the recorded one (the first
// segment's base without one), but no higher than the log end (data
// recovered above it, from the page cache, is not known durable). The recovered
// segments before the active one are handed to the flusher, and a recorded
// value above the new one is lowered on disk now. REQUIRES: exclusive
// access (Open).
func (l *Log) initRecoveryPoint(clean bool, recoverFrom int) error {
	if clean {
		l.recoveryPoint.Store(l.leo)
		return nil
	}
	rp := min(l.segs[0].base, l.leo)
	if l.persistedRP >= 0 {
		rp = min(l.persistedRP, l.leo)
	}
	l.recoveryPoint.Store(rp)
	for _, s := range l.segs[recoverFrom : len(l.segs)-1] {
		l.pushUnflushedLocked(s)
	}
	if l.persistedRP > rp {
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

// openSegment opens the files of an existing segment (its size from the
// file). Indexes are not loaded.
func openSegment(fs FS, dir string, base int64, indexInterval int64, nowMs int64) (*segment, error) {
	s := &segment{fs: fs, dir: dir, base: base, next: base, maxTs: -1, maxTsOffset: base,
		rollTs: -1, createdMs: nowMs, lastBatchPos: -1, indexInterval: indexInterval}
	s.offIdx.base, s.timeIdx.base = base, base
	var err error
	if s.log, err = fs.OpenFile(s.path(logSuffix), os.O_RDWR, 0); err != nil {
		return nil, err
	}
	s.flushLog = s.log
	st, err := s.log.Stat()
	if err != nil {
		s.closeFiles()
		return nil, err
	}
	s.size = st.Size()
	if s.size > math.MaxInt32 {
		s.closeFiles()
		return nil, fmt.Errorf("%w: %s is larger than 2 GiB", ErrCorruptLog, s.path(logSuffix))
	}
	s.createdMs = st.ModTime().UnixMilli()
	return s, nil
}

// loadRolled loads a segment whose data is trusted (below the recovery
// point, or any segment after a clean shutdown): indexes are loaded (rebuilt when inconsistent); the batch
// headers after the last index entry are read to find the end offset, and
// must end exactly at the file size.
func (s *segment) loadRolled() error {
	if err := s.loadRolledFromIndexes(); err != nil {
		// Indexes that do not match the log are rebuilt from it; only a
		// log whose batch headers do not chain is corrupt.
		return s.loadRolledAfterRebuild()
	}
	return nil
}

// loadRolledFromIndexes is the fast path of loadRolled: trust the index
// files after structural checks and read only the headers after the last
// offset index entry.
func (s *segment) loadRolledFromIndexes() error {
	// Only the last entry of each index is read here; the whole indexes
	// are loaded on the first lookup in the segment (ensureIndexes), so
	// opening a long log does not hold every index in memory.
	s.indexesLoaded = false
	ib, ni, err := readLastEntry(s.fs, s.path(indexSuffix), offsetIndexEntrySize)
	if err != nil {
		return err
	}
	tb, nt, err := readLastEntry(s.fs, s.path(timeIndexSuffix), timeIndexEntrySize)
	if err != nil {
		return err
	}
	// Find the end offset from the last index entry, which must name the
	// last offset of the batch at its position.
	pos := int64(0)
	entryOff := int64(-1)
	if ni > 0 {
		rel := int32(binary.BigEndian.Uint32(ib))
		p := int64(int32(binary.BigEndian.Uint32(ib[4:])))
		if rel < 0 || p < 0 || p >= s.size {
			return fmt.Errorf("%w: last entry of %s is outside the segment", ErrCorruptIndex, s.path(indexSuffix))
		}
		entryOff, pos = s.base+int64(rel), p
		s.lastIndexPos = pos
	}
	var hdr [kbatch.HeaderSize]byte
	first := true
	tailMaxTs := int64(-1) // max timestamp of the batches read here
	for pos < s.size {
		if err := readFull(s.log, hdr[:], pos); err != nil {
			return fmt.Errorf("%w: %s: %v", ErrCorruptLog, s.path(logSuffix), err)
		}
		size := int64(kbatch.LogOverhead) + int64(kbatch.Length(hdr[:]))
		if size < kbatch.HeaderSize || pos+size > s.size || kbatch.Magic(hdr[:]) != 2 {
			return fmt.Errorf("%w: bad batch at position %d of %s", ErrCorruptLog, pos, s.path(logSuffix))
		}
		last := kbatch.BaseOffset(hdr[:]) + int64(kbatch.LastOffsetDelta(hdr[:]))
		if last < s.next-1 || last-s.base > math.MaxInt32 {
			return fmt.Errorf("%w: offsets go back at position %d of %s", ErrCorruptLog, pos, s.path(logSuffix))
		}
		if first && entryOff >= 0 && last != entryOff {
			return fmt.Errorf("%w: last entry of %s names offset %d, the batch there ends at %d", ErrCorruptIndex, s.path(indexSuffix), entryOff, last)
		}
		first = false
		if ts := kbatch.MaxTimestamp(hdr[:]); ts > tailMaxTs {
			tailMaxTs = ts
		}
		s.next = last + 1
		s.lastBatchPos = pos
		if s.rollTs < 0 && pos == 0 {
			s.rollTs = kbatch.MaxTimestamp(hdr[:])
		}
		pos += size
	}
	if s.rollTs < 0 && s.size > 0 {
		var first [kbatch.HeaderSize]byte
		if err := readFull(s.log, first[:], 0); err == nil {
			s.rollTs = kbatch.MaxTimestamp(first[:])
		}
	}
	// The time index's last entry is the segment's max timestamp (written
	// on roll); check it against the offsets now known.
	if nt > 0 {
		ts := int64(binary.BigEndian.Uint64(tb))
		rel := int32(binary.BigEndian.Uint32(tb[8:]))
		off := s.base + int64(rel)
		if rel < 0 || off >= s.next {
			return fmt.Errorf("%w: last entry of %s is beyond the segment", ErrCorruptIndex, s.path(timeIndexSuffix))
		}
		if ts < tailMaxTs {
			// The final entry written on roll is missing.
			return fmt.Errorf("%w: last entry of %s is below the segment's max timestamp", ErrCorruptIndex, s.path(timeIndexSuffix))
		}
		s.maxTs, s.maxTsOffset = ts, off
	} else if s.size > 0 {
		// No time index entry at all (a rolled segment always has its
		// final one): derive the max timestamp.
		return fmt.Errorf("%w: %s is empty", ErrCorruptIndex, s.path(timeIndexSuffix))
	}
	return nil
}

// loadRolledAfterRebuild rebuilds the indexes of a rolled segment from its
// batch headers (which also finds its end offset).
func (s *segment) loadRolledAfterRebuild() error {
	if err := s.rebuildIndexes(); err != nil {
		return err
	}
	if s.lastBatchPos < 0 && s.size > 0 {
		return fmt.Errorf("%w: %s", ErrCorruptLog, s.path(logSuffix))
	}
	return nil
}

// readLastEntry returns the last entry of an index file and the number of
// entries; the size must be a multiple of the entry size.
func readLastEntry(fs FS, name string, entrySize int) ([]byte, int, error) {
	f, err := fs.OpenFile(name, os.O_RDONLY, 0)
	if err != nil {
		return nil, 0, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, 0, err
	}
	if st.Size()%int64(entrySize) != 0 {
		return nil, 0, fmt.Errorf("%w: %s has %d bytes, not a multiple of %d", ErrCorruptIndex, name, st.Size(), entrySize)
	}
	n := int(st.Size() / int64(entrySize))
	if n == 0 {
		return nil, 0, nil
	}
	b := make([]byte, entrySize)
	if err := readFull(f, b, st.Size()-int64(entrySize)); err != nil {
		return nil, 0, err
	}
	return b, n, nil
}

// ensureIndexesNoRebuild loads the index files, failing when they are
// missing or inconsistent.
func (s *segment) ensureIndexesNoRebuild() error {
	ib, err := readAll(s.fs, s.path(indexSuffix))
	if err != nil {
		return err
	}
	if s.offIdx, err = loadOffsetIndex(s.base, ib, s.size); err != nil {
		return err
	}
	tb, err := readAll(s.fs, s.path(timeIndexSuffix))
	if err != nil {
		return err
	}
	if s.timeIdx, err = loadTimeIndex(s.base, tb, s.next); err != nil {
		return err
	}
	s.indexesLoaded = true
	return nil
}

// recover validates every batch of the segment and truncates the file at
// the first invalid one (Kafka's LogSegment.recover), rebuilding the
// indexes. prevNext is the end offset of the previous segment. When the
// file must be cut, beforeCut runs first (it deletes the later segments).
// cut reports whether bytes were cut off.
func (s *segment) recover(prevNext int64, beforeCut func() error) (cut bool, err error) {
	s.offIdx = offsetIndex{base: s.base}
	s.timeIdx = timeIndex{base: s.base}
	s.maxTs, s.maxTsOffset, s.rollTs, s.lastIndexPos, s.lastBatchPos = -1, s.base, -1, 0, -1
	s.next = s.base
	s.indexesLoaded = true
	fileSize := s.size
	valid, err := scanBatches(s.log, 0, fileSize, func(pos int64, b []byte) bool {
		base := kbatch.BaseOffset(b)
		last := base + int64(kbatch.LastOffsetDelta(b))
		if base < s.base || base < s.next || base < prevNext || last-s.base > math.MaxInt32 {
			return false
		}
		s.noteBatch(pos, int64(len(b)), last, kbatch.MaxTimestamp(b))
		return true
	})
	if err != nil {
		return false, err
	}
	s.size = valid
	if valid < fileSize {
		if err := beforeCut(); err != nil {
			return false, err
		}
		if err := s.log.Truncate(valid); err != nil {
			return false, err
		}
		if err := s.log.Sync(); err != nil {
			return false, err
		}
	}
	s.onRoll()
	return valid < fileSize, s.rewriteIndexes()
}

// scanBatches reads the batches of f from pos to limit, calling fn with
// each whole valid batch (v2, sane length, CRC correct). It stops at the
// first invalid batch, or when fn returns false, and returns the position
// where it stopped: the end of the last accepted batch. Only read errors
// are returned as errors.
func scanBatches(f File, pos, limit int64, fn func(pos int64, b []byte) bool) (int64, error) {
	const chunk = 1 << 20
	buf := make([]byte, 0, chunk)
	bufPos := pos // file position of buf[0]
	fill := func(need int) error {
		// Make buf hold at least need bytes from pos (less at EOF).
		if int64(len(buf))-(pos-bufPos) >= int64(need) {
			return nil
		}
		rest := buf[pos-bufPos:]
		want := need
		if want < chunk {
			want = chunk
		}
		if int64(want) > limit-pos {
			want = int(limit - pos)
		}
		nb := make([]byte, want)
		copy(nb, rest)
		if want > len(rest) {
			n, err := f.ReadAt(nb[len(rest):], pos+int64(len(rest)))
			nb = nb[:len(rest)+n]
			if err != nil && err != io.EOF {
				return err
			}
		}
		buf, bufPos = nb, pos
		return nil
	}
	for pos < limit {
		if err := fill(kbatch.HeaderSize); err != nil {
			return pos, err
		}
		avail := buf[pos-bufPos:]
		if len(avail) < kbatch.HeaderSize {
			return pos, nil
		}
		n := int64(kbatch.Length(avail))
		size := int64(kbatch.LogOverhead) + n
		if n < kbatch.HeaderSize-kbatch.LogOverhead || pos+size > limit || kbatch.Magic(avail) != 2 ||
			kbatch.LastOffsetDelta(avail) < 0 {
			return pos, nil
		}
		if err := fill(int(size)); err != nil {
			return pos, err
		}
		avail = buf[pos-bufPos:]
		if int64(len(avail)) < size {
			return pos, nil
		}
		b := avail[:size:size]
		if kbatch.CRC(b) != kbatch.StoredCRC(b) {
			return pos, nil
		}
		if !fn(pos, b) {
			return pos, nil
		}
		pos += size
	}
	return pos, nil
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

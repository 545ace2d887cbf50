package storage

import (
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"os"

	"github.com/verbatim-kafka/verbatim/kbatch"
)

// Loading one segment at Open: trusted (indexes checked, rebuilt when
// inconsistent) or validated batch by batch and cut at the first invalid
// batch.

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

package storage

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strconv"
	"strings"
	"sync/atomic"

	"github.com/verbatim-kafka/verbatim/kbatch"
)

// File name suffixes, as Kafka names them.
const (
	logSuffix       = ".log"
	indexSuffix     = ".index"
	timeIndexSuffix = ".timeindex"
	deletedSuffix   = ".deleted"
	cleanedSuffix   = ".cleaned"
	swapSuffix      = ".swap"
)

// SegmentFileName returns Kafka's name for a segment file: the base offset
// in 20 zero-padded digits followed by suffix (".log", ".index", ...).
func SegmentFileName(base int64, suffix string) string {
	return fmt.Sprintf("%020d%s", base, suffix)
}

// parseSegmentFileName returns the base offset of a name like
// 00000000000000000042.log, and whether name has that form.
func parseSegmentFileName(name, suffix string) (int64, bool) {
	if !strings.HasSuffix(name, suffix) {
		return 0, false
	}
	digits := strings.TrimSuffix(name, suffix)
	if len(digits) != 20 {
		return 0, false
	}
	v, err := strconv.ParseInt(digits, 10, 64)
	if err != nil || v < 0 {
		return 0, false
	}
	return v, true
}

// segment is one .log file with its offset and time indexes. The .log
// holds record batches back to back exactly as appended.
//
// All fields are guarded by the owning Log's mutex, except that readers may
// use log.ReadAt on bytes below size outside it.
type segment struct {
	fs   FS
	dir  string
	base int64
	log  File
	// flushLog is log as opened, never reassigned: the flusher syncs it
	// without l.mu (log is set to nil when the segment is closed).
	flushLog File

	size int64 // bytes of whole batches in the file
	next int64 // offset after the last batch, base when empty

	// The .index and .timeindex files hold copies of offIdx and
	// timeIdx for recovery; they are opened only to be written, synced or
	// rewritten and closed again (withIndexFile), so an idle partition
	// holds one descriptor (its .log), as Kafka's mapped indexes do.
	txn           *TxnIndex // aborted transactions whose marker is here
	offIdx        offsetIndex
	timeIdx       timeIndex
	indexesLoaded bool

	// retired is set when an empty active segment is deleted and replaced
	// (read by the flusher without l.mu).
	retired         atomic.Bool
	lastIndexPos    int64 // position of the last offset index entry (recovery rule)
	bytesSinceIndex int64

	maxTs         int64 // largest batch MaxTimestamp so far, -1 when none
	maxTsOffset   int64 // last offset of the batch holding maxTs
	rollTs        int64 // MaxTimestamp of the first batch, -1 when empty
	createdMs     int64 // when the segment was created or opened
	lastBatchPos  int64 // position of the last batch, -1 when empty
	indexInterval int64
}

func (s *segment) path(suffix string) string {
	return s.dir + "/" + SegmentFileName(s.base, suffix)
}

// createSegment creates the files of a new segment and makes their
// directory entries durable.
func createSegment(fs FS, dir string, base int64, indexInterval int64, nowMs int64) (*segment, error) {
	s := &segment{fs: fs, dir: dir, base: base, next: base, maxTs: -1, maxTsOffset: base,
		rollTs: -1, createdMs: nowMs, lastBatchPos: -1, indexInterval: indexInterval,
		indexesLoaded: true}
	s.offIdx.base, s.timeIdx.base = base, base
	var err error
	// A leftover file of the same name (a segment truncated away whose
	// removal did not reach the disk) is replaced.
	if s.log, err = fs.OpenFile(s.path(logSuffix), os.O_CREATE|os.O_RDWR|os.O_TRUNC, 0o644); err != nil {
		return nil, err
	}
	s.flushLog = s.log
	for _, suffix := range [...]string{indexSuffix, timeIndexSuffix} {
		var f File
		if f, err = fs.OpenFile(s.path(suffix), os.O_CREATE|os.O_RDWR|os.O_TRUNC, 0o644); err == nil {
			err = f.Close()
		}
		if err != nil {
			s.closeFiles()
			return nil, err
		}
	}
	if err = fs.SyncDir(dir); err != nil {
		s.closeFiles()
		return nil, err
	}
	return s, nil
}

func (s *segment) closeFiles() error {
	var first error
	if s.log != nil {
		first = s.log.Close()
		s.log = nil
	}
	return first
}

// withIndexFile opens the segment's index file with suffix, runs fn on it
// and closes it; fn's error wins over the close's.
func (s *segment) withIndexFile(suffix string, fn func(f File) error) error {
	f, err := s.fs.OpenFile(s.path(suffix), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return err
	}
	err = fn(f)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// noteBatch updates the indexes and timestamps for a batch of size bytes
// written at pos, following Kafka's LogSegment.recover rule: an offset index
// entry before the batch when more than indexInterval bytes were written
// since the last entry.
func (s *segment) noteBatch(pos, size int64, lastOffset, maxTs int64) {
	if maxTs > s.maxTs {
		s.maxTs, s.maxTsOffset = maxTs, lastOffset
	}
	if s.rollTs < 0 && pos == 0 {
		s.rollTs = maxTs
	}
	if pos-s.lastIndexPos > s.indexInterval {
		s.offIdx.add(lastOffset, pos)
		s.timeIdx.maybeAdd(s.maxTs, s.maxTsOffset)
		s.lastIndexPos = pos
	}
	s.lastBatchPos = pos
	s.size = pos + size
	s.next = lastOffset + 1
}

// onRoll adds the final time index entry Kafka writes when a segment stops
// being active.
func (s *segment) onRoll() {
	if s.size > 0 {
		s.timeIdx.maybeAdd(s.maxTs, s.maxTsOffset)
	}
}

// writeIndexes writes index entries not yet in the files.
func (s *segment) writeIndexes() error { return s.flushIndexes(false, false) }

// syncIndexes writes and syncs both index files.
func (s *segment) syncIndexes() error { return s.flushIndexes(false, true) }

// rewriteIndexes replaces both index files with the in-memory entries
// (after a truncation or a rebuild).
func (s *segment) rewriteIndexes() error { return s.flushIndexes(true, false) }

// flushIndexes writes the in-memory entries not yet in the index files
// (all of them, over emptied files, with rewrite), syncing the files with
// sync. A file with nothing to do is not opened, unless it must be
// synced (entries written earlier may not be durable yet).
func (s *segment) flushIndexes(rewrite, sync bool) error {
	if !s.indexesLoaded && !rewrite {
		return nil
	}
	for _, ix := range [...]struct {
		suffix  string
		buf     []byte
		written *int
	}{{indexSuffix, s.offIdx.buf, &s.offIdx.written}, {timeIndexSuffix, s.timeIdx.buf, &s.timeIdx.written}} {
		if rewrite {
			*ix.written = 0
		}
		if !rewrite && !sync && *ix.written == len(ix.buf) {
			continue
		}
		err := s.withIndexFile(ix.suffix, func(f File) error {
			if rewrite {
				if err := f.Truncate(0); err != nil {
					return err
				}
			}
			if *ix.written < len(ix.buf) {
				if _, err := f.WriteAt(ix.buf[*ix.written:], int64(*ix.written)); err != nil {
					return err
				}
			}
			if sync {
				return f.Sync()
			}
			return nil
		})
		if err != nil {
			return err
		}
		*ix.written = len(ix.buf)
	}
	return nil
}

// syncIndexFiles syncs both index files of a rolled segment (entries the
// roll wrote). It reads no field a writer changes, so the flusher calls it
// without the log's lock. A file that is gone (the segment was replaced
// or deleted meanwhile) has nothing left to make durable; it is never
// created again here.
func (s *segment) syncIndexFiles() error {
	for _, suffix := range [...]string{indexSuffix, timeIndexSuffix} {
		f, err := s.fs.OpenFile(s.path(suffix), os.O_RDWR, 0)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return err
		}
		err = f.Sync()
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// readFull reads len(p) bytes at off.
func readFull(f File, p []byte, off int64) error {
	n, err := f.ReadAt(p, off)
	if n == len(p) {
		return nil
	}
	if err == nil || err == io.EOF {
		err = io.ErrUnexpectedEOF
	}
	return err
}

// readAll reads a whole small file.
func readAll(fs FS, name string) ([]byte, error) {
	f, err := fs.OpenFile(name, os.O_RDONLY, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	b := make([]byte, st.Size())
	if len(b) == 0 {
		return b, nil
	}
	if err := readFull(f, b, 0); err != nil {
		return nil, err
	}
	return b, nil
}

// ensureIndexes loads the indexes of a segment opened without them,
// rebuilding them from the log when they are missing or inconsistent.
// Entries are not all verified against the log here (that would read one
// header per entry); every lookup checks the entry it uses instead (see
// find and checkTimeEntry), and a wrong entry makes the segment rebuild
// its indexes.
func (s *segment) ensureIndexes() error {
	if s.indexesLoaded {
		return nil
	}
	if err := s.ensureIndexesNoRebuild(); err != nil {
		return s.rebuildIndexes()
	}
	return nil
}

// batchEndAt reads the header at pos and returns the batch's last offset,
// max timestamp and size; the batch must lie inside the segment.
func (s *segment) batchEndAt(pos int64) (last, maxTs, size int64, err error) {
	var hdr [kbatch.HeaderSize]byte
	if err := readFull(s.log, hdr[:], pos); err != nil {
		return 0, 0, 0, err
	}
	size = int64(kbatch.LogOverhead) + int64(kbatch.Length(hdr[:]))
	if size < kbatch.HeaderSize || pos+size > s.size {
		return 0, 0, 0, fmt.Errorf("%w: no batch at position %d of %s", ErrCorruptIndex, pos, s.path(logSuffix))
	}
	return kbatch.BaseOffset(hdr[:]) + int64(kbatch.LastOffsetDelta(hdr[:])), kbatch.MaxTimestamp(hdr[:]), size, nil
}

// lookupChecked is offIdx.lookup with the entry it returns checked against
// the log: the batch at the entry's position must end at the entry's
// offset. A wrong entry rebuilds the indexes.
func (s *segment) lookupChecked(target int64) (int64, error) {
	if err := s.ensureIndexes(); err != nil {
		return 0, err
	}
	for attempt := 0; ; attempt++ {
		off, pos, ok := s.offIdx.lookupEntry(target)
		if !ok {
			return 0, nil
		}
		last, _, _, err := s.batchEndAt(pos)
		if err == nil && last == off {
			return pos, nil
		}
		if attempt > 0 {
			return 0, fmt.Errorf("%w: rebuilt index of %s still inconsistent", ErrCorruptLog, s.path(logSuffix))
		}
		if err := s.rebuildIndexes(); err != nil {
			return 0, err
		}
	}
}

// checkTimeEntry checks a time index entry against the log: the batch
// ending at offset must have max timestamp ts. A wrong entry rebuilds the
// indexes and reports false.
func (s *segment) checkTimeEntry(ts, offset int64) (bool, error) {
	pos, err := s.lookupChecked(offset)
	if err != nil {
		return false, err
	}
	for pos < s.size {
		last, maxTs, size, err := s.batchEndAt(pos)
		if err != nil || last > offset {
			break
		}
		if last == offset {
			if maxTs == ts {
				return true, nil
			}
			break
		}
		pos += size
	}
	return false, s.rebuildIndexes()
}

// rebuildIndexes re-derives both indexes and the timestamps from the
// batch headers of the log, then rewrites the index files.
func (s *segment) rebuildIndexes() error {
	s.offIdx = offsetIndex{base: s.base}
	s.timeIdx = timeIndex{base: s.base}
	s.maxTs, s.maxTsOffset, s.rollTs, s.lastIndexPos = -1, s.base, -1, 0
	s.indexesLoaded = true
	var hdr [kbatch.HeaderSize]byte
	limit := s.size // noteBatch moves s.size along
	s.next, s.lastBatchPos = s.base, -1
	for pos := int64(0); pos < limit; {
		if err := readFull(s.log, hdr[:], pos); err != nil {
			return err
		}
		size := int64(kbatch.LogOverhead) + int64(kbatch.Length(hdr[:]))
		if size < kbatch.HeaderSize || pos+size > limit {
			return fmt.Errorf("%w: bad batch length at position %d of %s", ErrCorruptLog, pos, s.path(logSuffix))
		}
		last := kbatch.BaseOffset(hdr[:]) + int64(kbatch.LastOffsetDelta(hdr[:]))
		s.noteBatch(pos, size, last, kbatch.MaxTimestamp(hdr[:]))
		pos += size
	}
	s.size = limit
	s.onRoll()
	return s.rewriteIndexes()
}

// batchAt describes the batch at a position.
type batchPos struct {
	pos, size  int64
	base, last int64
}

var errNoBatch = errors.New("storage: no batch at or after offset")

// find returns the first batch of the segment whose last offset >= offset,
// scanning headers from the offset index's lower bound.
func (s *segment) find(offset int64) (batchPos, error) {
	pos, err := s.lookupChecked(offset)
	if err != nil {
		return batchPos{}, err
	}
	return s.scanFrom(pos, s.size, offset)
}

// scanFrom reads headers from pos until limit for the first batch whose
// last offset is >= offset.
func (s *segment) scanFrom(pos, limit, offset int64) (batchPos, error) {
	var hdr [kbatch.LogOverhead + 15]byte // up to LastOffsetDelta
	for pos < limit {
		if err := readFull(s.log, hdr[:], pos); err != nil {
			return batchPos{}, err
		}
		size := int64(kbatch.LogOverhead) + int64(kbatch.Length(hdr[:]))
		base := kbatch.BaseOffset(hdr[:])
		last := base + int64(kbatch.LastOffsetDelta(hdr[:]))
		if size < kbatch.HeaderSize || pos+size > limit {
			return batchPos{}, fmt.Errorf("%w: bad batch length at position %d of %s", ErrCorruptLog, pos, s.path(logSuffix))
		}
		if last >= offset {
			return batchPos{pos: pos, size: size, base: base, last: last}, nil
		}
		pos += size
	}
	return batchPos{}, errNoBatch
}

package storage

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"os"
	"path"
	"sort"
	"strconv"
	"strings"
)

// SnapshotSuffix is the file suffix of producer-state snapshots, named by
// the 20-digit offset they were taken at (the map end offset).
const SnapshotSuffix = ".snapshot"

// ErrCorruptSnapshot is wrapped by every error reporting a malformed
// producer snapshot (Kafka's CorruptSnapshotException).
var ErrCorruptSnapshot = errors.New("storage: corrupt producer snapshot")

// Producer snapshot layout (Kafka's ProducerSnapshot message, version 1,
// not flexible), big endian:
//
//	version  int16   1
//	crc      uint32  CRC-32C of everything after this field
//	count    int32   number of entries
//	entries:
//	  producerId            int64
//	  epoch                 int16
//	  lastSequence          int32
//	  lastOffset            int64  (-1: no batch retained)
//	  offsetDelta           int32
//	  timestamp             int64
//	  coordinatorEpoch      int32
//	  currentTxnFirstOffset int64  (-1: no ongoing transaction)
//
// Frozen: Kafka brokers read these files.
const (
	snapshotVersion      = 1
	snapshotCRCOffset    = 2
	snapshotEntriesStart = 6
	snapshotHeaderSize   = 10
	SnapshotEntrySize    = 46
)

var castagnoliTable = crc32.MakeTable(crc32.Castagnoli)

// SnapshotEntry is one producer in a snapshot file.
type SnapshotEntry struct {
	ProducerID            int64
	Epoch                 int16
	LastSequence          int32
	LastOffset            int64
	OffsetDelta           int32
	Timestamp             int64
	CoordinatorEpoch      int32
	CurrentTxnFirstOffset int64
}

// SnapshotFileName returns the snapshot file name for offset: 20 digits
// and ".snapshot".
func SnapshotFileName(offset int64) string {
	return fmt.Sprintf("%020d%s", offset, SnapshotSuffix)
}

// AppendSnapshot appends the snapshot file bytes for entries (in the given
// order) to dst.
func AppendSnapshot(dst []byte, entries []SnapshotEntry) []byte {
	start := len(dst)
	be := binary.BigEndian
	dst = be.AppendUint16(dst, snapshotVersion)
	dst = be.AppendUint32(dst, 0)
	dst = be.AppendUint32(dst, uint32(len(entries)))
	for _, e := range entries {
		dst = appendSnapshotEntry(dst, e)
	}
	crc := crc32.Checksum(dst[start+snapshotEntriesStart:], castagnoliTable)
	be.PutUint32(dst[start+snapshotCRCOffset:], crc)
	return dst
}

func appendSnapshotEntry(dst []byte, e SnapshotEntry) []byte {
	be := binary.BigEndian
	dst = be.AppendUint64(dst, uint64(e.ProducerID))
	dst = be.AppendUint16(dst, uint16(e.Epoch))
	dst = be.AppendUint32(dst, uint32(e.LastSequence))
	dst = be.AppendUint64(dst, uint64(e.LastOffset))
	dst = be.AppendUint32(dst, uint32(e.OffsetDelta))
	dst = be.AppendUint64(dst, uint64(e.Timestamp))
	dst = be.AppendUint32(dst, uint32(e.CoordinatorEpoch))
	return be.AppendUint64(dst, uint64(e.CurrentTxnFirstOffset))
}

// ParseSnapshot decodes a snapshot file, checking version, CRC and that the
// entries fill the file exactly.
func ParseSnapshot(b []byte) ([]SnapshotEntry, error) {
	if len(b) < snapshotHeaderSize {
		return nil, fmt.Errorf("%w: %d bytes is shorter than the %d-byte header", ErrCorruptSnapshot, len(b), snapshotHeaderSize)
	}
	be := binary.BigEndian
	if v := int16(be.Uint16(b)); v != snapshotVersion {
		return nil, fmt.Errorf("%w: unknown file version %d", ErrCorruptSnapshot, v)
	}
	stored := be.Uint32(b[snapshotCRCOffset:])
	if computed := crc32.Checksum(b[snapshotEntriesStart:], castagnoliTable); stored != computed {
		return nil, fmt.Errorf("%w: CRC is no longer valid (stored %d, computed %d)", ErrCorruptSnapshot, stored, computed)
	}
	n := int32(be.Uint32(b[snapshotEntriesStart:]))
	body := b[snapshotHeaderSize:]
	if n < 0 || int64(n)*SnapshotEntrySize != int64(len(body)) {
		return nil, fmt.Errorf("%w: %d entries announced, %d bytes of entries present", ErrCorruptSnapshot, n, len(body))
	}
	out := make([]SnapshotEntry, n)
	for i := range out {
		e := body[i*SnapshotEntrySize:]
		out[i] = SnapshotEntry{
			ProducerID:            int64(be.Uint64(e)),
			Epoch:                 int16(be.Uint16(e[8:])),
			LastSequence:          int32(be.Uint32(e[10:])),
			LastOffset:            int64(be.Uint64(e[14:])),
			OffsetDelta:           int32(be.Uint32(e[22:])),
			Timestamp:             int64(be.Uint64(e[26:])),
			CoordinatorEpoch:      int32(be.Uint32(e[34:])),
			CurrentTxnFirstOffset: int64(be.Uint64(e[38:])),
		}
	}
	return out, nil
}

// snapshotEntry converts a producer's state to its snapshot entry.
func (e *producerEntry) snapshotEntry(pid int64) SnapshotEntry {
	return SnapshotEntry{
		ProducerID:            pid,
		Epoch:                 e.epoch,
		LastSequence:          e.lastSeq(),
		LastOffset:            e.lastDataOffset(),
		OffsetDelta:           e.lastOffsetDelta(),
		Timestamp:             e.lastTimestamp,
		CoordinatorEpoch:      e.coordinatorEpoch,
		CurrentTxnFirstOffset: e.txnFirstOffset,
	}
}

// entryFromSnapshot is Kafka's reading of a snapshot entry: the last batch
// is known only when lastOffset >= 0.
func entryFromSnapshot(se SnapshotEntry) producerEntry {
	e := producerEntry{
		epoch:            se.Epoch,
		coordinatorEpoch: se.CoordinatorEpoch,
		lastTimestamp:    se.Timestamp,
		txnFirstOffset:   -1,
	}
	if se.CurrentTxnFirstOffset >= 0 {
		e.txnFirstOffset = se.CurrentTxnFirstOffset
	}
	if se.LastOffset >= 0 {
		e.batches[0] = BatchMetadata{LastSeq: se.LastSequence, LastOffset: se.LastOffset, OffsetDelta: se.OffsetDelta, Timestamp: se.Timestamp}
		e.nBatches = 1
	}
	return e
}

// SnapshotEntries returns the snapshot entries of the committed state,
// ordered by producer id (the order TakeSnapshot writes them in).
func (s *ProducerState) SnapshotEntries() []SnapshotEntry {
	out := make([]SnapshotEntry, 0, len(s.producers))
	for pid, e := range s.producers {
		out = append(out, e.snapshotEntry(pid))
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ProducerID < out[j].ProducerID })
	return out
}

// TakeSnapshot writes the committed state to <mapEndOffset>.snapshot when
// the map end offset is past the last snapshot (Kafka's takeSnapshot; the
// partition calls it on roll, after UpdateMapEndOffset, and on clean
// shutdown). The file is written atomically and synced.
func (s *ProducerState) TakeSnapshot() error {
	if s.lastMapOff <= s.lastSnapOff {
		return nil
	}
	if s.fsys == nil {
		return errors.New("storage: producer state opened without a filesystem cannot take snapshots")
	}
	s.snapBuf = AppendSnapshot(s.snapBuf[:0], s.SnapshotEntries())
	off := s.lastMapOff
	if err := AtomicWriteFile(s.fsys, path.Join(s.dir, SnapshotFileName(off)), s.snapBuf); err != nil {
		return err
	}
	s.addSnapshot(off)
	s.lastSnapOff = off
	return nil
}

func (s *ProducerState) addSnapshot(off int64) {
	i := sort.Search(len(s.snapshots), func(i int) bool { return s.snapshots[i] >= off })
	if i < len(s.snapshots) && s.snapshots[i] == off {
		return
	}
	s.snapshots = append(s.snapshots, 0)
	copy(s.snapshots[i+1:], s.snapshots[i:])
	s.snapshots[i] = off
}

// SnapshotOffsets returns the offsets of the known snapshot files, ascending.
func (s *ProducerState) SnapshotOffsets() []int64 { return append([]int64(nil), s.snapshots...) }

// LatestSnapshotOffset returns the offset of the newest snapshot file.
func (s *ProducerState) LatestSnapshotOffset() (int64, bool) {
	if len(s.snapshots) == 0 {
		return 0, false
	}
	return s.snapshots[len(s.snapshots)-1], true
}

// OldestSnapshotOffset returns the offset of the oldest snapshot file.
func (s *ProducerState) OldestSnapshotOffset() (int64, bool) {
	if len(s.snapshots) == 0 {
		return 0, false
	}
	return s.snapshots[0], true
}

// listSnapshots scans dir for "<digits>.snapshot" files and removes
// leftover temporary files of interrupted snapshot writes.
func (s *ProducerState) listSnapshots() ([]int64, error) {
	names, err := s.fsys.ReadDir(s.dir)
	if err != nil {
		return nil, fmt.Errorf("storage: list %s: %w", s.dir, err)
	}
	var offs []int64
	for _, name := range names {
		if strings.HasSuffix(name, SnapshotSuffix+".tmp") {
			if err := s.fsys.Remove(path.Join(s.dir, name)); err != nil {
				return nil, fmt.Errorf("storage: remove %s: %w", name, err)
			}
			continue
		}
		off, ok := snapshotOffsetFromName(name)
		if ok {
			offs = append(offs, off)
		}
	}
	sort.Slice(offs, func(i, j int) bool { return offs[i] < offs[j] })
	return offs, nil
}

func snapshotOffsetFromName(name string) (int64, bool) {
	base, ok := strings.CutSuffix(name, SnapshotSuffix)
	if !ok || base == "" {
		return 0, false
	}
	for i := 0; i < len(base); i++ {
		if base[i] < '0' || base[i] > '9' {
			return 0, false
		}
	}
	off, err := strconv.ParseInt(base, 10, 64)
	if err != nil {
		return 0, false
	}
	return off, true
}

// removeSnapshot forgets and deletes the snapshot at off (absent is fine).
func (s *ProducerState) removeSnapshot(off int64) error {
	i := sort.Search(len(s.snapshots), func(i int) bool { return s.snapshots[i] >= off })
	if i < len(s.snapshots) && s.snapshots[i] == off {
		s.snapshots = append(s.snapshots[:i], s.snapshots[i+1:]...)
	}
	name := path.Join(s.dir, SnapshotFileName(off))
	if err := s.fsys.Remove(name); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("storage: remove %s: %w", name, err)
	}
	return nil
}

// DeleteSnapshotsBefore deletes the snapshot files with offsets < offset.
func (s *ProducerState) DeleteSnapshotsBefore(offset int64) error {
	for len(s.snapshots) > 0 && s.snapshots[0] < offset {
		if err := s.removeSnapshot(s.snapshots[0]); err != nil {
			return err
		}
	}
	return nil
}

// DeleteSnapshotsAbove deletes the snapshot files with offsets > offset.
func (s *ProducerState) DeleteSnapshotsAbove(offset int64) error {
	for n := len(s.snapshots); n > 0 && s.snapshots[n-1] > offset; n = len(s.snapshots) {
		if err := s.removeSnapshot(s.snapshots[n-1]); err != nil {
			return err
		}
	}
	return nil
}

// RemoveStraySnapshots deletes snapshot files that match no segment base
// offset, except the newest stray one if it is above every segment base
// offset (the snapshot of a clean shutdown), as Kafka does on log load.
func (s *ProducerState) RemoveStraySnapshots(segmentBaseOffsets []int64) error {
	bases := make(map[int64]bool, len(segmentBaseOffsets))
	var maxBase int64 = -1
	for _, b := range segmentBaseOffsets {
		bases[b] = true
		if b > maxBase {
			maxBase = b
		}
	}
	var stray []int64
	for _, off := range s.snapshots {
		if !bases[off] {
			stray = append(stray, off)
		}
	}
	for i, off := range stray {
		last := i == len(stray)-1
		if last && (maxBase < 0 || off >= maxBase) {
			break
		}
		if err := s.removeSnapshot(off); err != nil {
			return err
		}
	}
	return nil
}

// TruncateAndReload brings producer state in line with a log holding
// [logStartOffset, logEndOffset), as Kafka's truncateAndReload: snapshots
// above logEndOffset or at/below logStartOffset are deleted; unless the
// map end offset already equals logEndOffset, all state is dropped and
// the newest remaining valid snapshot is loaded (corrupt ones are deleted
// and the next older one tried; producers expired at nowMs are skipped),
// leaving MapEndOffset at the snapshot offset (or logStartOffset when there
// is none). The caller then replays the batches from MapEndOffset to the
// log end through Prepare/Commit with OriginVerbatim.
func (s *ProducerState) TruncateAndReload(logStartOffset, logEndOffset, nowMs int64) error {
	s.Discard()
	for _, off := range append([]int64(nil), s.snapshots...) {
		if off > logEndOffset || off <= logStartOffset {
			if err := s.removeSnapshot(off); err != nil {
				return err
			}
		}
	}
	if logEndOffset == s.lastMapOff {
		s.OnLogStartOffsetIncremented(logStartOffset)
		return nil
	}
	clear(s.producers)
	s.ongoing = s.ongoing[:0]
	s.unreplicated = s.unreplicated[:0]
	return s.loadFromSnapshot(logStartOffset, nowMs)
}

func (s *ProducerState) loadFromSnapshot(logStartOffset, nowMs int64) error {
	for len(s.snapshots) > 0 {
		off := s.snapshots[len(s.snapshots)-1]
		name := path.Join(s.dir, SnapshotFileName(off))
		data, ok, err := readWholeFile(s.fsys, name)
		if err != nil {
			return err
		}
		var entries []SnapshotEntry
		if ok {
			entries, err = ParseSnapshot(data)
		} else {
			err = fmt.Errorf("%w: %s vanished", ErrCorruptSnapshot, name)
		}
		if err != nil {
			if rerr := s.removeSnapshot(off); rerr != nil {
				return rerr
			}
			continue
		}
		s.loadEntries(entries, nowMs)
		s.lastSnapOff = off
		s.lastMapOff = off
		return nil
	}
	s.lastSnapOff = logStartOffset
	s.lastMapOff = logStartOffset
	return nil
}

// loadEntries installs snapshot entries (later duplicates of a producer id
// win), skipping expired producers, and rebuilds the ongoing transactions.
func (s *ProducerState) loadEntries(entries []SnapshotEntry, nowMs int64) {
	for _, se := range entries {
		e := entryFromSnapshot(se)
		if s.isExpired(nowMs, &e) {
			continue
		}
		p := s.producers[se.ProducerID]
		if p == nil {
			p = new(producerEntry)
			s.producers[se.ProducerID] = p
		}
		*p = e
	}
	s.ongoing = s.ongoing[:0]
	for pid, e := range s.producers {
		if e.txnFirstOffset >= 0 {
			s.ongoing = insertTxn(s.ongoing, txnMeta{producerID: pid, firstOffset: e.txnFirstOffset, lastOffset: -1})
		}
	}
}

// TruncateFullyAndStartAt drops all state and every snapshot; the map end
// offset becomes offset (full truncation of the log).
func (s *ProducerState) TruncateFullyAndStartAt(offset int64) error {
	s.Discard()
	clear(s.producers)
	s.ongoing = s.ongoing[:0]
	s.unreplicated = s.unreplicated[:0]
	for len(s.snapshots) > 0 {
		if err := s.removeSnapshot(s.snapshots[0]); err != nil {
			return err
		}
	}
	s.lastSnapOff = 0
	s.lastMapOff = offset
	return nil
}

package storage

import (
	"errors"
	"fmt"
	"math"

	"github.com/verbatim-kafka/verbatim/kbatch"
)

// Slice is a range of stored bytes: Size bytes of File starting at Pos,
// beginning at a batch boundary. It is what a fetch sends (with sendfile
// when File implements FDFile). A Slice with Size 0 means nothing to read.
//
// As in Kafka, the last batch of a Slice may be cut by maxBytes (clients
// ignore a partial trailing batch); Bytes drops it. The File stays
// readable until Config.FileDeleteDelay after its segment is deleted by
// retention or truncation (or until the Log is closed); a read after that
// fails, and the fetch should be retried.
type Slice struct {
	File File
	Pos  int64
	Size int
	// BaseOffset is the base offset of the first batch (0 when Size is 0).
	BaseOffset int64
}

// Bytes appends the slice's whole batches to dst (a partial trailing
// batch is dropped).
func (s Slice) Bytes(dst []byte) ([]byte, error) {
	if s.Size == 0 {
		return dst, nil
	}
	start := len(dst)
	dst = append(dst, make([]byte, s.Size)...)
	if err := readFull(s.File, dst[start:], s.Pos); err != nil {
		return dst[:start], fmt.Errorf("storage: reading %d bytes at %d of %s: %w", s.Size, s.Pos, s.File.Name(), err)
	}
	it := kbatch.Batches(dst[start:])
	for it.Next() { // to the end of the last whole batch
	}
	return dst[:start+it.Pos()], nil
}

// Read returns the stored bytes starting with the batch that contains
// offset, or the next batch when offset is in a gap, up to maxBytes bytes
// from one segment; the first batch is returned whole even if larger than
// maxBytes (KIP-74). offset == LogEndOffset returns an empty Slice.
// offset outside [LogStartOffset, LogEndOffset] is ErrOffsetOutOfRange.
func (l *Log) Read(offset int64, maxBytes int) (Slice, error) {
	return l.ReadBounded(offset, maxBytes, math.MaxInt64)
}

// ReadBounded is Read limited to the batches whose last offset is below
// maxOffset, as Kafka bounds fetches by isolation level: the high watermark
// (or DurableOffset, for a broker that exposes only durable data under
// FlushAlways) for consumers, LastStableOffset for READ_COMMITTED. A batch
// containing maxOffset is not returned.
func (l *Log) ReadBounded(offset int64, maxBytes int, maxOffset int64) (Slice, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.checkLocked(); err != nil {
		return Slice{}, err
	}
	if offset < l.logStart || offset > l.leo {
		return Slice{}, fmt.Errorf("%w: %d not in [%d, %d]", ErrOffsetOutOfRange, offset, l.logStart, l.leo)
	}
	if offset == l.leo || offset >= maxOffset {
		return Slice{}, nil
	}
	sb, err := l.storedBatchLocked(offset)
	if err == errNoBatch {
		return Slice{}, nil // offset in a gap at the end of the log
	}
	if err != nil {
		return Slice{}, err
	}
	end := sb.seg.size
	if maxOffset < sb.seg.next {
		bound, err := sb.seg.find(maxOffset)
		if err == nil && bound.pos < end {
			end = bound.pos
		} else if err != nil && err != errNoBatch {
			return Slice{}, err
		}
	}
	if end <= sb.pos {
		return Slice{}, nil
	}
	size := int64(maxBytes)
	if size < sb.size {
		size = sb.size
	}
	if size > end-sb.pos {
		size = end - sb.pos
	}
	return Slice{File: sb.seg.log, Pos: sb.pos, Size: int(size), BaseOffset: sb.base}, nil
}

// TimestampOffset answers ListOffsets by timestamp.
type TimestampOffset struct {
	Timestamp   int64
	Offset      int64
	LeaderEpoch int32 // -1 when the batch has none
}

// ErrNoTimestampMatch is returned when no record has a timestamp >= the
// one asked for (Kafka answers offset -1, or the log end for "latest").
var ErrNoTimestampMatch = errors.New("storage: no record at or after the timestamp")

// OffsetForTimestamp returns the first record whose timestamp is >= ts,
// with ListOffsets semantics: the first segment whose largest timestamp is
// >= ts is searched through its time index, then the batches from there are
// read and the records of the first batch whose max timestamp is >= ts are
// decompressed to find the exact record (as Kafka does, for every codec).
// Records below the log start offset are skipped. Control batches count, as
// in Kafka; empty batches have no record and are passed over.
func (l *Log) OffsetForTimestamp(ts int64) (TimestampOffset, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.checkLocked(); err != nil {
		return TimestampOffset{}, err
	}
	for _, s := range l.segs {
		if s.size == 0 || s.maxTs < ts || s.next <= l.logStart {
			continue
		}
		if err := s.ensureIndexes(); err != nil {
			return TimestampOffset{}, err
		}
		entryTs, tsOff := s.timeIdx.lookup(ts)
		if entryTs >= 0 {
			ok, err := s.checkTimeEntry(entryTs, tsOff)
			if err != nil {
				return TimestampOffset{}, err
			}
			if !ok { // rebuilt: look again
				_, tsOff = s.timeIdx.lookup(ts)
			}
		}
		if tsOff < l.logStart {
			tsOff = l.logStart
		}
		pos, err := s.lookupChecked(tsOff)
		if err != nil {
			return TimestampOffset{}, err
		}
		r, found, err := l.scanForTimestamp(s, pos, ts)
		if err != nil || found {
			return r, err
		}
	}
	return TimestampOffset{}, ErrNoTimestampMatch
}

// scanForTimestamp reads batches of s from pos. REQUIRES: l.mu.
func (l *Log) scanForTimestamp(s *segment, pos int64, ts int64) (TimestampOffset, bool, error) {
	var hdr [kbatch.HeaderSize]byte
	for pos < s.size {
		if err := readFull(s.log, hdr[:], pos); err != nil {
			return TimestampOffset{}, false, err
		}
		size := int64(kbatch.LogOverhead) + int64(kbatch.Length(hdr[:]))
		if size < kbatch.HeaderSize || pos+size > s.size {
			return TimestampOffset{}, false, fmt.Errorf("%w: bad batch length at position %d of %s", ErrCorruptLog, pos, s.path(logSuffix))
		}
		base := kbatch.BaseOffset(hdr[:])
		last := base + int64(kbatch.LastOffsetDelta(hdr[:]))
		if kbatch.MaxTimestamp(hdr[:]) >= ts && last >= l.logStart {
			b := make([]byte, size)
			if err := readFull(s.log, b, pos); err != nil {
				return TimestampOffset{}, false, err
			}
			r, ok, err := firstRecordAtOrAfter(b, ts, l.logStart)
			if err != nil || ok {
				return r, ok, err
			}
		}
		pos += size
	}
	return TimestampOffset{}, false, nil
}

// firstRecordAtOrAfter decodes batch b and returns its first record with
// timestamp >= ts and offset >= minOffset.
func firstRecordAtOrAfter(b []byte, ts, minOffset int64) (TimestampOffset, bool, error) {
	h, err := kbatch.ParseHeader(b)
	if err != nil {
		return TimestampOffset{}, false, err
	}
	recs, err := kbatch.Records(b)
	if err != nil {
		return TimestampOffset{}, false, fmt.Errorf("%w: batch at offset %d: %v", ErrCorruptLog, h.BaseOffset, err)
	}
	epoch := h.LeaderEpoch
	if epoch < 0 {
		epoch = -1
	}
	for i := range recs {
		rts := recordTimestamp(&h, &recs[i])
		off := h.BaseOffset + int64(recs[i].OffsetDelta)
		if rts >= ts && off >= minOffset {
			return TimestampOffset{Timestamp: rts, Offset: off, LeaderEpoch: epoch}, true, nil
		}
	}
	return TimestampOffset{}, false, nil
}

// recordTimestamp is Kafka's record timestamp: the batch max timestamp
// under LogAppendTime, base timestamp plus delta otherwise.
func recordTimestamp(h *kbatch.Header, r *kbatch.Record) int64 {
	if h.LogAppendTime() {
		return h.MaxTimestamp
	}
	return h.BaseTimestamp + r.TimestampDelta
}

// MaxTimestamp answers ListOffsets MAX_TIMESTAMP (KIP-734) as Kafka does:
// the segment with the largest timestamp (the first one on ties), the first
// batch in it whose max timestamp equals it, and in that batch the first
// record carrying it (the base offset under LogAppendTime). found is false
// on an empty log or when no batch has a timestamp.
func (l *Log) MaxTimestamp() (r TimestampOffset, found bool, err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.checkLocked(); err != nil {
		return TimestampOffset{}, false, err
	}
	var best *segment
	for _, s := range l.segs {
		if s.size > 0 && s.maxTs >= 0 && (best == nil || s.maxTs > best.maxTs) {
			best = s
		}
	}
	if best == nil {
		return TimestampOffset{}, false, nil
	}
	if err := best.ensureIndexes(); err != nil {
		return TimestampOffset{}, false, err
	}
	target := best.maxTs
	pos, err := best.lookupChecked(best.maxTsOffset)
	if err != nil {
		return TimestampOffset{}, false, err
	}
	var hdr [kbatch.HeaderSize]byte
	for pos < best.size {
		if err := readFull(best.log, hdr[:], pos); err != nil {
			return TimestampOffset{}, false, err
		}
		size := int64(kbatch.LogOverhead) + int64(kbatch.Length(hdr[:]))
		if size < kbatch.HeaderSize || pos+size > best.size {
			return TimestampOffset{}, false, fmt.Errorf("%w: bad batch length at position %d of %s", ErrCorruptLog, pos, best.path(logSuffix))
		}
		if kbatch.MaxTimestamp(hdr[:]) == target {
			b := make([]byte, size)
			if err := readFull(best.log, b, pos); err != nil {
				return TimestampOffset{}, false, err
			}
			h, _ := kbatch.ParseHeader(b)
			epoch := h.LeaderEpoch
			if epoch < 0 {
				epoch = -1
			}
			if h.LogAppendTime() {
				return TimestampOffset{Timestamp: target, Offset: h.BaseOffset, LeaderEpoch: epoch}, true, nil
			}
			recs, err := kbatch.Records(b)
			if err != nil {
				return TimestampOffset{}, false, fmt.Errorf("%w: batch at offset %d: %v", ErrCorruptLog, h.BaseOffset, err)
			}
			for i := range recs {
				if recordTimestamp(&h, &recs[i]) == target {
					return TimestampOffset{Timestamp: target, Offset: h.BaseOffset + int64(recs[i].OffsetDelta), LeaderEpoch: epoch}, true, nil
				}
			}
			return TimestampOffset{}, false, nil
		}
		pos += size
	}
	return TimestampOffset{}, false, nil
}

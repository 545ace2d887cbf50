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

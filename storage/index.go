package storage

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
)

// On-disk index formats (Kafka's, frozen: Kafka's DumpLogSegments and
// Kafka brokers read these files):
//
//	.index      entries of 8 bytes, big endian:
//	            relativeOffset int32 (offset - segment base) | position int32
//	.timeindex  entries of 12 bytes, big endian:
//	            timestamp int64 | relativeOffset int32
//
// Both are sparse. While a segment is written, a new offset index entry
// (the batch's last offset, the batch's file position) is added before a
// batch when more than index.interval.bytes were appended since the last
// entry, and at the same moment a time index entry (max timestamp so far,
// last offset of the batch holding it) if that timestamp is larger than the
// last time index entry. Rolling or closing a segment adds a final time
// index entry for the segment's max timestamp. Kafka preallocates index
// files and trims them on close; Verbatim never preallocates: a file always
// holds exactly its entries, which is what a trimmed Kafka index looks like.
const (
	offsetIndexEntrySize = 8
	timeIndexEntrySize   = 12
)

// ErrCorruptIndex is wrapped by index loading errors.
var ErrCorruptIndex = errors.New("storage: corrupt index")

// offsetIndex is a segment's offset index held in memory (entries in Kafka
// byte order), with the number of bytes already written to its file.
type offsetIndex struct {
	base    int64
	buf     []byte
	written int // bytes of buf already written to the file
}

func (x *offsetIndex) entries() int { return len(x.buf) / offsetIndexEntrySize }

func (x *offsetIndex) entry(i int) (offset int64, pos int64) {
	b := x.buf[i*offsetIndexEntrySize:]
	return x.base + int64(int32(binary.BigEndian.Uint32(b))), int64(int32(binary.BigEndian.Uint32(b[4:])))
}

// add appends an entry. Offsets must increase and fit the relative int32;
// the caller guarantees both (segments roll before overflow).
func (x *offsetIndex) add(offset int64, pos int64) {
	var e [offsetIndexEntrySize]byte
	binary.BigEndian.PutUint32(e[:], uint32(int32(offset-x.base)))
	binary.BigEndian.PutUint32(e[4:], uint32(int32(pos)))
	x.buf = append(x.buf, e[:]...)
}

// lookup returns the position of the entry with the largest offset <=
// target, or 0 (the segment start) when there is none.
func (x *offsetIndex) lookup(target int64) int64 {
	lo, hi := 0, x.entries()-1
	best := int64(0)
	for lo <= hi {
		mid := int(uint(lo+hi) >> 1)
		o, p := x.entry(mid)
		if o <= target {
			best = p
			lo = mid + 1
		} else {
			hi = mid - 1
		}
	}
	return best
}

// lookupEntry returns the entry with the largest offset <= target; ok is
// false when there is none (the segment start is the lower bound).
func (x *offsetIndex) lookupEntry(target int64) (offset, pos int64, ok bool) {
	lo, hi := 0, x.entries()-1
	for lo <= hi {
		mid := int(uint(lo+hi) >> 1)
		o, p := x.entry(mid)
		if o <= target {
			offset, pos, ok = o, p, true
			lo = mid + 1
		} else {
			hi = mid - 1
		}
	}
	return offset, pos, ok
}

// loadOffsetIndex checks and adopts the bytes of an .index file of the
// segment starting at base whose log holds logSize bytes. Every entry must
// have increasing offsets (the first may equal base) and increasing
// positions inside the log.
func loadOffsetIndex(base int64, b []byte, logSize int64) (offsetIndex, error) {
	x := offsetIndex{base: base}
	if len(b)%offsetIndexEntrySize != 0 {
		return x, fmt.Errorf("%w: offset index size %d is not a multiple of %d", ErrCorruptIndex, len(b), offsetIndexEntrySize)
	}
	prevOff, prevPos := int64(math.MinInt64), int64(-1)
	for i := 0; i+offsetIndexEntrySize <= len(b); i += offsetIndexEntrySize {
		rel := int32(binary.BigEndian.Uint32(b[i:]))
		pos := int64(int32(binary.BigEndian.Uint32(b[i+4:])))
		off := base + int64(rel)
		if rel < 0 || off <= prevOff || pos <= prevPos || pos >= logSize {
			return x, fmt.Errorf("%w: offset index entry %d (offset %d, position %d) out of order or outside the log (%d bytes)", ErrCorruptIndex, i/offsetIndexEntrySize, off, pos, logSize)
		}
		prevOff, prevPos = off, pos
	}
	x.buf = append([]byte(nil), b...)
	x.written = len(b)
	return x, nil
}

// timeIndex is a segment's time index held in memory.
type timeIndex struct {
	base    int64
	buf     []byte
	written int
}

func (x *timeIndex) entries() int { return len(x.buf) / timeIndexEntrySize }

func (x *timeIndex) entry(i int) (ts int64, offset int64) {
	b := x.buf[i*timeIndexEntrySize:]
	return int64(binary.BigEndian.Uint64(b)), x.base + int64(int32(binary.BigEndian.Uint32(b[8:])))
}

// last returns the last entry, or (-1, base) when empty (Kafka's
// "no timestamp" entry).
func (x *timeIndex) last() (ts int64, offset int64) {
	n := x.entries()
	if n == 0 {
		return -1, x.base
	}
	return x.entry(n - 1)
}

// maybeAdd appends (ts, offset) when ts is larger than the last entry's
// timestamp, as Kafka's TimeIndex.maybeAppend does. Offsets never go back:
// an entry whose offset is below the last one is not added.
func (x *timeIndex) maybeAdd(ts, offset int64) {
	lts, loff := x.last()
	if ts <= lts || (x.entries() > 0 && offset < loff) {
		return
	}
	var e [timeIndexEntrySize]byte
	binary.BigEndian.PutUint64(e[:], uint64(ts))
	binary.BigEndian.PutUint32(e[8:], uint32(int32(offset-x.base)))
	x.buf = append(x.buf, e[:]...)
}

// lookup returns the entry with the largest timestamp <= ts, or (-1, base).
func (x *timeIndex) lookup(ts int64) (int64, int64) {
	lo, hi := 0, x.entries()-1
	bts, boff := int64(-1), x.base
	for lo <= hi {
		mid := int(uint(lo+hi) >> 1)
		t, o := x.entry(mid)
		if t <= ts {
			bts, boff = t, o
			lo = mid + 1
		} else {
			hi = mid - 1
		}
	}
	return bts, boff
}

// loadTimeIndex checks and adopts the bytes of a .timeindex file: entries
// with strictly increasing timestamps, non-decreasing offsets, each offset
// in [base, nextOffset).
func loadTimeIndex(base int64, b []byte, nextOffset int64) (timeIndex, error) {
	x := timeIndex{base: base}
	if len(b)%timeIndexEntrySize != 0 {
		return x, fmt.Errorf("%w: time index size %d is not a multiple of %d", ErrCorruptIndex, len(b), timeIndexEntrySize)
	}
	prevTs, prevOff := int64(math.MinInt64), base
	for i := 0; i+timeIndexEntrySize <= len(b); i += timeIndexEntrySize {
		ts := int64(binary.BigEndian.Uint64(b[i:]))
		rel := int32(binary.BigEndian.Uint32(b[i+8:]))
		off := base + int64(rel)
		if rel < 0 || ts <= prevTs || off < prevOff || off >= nextOffset {
			return x, fmt.Errorf("%w: time index entry %d (timestamp %d, offset %d) out of order or outside the segment", ErrCorruptIndex, i/timeIndexEntrySize, ts, off)
		}
		prevTs, prevOff = ts, off
	}
	x.buf = append([]byte(nil), b...)
	x.written = len(b)
	return x, nil
}

package storage

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/bits"
	"sync"

	"github.com/verbatim-kafka/verbatim/kbatch"
)

// ErrUndecodableBatch is in the chain of a CorruptBatchError.
var ErrUndecodableBatch = errors.New("storage: stored batch cannot be decoded")

// CorruptBatchError reports a stored batch whose records a read had to
// decode and could not: a compressed payload that is not valid for its
// codec, malformed records, or decompressed sizes over the reader's
// limits. Verbatim (mirror) appends store batches untouched, so such a
// batch can be in the log; the read fails and the log stays as it is.
// Kafka: INVALID_RECORD (its leader answers UNKNOWN_SERVER_ERROR for an
// undecodable compressed stream; Verbatim answers INVALID_RECORD for both,
// as its produce validation does).
type CorruptBatchError struct {
	// Offset is the batch's base offset.
	Offset int64
	Err    error
}

func (e *CorruptBatchError) Error() string {
	return fmt.Sprintf("storage: the batch at offset %d cannot be decoded: %v", e.Offset, e.Err)
}

func (e *CorruptBatchError) Unwrap() []error { return []error{ErrUndecodableBatch, e.Err} }

// lookupAttempts bounds how often a lookup starts over when the batch it
// found changed under it (a concurrent truncation) before it read it.
const lookupAttempts = 3

// candidate is a batch a lookup must look into, found under l.mu and
// read without it: the file stays readable (see Slice) and the header
// read again must match, or the lookup starts over.
type candidate struct {
	file     File
	pos      int64
	size     int64
	hdr      [kbatch.HeaderSize]byte
	logStart int64
}

func (c *candidate) base() int64 { return kbatch.BaseOffset(c.hdr[:]) }
func (c *candidate) last() int64 { return c.base() + int64(kbatch.LastOffsetDelta(c.hdr[:])) }

// OffsetForTimestamp returns the first record whose timestamp is >= ts,
// with ListOffsets semantics: the first segment whose largest timestamp is
// >= ts is searched through its time index, then the batches from there are
// passed over by their headers, and the records of the first batch whose
// max timestamp is >= ts are streamed through the kbatch record reader to
// find the exact record (as Kafka does, for every codec). Records below the
// log start offset are skipped. Control batches count, as in Kafka; empty
// batches have no record and are passed over.
//
// The batch read and its decoder's working memory are charged to
// Config.DecodeBudget first (waiting for it under ctx), and the log's lock
// is not held while reading or decoding it. A batch whose records cannot
// be decoded is a *CorruptBatchError.
func (l *Log) OffsetForTimestamp(ctx context.Context, ts int64) (TimestampOffset, error) {
	after := int64(-1) // batches ending at or below this were looked into
	for attempt := 0; ; {
		l.mu.Lock()
		c, ok, err := l.timestampCandidateLocked(ts, after)
		l.mu.Unlock()
		if err != nil || !ok {
			if err == nil {
				err = ErrNoTimestampMatch
			}
			return TimestampOffset{}, err
		}
		r, found, err := l.firstRecord(ctx, &c, func(rts, off int64) bool { return rts >= ts && off >= c.logStart })
		switch {
		case errors.Is(err, errBatchMoved) && attempt < lookupAttempts:
			attempt++
			continue
		case err != nil:
			return TimestampOffset{}, err
		case found:
			return r, nil
		}
		after = c.last()
	}
}

// timestampCandidateLocked finds the first batch ending above after and
// at or above the log start whose max timestamp is >= ts. REQUIRES: l.mu.
func (l *Log) timestampCandidateLocked(ts, after int64) (candidate, bool, error) {
	if err := l.checkLocked(); err != nil {
		return candidate{}, false, err
	}
	floor := max(l.logStart, after+1) // the first offset a batch must reach
	for _, s := range l.segs {
		if s.size == 0 || s.maxTs < ts || s.next <= floor {
			continue
		}
		if err := s.ensureIndexes(); err != nil {
			return candidate{}, false, err
		}
		entryTs, tsOff := s.timeIdx.lookup(ts)
		if entryTs >= 0 {
			ok, err := s.checkTimeEntry(entryTs, tsOff)
			if err != nil {
				return candidate{}, false, err
			}
			if !ok { // rebuilt: look again
				_, tsOff = s.timeIdx.lookup(ts)
			}
		}
		pos, err := s.lookupChecked(max(tsOff, floor))
		if err != nil {
			return candidate{}, false, err
		}
		c, ok, err := l.scanHeaders(s, pos, func(c *candidate) bool {
			return kbatch.MaxTimestamp(c.hdr[:]) >= ts && c.last() >= floor
		})
		if err != nil || ok {
			return c, ok, err
		}
	}
	return candidate{}, false, nil
}

// scanHeaders reads the batch headers of s from pos and returns the first
// batch match accepts. REQUIRES: l.mu.
func (l *Log) scanHeaders(s *segment, pos int64, match func(*candidate) bool) (candidate, bool, error) {
	c := candidate{file: s.log, logStart: l.logStart}
	for ; pos < s.size; pos += c.size {
		if err := readFull(s.log, c.hdr[:], pos); err != nil {
			return candidate{}, false, err
		}
		c.pos, c.size = pos, int64(kbatch.LogOverhead)+int64(kbatch.Length(c.hdr[:]))
		if c.size < kbatch.HeaderSize || pos+c.size > s.size {
			return candidate{}, false, fmt.Errorf("%w: bad batch length at position %d of %s", ErrCorruptLog, pos, s.path(logSuffix))
		}
		if match(&c) {
			return c, true, nil
		}
	}
	return candidate{}, false, nil
}

// MaxTimestamp answers ListOffsets MAX_TIMESTAMP (KIP-734) as Kafka does:
// the segment with the largest timestamp (the first one on ties), the first
// batch in it whose max timestamp equals it, and in that batch the first
// record carrying it (the base offset under LogAppendTime). found is false
// on an empty log or when no batch has a timestamp. The batch is read and
// decoded as OffsetForTimestamp does (budget, no lock, CorruptBatchError).
func (l *Log) MaxTimestamp(ctx context.Context) (r TimestampOffset, found bool, err error) {
	for attempt := 0; ; attempt++ {
		l.mu.Lock()
		c, ok, err := l.maxTimestampCandidateLocked()
		l.mu.Unlock()
		if err != nil || !ok {
			return TimestampOffset{}, false, err
		}
		target := kbatch.MaxTimestamp(c.hdr[:])
		if kbatch.Attributes(c.hdr[:])&kbatch.TimestampTypeBit != 0 { // LogAppendTime
			return TimestampOffset{Timestamp: target, Offset: c.base(), LeaderEpoch: epochOf(kbatch.LeaderEpoch(c.hdr[:]))}, true, nil
		}
		r, found, err = l.firstRecord(ctx, &c, func(rts, _ int64) bool { return rts == target })
		if errors.Is(err, errBatchMoved) && attempt < lookupAttempts {
			continue
		}
		return r, found, err
	}
}

// maxTimestampCandidateLocked finds the batch MaxTimestamp looks into.
// REQUIRES: l.mu.
func (l *Log) maxTimestampCandidateLocked() (candidate, bool, error) {
	if err := l.checkLocked(); err != nil {
		return candidate{}, false, err
	}
	var best *segment
	for _, s := range l.segs {
		if s.size > 0 && s.maxTs >= 0 && (best == nil || s.maxTs > best.maxTs) {
			best = s
		}
	}
	if best == nil {
		return candidate{}, false, nil
	}
	if err := best.ensureIndexes(); err != nil {
		return candidate{}, false, err
	}
	pos, err := best.lookupChecked(best.maxTsOffset)
	if err != nil {
		return candidate{}, false, err
	}
	return l.scanHeaders(best, pos, func(c *candidate) bool { return kbatch.MaxTimestamp(c.hdr[:]) == best.maxTs })
}

// errBatchMoved: the candidate's bytes changed before they were read.
var errBatchMoved = errors.New("storage: batch changed while being read")

// firstRecord reads the candidate batch under the decode budget and
// returns its first record whose timestamp and offset match accepts; a
// decoding error becomes a *CorruptBatchError.
func (l *Log) firstRecord(ctx context.Context, c *candidate, match func(ts, offset int64) bool) (TimestampOffset, bool, error) {
	h, rr, release, err := l.openCandidate(ctx, c)
	if err != nil {
		return TimestampOffset{}, false, err
	}
	defer release()
	for {
		ri, err := rr.Next()
		if err == io.EOF {
			return TimestampOffset{}, false, nil
		}
		if err != nil {
			return TimestampOffset{}, false, &CorruptBatchError{Offset: h.BaseOffset, Err: err}
		}
		rts, off := recordTimestamp(&h, ri.TimestampDelta), h.BaseOffset+int64(ri.OffsetDelta)
		if match(rts, off) {
			return TimestampOffset{Timestamp: rts, Offset: off, LeaderEpoch: epochOf(h.LeaderEpoch)}, true, nil
		}
	}
}

// epochOf is a batch's leader epoch as ListOffsets reports it (-1: none).
func epochOf(e int32) int32 {
	if e < 0 {
		return -1
	}
	return e
}

// recordTimestamp is Kafka's record timestamp: the batch max timestamp
// under LogAppendTime, base timestamp plus delta otherwise.
func recordTimestamp(h *kbatch.Header, delta int64) int64 {
	if h.LogAppendTime() {
		return h.MaxTimestamp
	}
	return h.BaseTimestamp + delta
}

// wsGuess is the decoder memory reserved with a compressed batch before
// its stream headers are read: enough for gzip, and for LZ4 and zstd
// streams of ordinary block and window sizes. A stream that needs more is
// charged again, exactly, with nothing held while it waits (no lookup
// holds budget while waiting for more, so lookups cannot deadlock on it).
func wsGuess(attributes int16) int64 {
	switch kbatch.Codec(attributes & kbatch.CodecMask) {
	case kbatch.CodecNone:
		return 0
	case kbatch.CodecGzip:
		return 256 << 10
	}
	return 2 << 20
}

// openCandidate reads the candidate batch into a pooled buffer and opens a
// record reader over it, with the buffer and the reader's working memory
// (kbatch.RecordReader.WorkingSet) charged to the decode budget; release
// closes the reader and returns both. A charge larger than the whole
// budget takes all of it (the lookup runs alone) rather than never
// running. The bytes read must still be the candidate's (else
// errBatchMoved: the lookup starts over).
func (l *Log) openCandidate(ctx context.Context, c *candidate) (h kbatch.Header, rr *kbatch.RecordReader, release func(), err error) {
	bud := l.cfg.DecodeBudget
	ws := wsGuess(kbatch.Attributes(c.hdr[:]))
	for exact := false; ; exact = true {
		charge := lookupBufCap(c.size) + ws // the buffer as allocated
		if bud != nil {
			charge = min(charge, bud.Limit())
			if err := bud.Acquire(ctx, charge); err != nil {
				return h, nil, nil, err
			}
		}
		unreserve := func() {
			if bud != nil {
				bud.Release(charge)
			}
		}
		buf := getLookupBuf(c.size)
		b := (*buf)[:c.size]
		if err := readFull(c.file, b, c.pos); err != nil || [kbatch.HeaderSize]byte(b[:kbatch.HeaderSize]) != c.hdr {
			putLookupBuf(buf)
			unreserve()
			return h, nil, nil, fmt.Errorf("%w: at position %d: %v", errBatchMoved, c.pos, err)
		}
		if h, err = kbatch.ParseHeader(b); err == nil {
			rr, err = kbatch.NewRecordReader(b, kbatch.Limits{})
		}
		if err != nil {
			putLookupBuf(buf)
			unreserve()
			return h, nil, nil, &CorruptBatchError{Offset: c.base(), Err: err}
		}
		need := rr.WorkingSet()
		if need > ws && !exact && bud != nil && charge < bud.Limit() {
			// More than reserved: give everything back, then charge
			// exactly what this stream needs.
			rr.Close()
			putLookupBuf(buf)
			unreserve()
			ws = need
			continue
		}
		if bud != nil && need < ws && charge < bud.Limit() {
			bud.Release(ws - need) // what the guess reserved beyond the need
			charge -= ws - need
		}
		return h, rr, func() {
			rr.Close()
			putLookupBuf(buf)
			unreserve()
		}, nil
	}
}

// Lookup buffers are pooled by power-of-two class from 4 KiB to 64 MiB;
// larger batches get a buffer of their own.
const (
	minLookupClass = 12
	maxLookupClass = 26
)

var lookupBufs [maxLookupClass - minLookupClass + 1]sync.Pool

func lookupClass(n int64) int {
	return max(bits.Len64(uint64(n-1)), minLookupClass) - minLookupClass
}

// lookupBufCap is the capacity getLookupBuf returns for n bytes.
func lookupBufCap(n int64) int64 {
	if c := lookupClass(n); c < len(lookupBufs) {
		return 1 << (c + minLookupClass)
	}
	return n
}

func getLookupBuf(n int64) *[]byte {
	c := lookupClass(n)
	if c >= len(lookupBufs) {
		b := make([]byte, n)
		return &b
	}
	if p, _ := lookupBufs[c].Get().(*[]byte); p != nil {
		return p
	}
	b := make([]byte, 1<<(c+minLookupClass))
	return &b
}

func putLookupBuf(p *[]byte) {
	n := int64(cap(*p))
	if c := lookupClass(n); c < len(lookupBufs) && n == 1<<(c+minLookupClass) {
		lookupBufs[c].Put(p)
	}
}

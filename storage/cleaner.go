package storage

import (
	"errors"
	"fmt"
	"io"
	"math"
	"sync/atomic"
	"time"

	"github.com/verbatim-kafka/verbatim/kbatch"
)

// The log cleaner's core (Kafka's Cleaner and the parts of
// LogCleanerManager that look at one log): the cleanable range of a log,
// the offset map over its dirty section, and the cleaning of segment
// groups. The file protocol of the swap is in cleaner_swap.go, the keep /
// drop rules in cleaner_filter.go. docs/DESIGN.md ("The cleaner") has the
// design.

// CompactConfig is a compacted topic's cleaning configuration (Kafka's
// topic configs of the same names), used as given: 0 is a valid
// delete.retention.ms (tombstones go at the first clean after their
// horizon is set) and a valid min.cleanable.dirty.ratio (any dirty byte
// makes the log cleanable). DefaultCompactConfig has Kafka's defaults.
type CompactConfig struct {
	// DeleteRetentionMs is delete.retention.ms: how long a tombstone or a
	// marker whose transaction is gone stays after it was first cleaned
	// (its delete horizon). Negative is taken as 0.
	DeleteRetentionMs int64
	// MinCompactionLagMs (min.compaction.lag.ms): a segment whose largest
	// timestamp is more recent than this is not cleaned.
	MinCompactionLagMs int64
	// MaxCompactionLagMs (max.compaction.lag.ms): a log whose first dirty
	// batch is older than this needs cleaning whatever its dirty ratio.
	// 0 or less: unlimited (Kafka's minimum is 1).
	MaxCompactionLagMs int64
	// MinCleanableRatio (min.cleanable.dirty.ratio): the log is cleanable
	// when its dirty ratio is above it.
	MinCleanableRatio float64
}

// Kafka's defaults.
const (
	DefaultDeleteRetentionMs   = 24 * 3600 * 1000
	DefaultMinCleanableRatio   = 0.5
	DefaultDedupeBufferBytes   = 128 << 20
	DefaultCleanerMaxBatchSize = 64 << 20
)

// DefaultCompactConfig is Kafka's default compaction configuration.
func DefaultCompactConfig() CompactConfig {
	return CompactConfig{DeleteRetentionMs: DefaultDeleteRetentionMs, MaxCompactionLagMs: math.MaxInt64,
		MinCleanableRatio: DefaultMinCleanableRatio}
}

func (c CompactConfig) withDefaults() CompactConfig {
	c.DeleteRetentionMs = max(c.DeleteRetentionMs, 0)
	c.MinCompactionLagMs = max(c.MinCompactionLagMs, 0)
	if c.MaxCompactionLagMs <= 0 {
		c.MaxCompactionLagMs = math.MaxInt64
	}
	return c
}

// CleanerConfig configures a Cleaner (one per cleaner thread).
type CleanerConfig struct {
	// DedupeBufferBytes bounds the offset map (this thread's share of
	// log.cleaner.dedupe.buffer.size). Default 128 MiB.
	DedupeBufferBytes int64
	// IOMaxBytesPerSecond is log.cleaner.io.max.bytes.per.second; <= 0 is
	// unlimited.
	IOMaxBytesPerSecond float64
	// MaxBatchBytes bounds the decompressed records of one batch the
	// cleaner reads (a larger batch makes the partition uncleanable).
	// Default 64 MiB.
	MaxBatchBytes int64
	// Now and Sleep are the throttle's clock (tests set them).
	Now   func() time.Time
	Sleep func(time.Duration)
}

// Cleaner cleans logs one at a time. It owns the offset map and the I/O
// buffers; MemoryBytes is what they hold. Not safe for concurrent use.
type Cleaner struct {
	stopped  atomic.Bool
	cfg      CleanerConfig
	m        *offsetMap
	throttle *Throttler
	readBuf  []byte
	writeBuf []byte
}

// NewCleaner returns a cleaner; its offset map grows on demand up to
// cfg.DedupeBufferBytes.
func NewCleaner(cfg CleanerConfig) *Cleaner {
	if cfg.DedupeBufferBytes <= 0 {
		cfg.DedupeBufferBytes = DefaultDedupeBufferBytes
	}
	if cfg.MaxBatchBytes <= 0 {
		cfg.MaxBatchBytes = DefaultCleanerMaxBatchSize
	}
	return &Cleaner{cfg: cfg, m: newOffsetMap(cfg.DedupeBufferBytes),
		throttle: NewThrottler(cfg.IOMaxBytesPerSecond, cfg.Now, cfg.Sleep)}
}

// ErrCleanerStopped is returned by a clean that Stop interrupted (nothing
// of it was swapped in after the interruption).
var ErrCleanerStopped = errors.New("storage: cleaner stopped")

// Stop makes the clean in progress, and every later one, end at the next
// batch it reads with ErrCleanerStopped (Kafka's checkDone). Safe to call
// from any goroutine.
func (c *Cleaner) Stop() { c.stopped.Store(true) }

// MemoryBytes is the memory the cleaner holds between cleans: the offset
// map and the read and write buffers.
func (c *Cleaner) MemoryBytes() int64 {
	return c.m.bytes() + int64(cap(c.readBuf)) + int64(cap(c.writeBuf))
}

// Throttled is the total time the I/O throttle slept.
func (c *Cleaner) Throttled() time.Duration { return c.throttle.Slept() }

// CleanStats describes one clean.
type CleanStats struct {
	FirstDirty, EndOffset int64 // the offsets mapped: [FirstDirty, EndOffset)
	MapEntries            int
	MapFull               bool // the map filled before the dirty section ended
	Groups                int  // segment groups rewritten
	SegmentsBefore        int
	BytesRead             int64
	BytesWritten          int64
	RecordsRead           int64
	RecordsKept           int64
	BatchesDropped        int64
	Aborted               bool // the log changed under the clean (truncation, retention): nothing swapped from there on
}

// Cleanable is what a log offers to the cleaner now (Kafka's
// LogToClean): the first dirty offset, the first offset that may not be
// cleaned (the active segment, a segment holding undecided transactions
// or not yet durable, or one younger than min.compaction.lag.ms), and the
// bytes on either side of the first dirty offset.
type Cleanable struct {
	FirstDirty, FirstUncleanable int64
	CleanBytes, CleanableBytes   int64
	// Ratio is CleanableBytes / (CleanBytes + CleanableBytes).
	Ratio float64
	// NeedCompactionNow: the first dirty batch is older than
	// max.compaction.lag.ms (KIP-354).
	NeedCompactionNow bool
	// Uncleanable is the decode error that marked the log uncleanable.
	Uncleanable error
}

// ShouldClean reports whether the cleaner should take the log, Kafka's
// rule: a dirty ratio above min.cleanable.dirty.ratio, or dirty bytes
// past the max compaction lag.
func (c Cleanable) ShouldClean(cc CompactConfig) bool {
	cc = cc.withDefaults()
	if c.Uncleanable != nil || c.CleanableBytes == 0 {
		return false
	}
	return c.NeedCompactionNow || c.Ratio > cc.MinCleanableRatio
}

// segView is a segment as the cleaner saw it under the log mutex. Only
// segments before the active one are viewed; their bytes below size do not
// change while the segment is in the log.
type segView struct {
	s                  *segment
	f                  File
	base, next, size   int64
	maxTs, firstTs     int64
	idxBytes, timeSize int64
}

// cleanPlan is a Cleanable with the segments behind it.
type cleanPlan struct {
	Cleanable
	segs      []segView // the cleanable segments, from the log's first
	firstIdx  int       // first segment overlapping the dirty section
	producers map[int64]lastProducerBatch
}

// Uncleanable returns the decode error that marked the log uncleanable,
// or nil.
func (l *Log) Uncleanable() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.uncleanable
}

// CleanableState returns what the log offers to the cleaner at nowMs.
func (l *Log) CleanableState(cc CompactConfig, nowMs int64) (Cleanable, error) {
	cp, err := readCleanerCheckpoint(l.fs, l.dir, l.cfg.Topic, l.cfg.Partition)
	if err != nil && !errors.Is(err, ErrCorruptCheckpoint) {
		return Cleanable{}, err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.checkLocked(); err != nil {
		return Cleanable{}, err
	}
	p := l.planLocked(cc.withDefaults(), nowMs, cp)
	return p.Cleanable, nil
}

// planLocked computes the cleanable range. checkpoint is the recorded
// first dirty offset (-1: none). REQUIRES: l.mu.
func (l *Log) planLocked(cc CompactConfig, nowMs, checkpoint int64) cleanPlan {
	p := cleanPlan{Cleanable: Cleanable{Uncleanable: l.uncleanable}}
	a := l.active()
	firstDirty := checkpoint
	if firstDirty < l.logStart || firstDirty > a.base {
		firstDirty = l.logStart // Kafka resets a checkpoint outside the log
	}
	// Only whole segments below the last stable offset and the recovery
	// point are cleaned: undecided transactions stay as they are, and a
	// segment not yet synced is still recorded by its roll (recovery
	// compares its size).
	bound := min(a.base, l.lsoLocked(), l.recoveryPoint.Load())
	lagEnd := nowMs - cc.MinCompactionLagMs
	for i, s := range l.segs[:len(l.segs)-1] {
		if s.next > bound {
			break
		}
		ts := s.maxTs
		if ts < 0 {
			ts = s.createdMs
		}
		if s.next > firstDirty && cc.MinCompactionLagMs > 0 && ts > lagEnd {
			break
		}
		first := s.rollTs
		if first < 0 {
			first = s.createdMs
		}
		p.segs = append(p.segs, segView{s: s, f: s.flushLog, base: s.base, next: s.next, size: s.size,
			maxTs: s.maxTs, firstTs: first})
		if s.next <= firstDirty {
			p.CleanBytes += s.size
			p.firstIdx = i + 1
		} else {
			p.CleanableBytes += s.size
		}
	}
	p.FirstDirty = firstDirty
	p.FirstUncleanable = a.base
	if len(p.segs) < len(l.segs)-1 {
		p.FirstUncleanable = l.segs[len(p.segs)].base
	}
	if p.FirstUncleanable < firstDirty {
		p.FirstUncleanable = firstDirty
	}
	if tot := p.CleanBytes + p.CleanableBytes; tot > 0 {
		p.Ratio = float64(p.CleanableBytes) / float64(tot)
	}
	if p.firstIdx < len(p.segs) && cc.MaxCompactionLagMs < math.MaxInt64 {
		p.NeedCompactionNow = nowMs-p.segs[p.firstIdx].firstTs > cc.MaxCompactionLagMs
	}
	p.producers = map[int64]lastProducerBatch{}
	for pid, e := range l.producer.ps.producers {
		p.producers[pid] = lastProducerBatch{lastDataOffset: e.lastDataOffset(), epoch: e.epoch}
	}
	return p
}

// errCleanAborted: the log changed under the clean.
var errCleanAborted = errors.New("storage: clean aborted, the log changed")

// ErrCleanInProgress is returned by Clean when another clean of the log
// is running.
var ErrCleanInProgress = errors.New("storage: a clean of this log is in progress")

// Clean cleans the log once at nowMs with Kafka's semantics: it maps the
// latest offset of every key in the dirty section (as far as the offset
// map holds), then rewrites every segment from the log's first to the end
// of the mapped range, in groups of consecutive segments that fit one
// segment, keeping what the rules of cleaner_filter.go keep, and swaps
// each group's cleaned segment in (cleaner_swap.go). Appends and reads go
// on meanwhile; they wait only for each swap's renames. A batch that
// cannot be decoded marks the log uncleanable (ErrUncleanable). An I/O
// error during a swap takes the partition offline (Open recovers it to
// the old or the new segments).
func (c *Cleaner) Clean(l *Log, cc CompactConfig, nowMs int64) (CleanStats, error) {
	cc = cc.withDefaults()
	cp, err := readCleanerCheckpoint(l.fs, l.dir, l.cfg.Topic, l.cfg.Partition)
	if err != nil && !errors.Is(err, ErrCorruptCheckpoint) {
		return CleanStats{}, err
	}
	l.mu.Lock()
	if err := l.checkLocked(); err != nil {
		l.mu.Unlock()
		return CleanStats{}, err
	}
	if l.cleaning {
		l.mu.Unlock()
		return CleanStats{}, ErrCleanInProgress
	}
	if l.uncleanable != nil {
		err := l.uncleanable
		l.mu.Unlock()
		return CleanStats{}, err
	}
	p := l.planLocked(cc, nowMs, cp)
	l.cleaning = true
	l.mu.Unlock()
	defer func() {
		l.mu.Lock()
		l.cleaning = false
		l.mu.Unlock()
	}()
	st := CleanStats{FirstDirty: p.FirstDirty, EndOffset: p.FirstDirty, SegmentsBefore: len(p.segs)}
	if p.firstIdx >= len(p.segs) {
		return st, nil // nothing dirty
	}
	err = c.clean(l, &p, cc, nowMs, &st)
	if errors.Is(err, ErrUncleanable) {
		l.mu.Lock()
		if l.uncleanable == nil {
			l.uncleanable = err
		}
		l.mu.Unlock()
	}
	if errors.Is(err, errCleanAborted) {
		st.Aborted = true
		return st, nil
	}
	return st, err
}

func uncleanable(l *Log, off int64, cause error) error {
	return fmt.Errorf("%w: %s at offset %d: %v", ErrUncleanable, l.dir, off, cause)
}

func (c *Cleaner) clean(l *Log, p *cleanPlan, cc CompactConfig, nowMs int64, st *CleanStats) error {
	if err := c.buildOffsetMap(l, p, st); err != nil {
		return err
	}
	st.EndOffset = c.m.latest + 1
	st.MapEntries = c.m.entries
	if c.m.latest < 0 {
		return nil
	}
	var segs []segView
	for _, s := range p.segs {
		if s.base < st.EndOffset {
			segs = append(segs, s)
		}
	}
	f := &batchFilter{m: c.m, nowMs: nowMs, deleteRetain: cc.DeleteRetentionMs, producers: p.producers,
		lim: kbatch.Limits{MaxBatchBytes: c.cfg.MaxBatchBytes, Keep: true}, stats: st}
	l.mu.Lock()
	maxSize, maxIndex := l.cfg.SegmentBytes, int64(l.cfg.SegmentIndexBytes)
	interval := int64(l.cfg.IndexIntervalBytes)
	l.mu.Unlock()
	for _, g := range groupSegments(segs, maxSize, maxIndex, interval) {
		if err := c.cleanGroup(l, g, f, interval, st); err != nil {
			return err
		}
		st.Groups++
	}
	return writeCleanerCheckpoint(l.fs, l.dir, l.cfg.Topic, l.cfg.Partition, st.EndOffset)
}

// groupSegments is Kafka's groupSegmentsBySize: consecutive segments
// whose total size fits one segment, whose (estimated) index entries fit
// one index and whose offsets fit its 32-bit relative offsets.
func groupSegments(segs []segView, maxSize, maxIndex, interval int64) [][]segView {
	est := func(s segView) int64 { return (s.size/max(interval, 1) + 1) * timeIndexEntrySize }
	var out [][]segView
	for len(segs) > 0 {
		g := segs[:1]
		size, idx := segs[0].size, est(segs[0])
		for len(g) < len(segs) {
			n := segs[len(g)]
			if size+n.size > maxSize || idx+est(n) > maxIndex || (n.size > 0 && n.next-1-g[0].base > math.MaxInt32) {
				break
			}
			size, idx = size+n.size, idx+est(n)
			g = segs[:len(g)+1]
		}
		out = append(out, g)
		segs = segs[len(g):]
	}
	return out
}

// readBatches calls fn with every whole batch of the viewed segment, read
// into the cleaner's buffer (fn must not keep it). A batch that does not
// parse (length, magic, CRC) is an uncleanable error.
func (c *Cleaner) readBatches(l *Log, s segView, fn func(b []byte, h *kbatch.Header) (bool, error)) error {
	var hdr [kbatch.HeaderSize]byte
	for pos := int64(0); pos < s.size; {
		if c.stopped.Load() {
			return ErrCleanerStopped
		}
		if err := readFull(s.f, hdr[:], pos); err != nil {
			return c.readErr(l, s, pos, err)
		}
		h, _ := kbatch.ParseHeader(hdr[:])
		size := int64(h.Size())
		if size < kbatch.HeaderSize || pos+size > s.size || h.Magic != 2 {
			return uncleanable(l, h.BaseOffset, fmt.Errorf("bad batch header at position %d of segment %d", pos, s.base))
		}
		if int64(cap(c.readBuf)) < size {
			c.readBuf = make([]byte, size)
		}
		b := c.readBuf[:size]
		if err := readFull(s.f, b, pos); err != nil {
			return c.readErr(l, s, pos, err)
		}
		c.throttle.Done(size)
		if kbatch.CRC(b) != h.CRC {
			return uncleanable(l, h.BaseOffset, errors.New("CRC mismatch"))
		}
		more, err := fn(b, &h)
		if err != nil || !more {
			return err
		}
		pos += size
	}
	return nil
}

// readErr: a segment deleted under the clean (its file closed) aborts the
// clean; other read errors are returned.
func (c *Cleaner) readErr(l *Log, s segView, pos int64, err error) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, x := range l.segs {
		if x == s.s {
			return fmt.Errorf("storage: cleaner reading %s at %d: %w", s.s.path(logSuffix), pos, err)
		}
	}
	return errCleanAborted
}

// buildOffsetMap is Kafka's buildOffsetMap: the latest offset of every key
// of the dirty section's data batches, aborted transactional batches and
// markers excepted, until the map is full (it then ends at the last whole
// batch mapped).
func (c *Cleaner) buildOffsetMap(l *Log, p *cleanPlan, st *CleanStats) error {
	c.m.reset()
	aborted, err := l.AbortedTransactions(p.FirstDirty, p.FirstUncleanable, nil)
	if err != nil {
		return err
	}
	t := newTxnTracker(aborted)
	abortedPIDs := map[int64]bool{}
	consume := func(off int64) {
		for t.next < len(t.aborted) && t.aborted[t.next].FirstOffset <= off {
			abortedPIDs[t.aborted[t.next].ProducerID] = true
			t.next++
		}
	}
	lim := kbatch.Limits{MaxBatchBytes: c.cfg.MaxBatchBytes, Keep: true}
	start := p.FirstDirty
	for _, s := range p.segs[p.firstIdx:] {
		err := c.readBatches(l, s, func(b []byte, h *kbatch.Header) (bool, error) {
			if h.LastOffset() < start {
				return true, nil
			}
			consume(h.LastOffset())
			if h.IsControl() {
				if ctl, err := ParseControlBatch(b); err != nil {
					return false, uncleanable(l, h.BaseOffset, err)
				} else if ctl.Present && ctl.Type == kbatch.ControlAbort {
					delete(abortedPIDs, h.ProducerID)
				}
			} else if !(h.IsTransactional() && abortedPIDs[h.ProducerID]) {
				rr, err := kbatch.NewRecordReader(b, lim)
				if err != nil {
					return false, uncleanable(l, h.BaseOffset, err)
				}
				defer rr.Close()
				for {
					info, err := rr.Next()
					if err != nil {
						if err == io.EOF {
							break
						}
						return false, uncleanable(l, h.BaseOffset, err)
					}
					off := h.BaseOffset + int64(info.OffsetDelta)
					if info.KeyLen < 0 || off < start {
						continue
					}
					if c.m.full() {
						st.MapFull = true
						return false, nil
					}
					rec, err := rr.Record()
					if err != nil {
						return false, uncleanable(l, h.BaseOffset, err)
					}
					c.m.put(rec.Key, off)
				}
			}
			c.m.latest = h.LastOffset()
			return true, nil
		})
		if err != nil {
			return err
		}
		if st.MapFull {
			break
		}
	}
	return nil
}

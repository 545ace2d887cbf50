package storage

import (
	"fmt"
	"math"
	"path"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/verbatim-kafka/verbatim/budget"
)

// Defaults, as Kafka's broker defaults.
const (
	DefaultSegmentBytes       = 1 << 30              // segment.bytes
	DefaultSegmentMs          = 7 * 24 * 3600 * 1000 // segment.ms
	DefaultSegmentIndexBytes  = 10 << 20             // segment.index.bytes
	DefaultIndexIntervalBytes = 4096                 // index.interval.bytes
	DefaultRetentionMs        = 7 * 24 * 3600 * 1000 // retention.ms
	DefaultFlushInterval      = time.Second
	DefaultFileDeleteDelay    = time.Minute // file.delete.delay.ms
)

// Config configures a Log. The zero value of a field means its default.
type Config struct {
	// Topic and Partition name the log-start-offset checkpoint entry. When
	// Topic is empty they are derived from the directory name
	// "<topic>-<partition>", as Kafka names partition directories.
	Topic     string
	Partition int32

	// SegmentBytes rolls a segment before it would exceed this size.
	SegmentBytes int64
	// SegmentMs rolls a segment when the new batch's timestamp is this much
	// later than the segment's first batch (or, without timestamps, when the
	// segment is this old), minus SegmentJitterMs.
	SegmentMs       int64
	SegmentJitterMs int64
	// SegmentIndexBytes bounds each index file; a full index rolls.
	SegmentIndexBytes int
	// IndexIntervalBytes is the spacing of offset index entries.
	IndexIntervalBytes int

	// RetentionMs deletes segments whose largest timestamp is older; -1
	// keeps them forever. RetentionBytes deletes the oldest segments while
	// the log is larger; 0 (default) or -1 means unlimited.
	RetentionMs    int64
	RetentionBytes int64

	// Flush is the durability policy; FlushInterval is its period under
	// FlushInterval.
	Flush         FlushPolicy
	FlushInterval time.Duration

	// FileDeleteDelay is how long the file of a deleted segment stays open
	// for reads in progress (file.delete.delay.ms, default one minute).
	FileDeleteDelay time.Duration

	// NowMs is the clock in Unix milliseconds (tests set it).
	NowMs func() int64

	// OnOffline, when set, is called once when the partition goes
	// offline (a failed sync or an I/O error that cannot be undone, on
	// the append path or in background work), with the error operations
	// now return. It runs under the log's lock: it must only record or
	// log, never call the Log.
	OnOffline func(err error)

	// OnFlush, when set, is called after each fsync of the active
	// segment's log file (the group commit under FlushAlways, the
	// interval flush, Flush) with how long the fsync took. It must only
	// record, never call the Log.
	OnFlush func(d time.Duration)

	// DecodeBudget, when set, is charged before a read looks inside a
	// batch (timestamp lookups): the batch bytes read and the
	// decompressor's working memory (kbatch.WorkingSet). Lookups wait
	// for it, so concurrent ones queue instead of growing memory.
	DecodeBudget *budget.Budget
}

func (c *Config) withDefaults(dir string) Config {
	out := *c
	if out.SegmentBytes <= 0 {
		out.SegmentBytes = DefaultSegmentBytes
	}
	if out.SegmentBytes > math.MaxInt32 {
		out.SegmentBytes = math.MaxInt32 // positions are int32 in the index
	}
	if out.SegmentMs <= 0 {
		out.SegmentMs = DefaultSegmentMs
	}
	if out.SegmentIndexBytes <= 0 {
		out.SegmentIndexBytes = DefaultSegmentIndexBytes
	}
	if out.SegmentIndexBytes < timeIndexEntrySize {
		out.SegmentIndexBytes = timeIndexEntrySize
	}
	if out.IndexIntervalBytes <= 0 {
		out.IndexIntervalBytes = DefaultIndexIntervalBytes
	}
	if out.RetentionMs == 0 {
		out.RetentionMs = DefaultRetentionMs
	}
	if out.RetentionBytes == 0 {
		out.RetentionBytes = -1
	}
	if out.FlushInterval <= 0 {
		out.FlushInterval = DefaultFlushInterval
	}
	if out.FileDeleteDelay <= 0 {
		out.FileDeleteDelay = DefaultFileDeleteDelay
	}
	if out.NowMs == nil {
		out.NowMs = func() int64 { return time.Now().UnixMilli() }
	}
	if out.Topic == "" {
		base := path.Base(dir)
		if i := strings.LastIndexByte(base, '-'); i > 0 {
			if p, err := strconv.ParseInt(base[i+1:], 10, 32); err == nil {
				out.Topic, out.Partition = base[:i], int32(p)
			}
		}
		if out.Topic == "" {
			out.Topic = base
		}
	}
	return out
}

// Log is one partition's durable log in Kafka's on-disk format.
//
// Concurrency: every method is safe for concurrent use; appends are
// serialised by an internal mutex (the broker should still give each
// partition one owner that orders its appends). A background goroutine
// syncs rolled segments, and performs group-committed syncs under
// FlushAlways and periodic syncs under FlushInterval.
//
// Offsets: LogStartOffset <= every stored offset < LogEndOffset. The log
// end offset (LEO) is the offset after the last stored batch (or the base
// offset of the active segment when it is empty). Single node: the high
// watermark equals the LEO (every append is "fully replicated" as soon as
// it is written; with FlushAlways the broker acknowledges acks=all only
// after durability).
type Log struct {
	fs  FS
	dir string
	cfg Config

	// syncMu serialises syncs with operations that close or replace
	// segment files, so a sync never runs on a file being closed.
	// Lock order: syncMu before mu.
	syncMu sync.Mutex

	mu       sync.Mutex
	segs     []*segment // by base offset; the last one is active
	logStart int64
	leo      int64
	failed   error // non-nil: offline
	closed   bool

	// The flusher reads these without l.mu so that a sync never waits for
	// an append in progress: written is the log end after the last
	// completed write, syncSeg the active segment. Stores happen under
	// l.mu; written is stored after syncSeg changes (see syncActive).
	written atomic.Int64
	syncSeg atomic.Pointer[segment]
	// Rolled segments not yet synced, oldest first (guarded by mu; taken
	// by whoever syncs, under syncMu), their count for the flusher's
	// lock-free check, and the flusher's scratch copy (guarded by syncMu).
	unflushed  []unflushedSeg
	nUnflushed atomic.Int32
	flushBuf   []unflushedSeg
	// rollRecord lists the rolled segments not known durable (synced or
	// not yet: taken entries stay until the recovery point passes them),
	// as the rolled-segments file records them (guarded by mu).
	rollRecord []unflushedSeg
	rolledBuf  []byte // encoding scratch for the rolled-segments file (guarded by mu)

	// recoveryPoint is the first offset not known durable (stored under
	// syncMu; see recoverypoint.go); persistedRP is the value in the
	// checkpoint file (guarded by syncMu).
	recoveryPoint atomic.Int64
	persistedRP   int64

	// holdBackground stops the background syncs under FlushNever and
	// FlushInterval (tests use it to crash with rolled segments unsynced).
	holdBackground atomic.Bool

	// dmu guards the durability state. Lock order: syncMu, mu, dmu.
	dmu     sync.Mutex
	durable int64 // every offset below is durable (under the policy's syncs)
	dfailed error // copy of failed for waiters
	dclosed bool

	epochs   *EpochCache
	producer producerHooks

	// group commit (flush.go)
	wake        chan struct{}
	stop        chan struct{}
	done        chan struct{}
	waiters     []durableWaiter
	durableCond sync.Cond

	// scratch buffer for identical-retry comparisons (guarded by mu)
	cmpBuf []byte

	// log files of deleted segments kept open for readers (guarded by mu)
	pendingClose []File

	// The cleaner's state (cleaner.go, guarded by mu): a clean in
	// progress, and the decode error that made the partition uncleanable.
	cleaning    bool
	uncleanable error
}

// Dir returns the partition directory.
func (l *Log) Dir() string { return l.dir }

// Config returns the effective configuration (defaults filled in).
func (l *Log) Config() Config {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.cfg
}

func (l *Log) active() *segment { return l.segs[len(l.segs)-1] }

// checkLocked returns the error that refuses operations. REQUIRES: l.mu.
func (l *Log) checkLocked() error {
	if l.closed {
		return ErrClosed
	}
	if l.failed != nil {
		return l.failed
	}
	return nil
}

// lockRewrite takes syncMu, then mu: what a change of the segments
// themselves (truncation, retention, a cleaned segment swapped in) holds,
// so that neither a sync nor an append runs meanwhile. It returns with no
// lock held when the log refuses operations (checkLocked); otherwise the
// caller releases both with unlockRewrite.
func (l *Log) lockRewrite() error {
	l.syncMu.Lock()
	l.mu.Lock()
	if err := l.checkLocked(); err != nil {
		l.unlockRewrite()
		return err
	}
	return nil
}

func (l *Log) unlockRewrite() {
	l.mu.Unlock()
	l.syncMu.Unlock()
}

// failLocked takes the partition offline. REQUIRES: l.mu.
func (l *Log) failLocked(op string, cause error) error {
	if l.failed == nil {
		l.failed = fmt.Errorf("%w: %s in %s: %v", ErrOffline, op, l.dir, cause)
		l.dmu.Lock()
		l.dfailed = l.failed
		l.fireWaiters()
		l.dmu.Unlock()
		l.signal()
		if l.cfg.OnOffline != nil {
			l.cfg.OnOffline(l.failed)
		}
	}
	return l.failed
}

// Offline returns the error that took the partition offline, or nil.
func (l *Log) Offline() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.failed
}

// LogStartOffset is the first offset a reader may ask for.
func (l *Log) LogStartOffset() int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.logStart
}

// LogEndOffset is the offset after the last stored batch.
func (l *Log) LogEndOffset() int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.leo
}

// HighWatermark equals LogEndOffset on a single node (see Log).
func (l *Log) HighWatermark() int64 { return l.LogEndOffset() }

// DurableOffset is the offset below which everything has been synced.
func (l *Log) DurableOffset() int64 {
	l.dmu.Lock()
	defer l.dmu.Unlock()
	return l.durable
}

// Size returns the total bytes of all segments.
func (l *Log) Size() int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	var n int64
	for _, s := range l.segs {
		n += s.size
	}
	return n
}

// NumSegments returns the number of segments.
func (l *Log) NumSegments() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.segs)
}

// EpochCache exposes the leader-epoch cache (read-only use:
// OffsetForLeaderEpoch answers, latest epoch).
func (l *Log) EpochCache() *EpochCache { return l.epochs }

// EndOffsetForEpoch answers OffsetForLeaderEpoch: the epoch to report and
// its end offset, Kafka's endOffsetFor semantics.
func (l *Log) EndOffsetForEpoch(epoch int32) (int32, int64, error) {
	l.mu.Lock()
	leo, err := l.leo, l.checkLocked()
	l.mu.Unlock()
	if err != nil {
		return UndefinedEpoch, UndefinedEpochOffset, err
	}
	e, off := l.epochs.EndOffsetFor(epoch, leo)
	return e, off, nil
}

// Close stops the flusher, writes the indexes, syncs everything (rolled
// segments not yet synced included), records the recovery point at the log
// end, takes a producer-state snapshot and closes the files. A Log that is
// offline still closes its files (and returns the offline error).
func (l *Log) Close() error {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return ErrClosed
	}
	l.mu.Unlock()
	l.stopFlusher()

	l.syncMu.Lock()
	defer l.syncMu.Unlock()
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed { // a concurrent Close won
		return ErrClosed
	}
	err := l.failed
	if err == nil {
		a := l.active()
		a.onRoll()
		l.flushBuf = l.takeUnflushedLocked(l.flushBuf[:0])
		if e := l.syncRolled(l.flushBuf, true); e != nil {
			err = e
		} else if e := a.syncIndexes(); e != nil {
			err = l.failLocked("index sync on close", e)
		} else if e := a.log.Sync(); e != nil {
			err = l.failLocked("sync on close", e)
		} else if e := a.txn.Flush(); e != nil {
			err = l.failLocked("transaction index sync on close", e)
		} else {
			l.setDurable(l.leo)
			l.recoveryPoint.Store(l.leo)
			if e := l.persistRecoveryPoint(); e != nil {
				err = l.failLocked("recovery point on close", e)
			} else if e := l.producer.snapshot(l.leo); e != nil {
				err = l.failLocked("producer snapshot on close", e)
			} else if e := AtomicWriteFile(l.fs, l.dir+"/"+cleanShutdownFile, nil); e != nil {
				err = l.failLocked("clean shutdown marker", e)
			}
		}
	}
	for _, s := range l.segs {
		if e := s.closeFiles(); e != nil && err == nil {
			err = e
		}
		if s.txn != nil {
			s.txn.Close()
		}
	}
	for _, f := range l.pendingClose {
		f.Close()
	}
	l.pendingClose = nil
	l.closed = true
	l.dmu.Lock()
	l.dclosed = true
	l.fireWaiters()
	l.dmu.Unlock()
	return err
}

// segmentFor returns the index of the last segment with base <= offset,
// or -1. REQUIRES: l.mu.
func (l *Log) segmentFor(offset int64) int {
	lo, hi := 0, len(l.segs)-1
	best := -1
	for lo <= hi {
		mid := int(uint(lo+hi) >> 1)
		if l.segs[mid].base <= offset {
			best = mid
			lo = mid + 1
		} else {
			hi = mid - 1
		}
	}
	return best
}

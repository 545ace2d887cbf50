package storage

import (
	"fmt"
	"time"
)

// FlushPolicy is the durability policy of a Log (`--flush`).
type FlushPolicy int

const (
	// FlushNever leaves data in the page cache, Kafka's default: a rolled
	// segment is synced by the flusher goroutine after the next segment
	// has started (appends do not wait for it), then the recovery point
	// advances; Flush and Close sync everything.
	FlushNever FlushPolicy = iota
	// FlushInterval syncs the active segment every Config.FlushInterval
	// when something was written; rolled segments as under FlushNever.
	FlushInterval
	// FlushAlways group-commits: a sync starts as soon as the previous one
	// finishes and covers everything appended meanwhile. Callers learn
	// about durability through OnDurable / WaitDurable.
	FlushAlways
)

func (p FlushPolicy) String() string {
	switch p {
	case FlushNever:
		return "never"
	case FlushInterval:
		return "interval"
	case FlushAlways:
		return "always"
	}
	return fmt.Sprintf("FlushPolicy(%d)", int(p))
}

// ParseFlushPolicy parses "never", "interval" or "always".
func ParseFlushPolicy(s string) (FlushPolicy, error) {
	switch s {
	case "never":
		return FlushNever, nil
	case "interval":
		return FlushInterval, nil
	case "always":
		return FlushAlways, nil
	}
	return 0, fmt.Errorf("storage: unknown flush policy %q (want never, interval or always)", s)
}

// durableWaiter is a callback waiting for offsets below upTo to be durable.
type durableWaiter struct {
	upTo int64
	fn   func(error)
}

// OnDurable calls fn once every offset below upTo is durable (fn(nil)), or
// when that can no longer happen (fn with ErrOffline or ErrClosed). fn runs
// on the flusher goroutine (or inline when already decided) while an
// internal lock is held: it must be short, must not block and must not
// call into the Log. Pass LastOffset+1 of an AppendResult as upTo.
//
// Under FlushNever and FlushInterval durability comes only from the
// background sync of rolled segments, intervals, Flush and Close; brokers
// acknowledge on write under those policies. Registering a preallocated fn does not allocate in steady state.
func (l *Log) OnDurable(upTo int64, fn func(error)) {
	l.dmu.Lock()
	if err := l.dcheck(); err != nil {
		l.dmu.Unlock()
		fn(err)
		return
	}
	if l.durable >= upTo {
		l.dmu.Unlock()
		fn(nil)
		return
	}
	l.waiters = append(l.waiters, durableWaiter{upTo: upTo, fn: fn})
	l.dmu.Unlock()
	l.signal()
}

// WaitDurable blocks until every offset below upTo is durable, or returns
// the error that prevents it (ErrOffline, ErrClosed).
func (l *Log) WaitDurable(upTo int64) error {
	l.dmu.Lock()
	defer l.dmu.Unlock()
	for l.durable < upTo {
		if err := l.dcheck(); err != nil {
			return err
		}
		l.signal()
		l.durableCond.Wait()
	}
	return nil
}

// dcheck is checkLocked for durability waiters. REQUIRES: l.dmu.
func (l *Log) dcheck() error {
	if l.dfailed != nil {
		return l.dfailed
	}
	if l.dclosed {
		return ErrClosed
	}
	return nil
}

// Flush syncs everything written so far (rolled segments, the active
// segment's log and transaction index), advances the recovery point to the
// log end it saw and records it, and returns when that is durable.
func (l *Log) Flush() error {
	l.syncMu.Lock()
	defer l.syncMu.Unlock()
	return l.syncActive(true)
}

// unflushedSeg is a rolled segment whose files have not been synced yet.
// The .log handle is taken at the roll (under l.mu) so that the flusher
// never reads segment fields that readers may change; it stays open until
// the segment is deleted, which requires l.syncMu and drops the entry. The
// index files are opened by name to be synced (segment.syncIndexFiles).
type unflushedSeg struct {
	log File
	txn *TxnIndex
	seg *segment
	// upTo is the recovery point once this segment and every one before
	// it are durable: the segment's end offset. size is its final size.
	upTo, size int64
}

// pushUnflushedLocked hands the segment that stops being active to the
// flusher. It must run before the next segment is published in syncSeg
// (see syncActive). REQUIRES: l.mu.
func (l *Log) pushUnflushedLocked(s *segment) {
	e := unflushedSeg{log: s.log, txn: s.txn, seg: s, upTo: s.next, size: s.size}
	l.unflushed = append(l.unflushed, e)
	l.nUnflushed.Store(int32(len(l.unflushed)))
	l.rollRecord = append(l.rollRecord, e)
}

// popUnflushedLocked undoes the last pushUnflushedLocked. REQUIRES: l.mu.
func (l *Log) popUnflushedLocked() {
	s := l.unflushed[len(l.unflushed)-1].seg
	l.unflushed[len(l.unflushed)-1] = unflushedSeg{}
	l.unflushed = l.unflushed[:len(l.unflushed)-1]
	l.nUnflushed.Store(int32(len(l.unflushed)))
	l.rollRecord = dropSeg(l.rollRecord, s)
}

// dropUnflushedLocked forgets the entry of a segment that is deleted or
// active again (truncation). REQUIRES: l.syncMu, l.mu.
func (l *Log) dropUnflushedLocked(s *segment) {
	l.unflushed = dropSeg(l.unflushed, s)
	l.nUnflushed.Store(int32(len(l.unflushed)))
	l.rollRecord = dropSeg(l.rollRecord, s)
}

func dropSeg(list []unflushedSeg, s *segment) []unflushedSeg {
	kept := list[:0]
	for _, e := range list {
		if e.seg != s {
			kept = append(kept, e)
		}
	}
	clear(list[len(kept):])
	return kept
}

// takeUnflushed moves the rolled segments waiting for a sync into the
// flusher's scratch slice. REQUIRES: l.syncMu (not l.mu).
func (l *Log) takeUnflushed() []unflushedSeg {
	if l.nUnflushed.Load() == 0 {
		return nil
	}
	l.mu.Lock()
	l.flushBuf = l.takeUnflushedLocked(l.flushBuf[:0])
	l.mu.Unlock()
	return l.flushBuf
}

// takeUnflushedLocked appends the waiting entries to dst and empties the
// list. REQUIRES: l.syncMu, l.mu.
func (l *Log) takeUnflushedLocked(dst []unflushedSeg) []unflushedSeg {
	dst = append(dst, l.unflushed...)
	clear(l.unflushed)
	l.unflushed = l.unflushed[:0]
	l.nUnflushed.Store(0)
	return dst
}

// syncRolled syncs the files of rolled segments, oldest first, and raises
// the recovery point over them. A failure takes the partition offline.
// REQUIRES: l.syncMu; not l.mu when locked is false.
func (l *Log) syncRolled(rolled []unflushedSeg, locked bool) error {
	for i := range rolled {
		e := &rolled[i]
		if e.log != nil {
			if err := e.log.Sync(); err != nil {
				return l.failMaybeLocked(locked, "sync of rolled segment", err)
			}
		}
		if err := e.seg.syncIndexFiles(); err != nil {
			return l.failMaybeLocked(locked, "index sync of rolled segment", err)
		}
		if err := e.txn.Flush(); err != nil {
			return l.failMaybeLocked(locked, "transaction index sync of rolled segment", err)
		}
		l.raiseRecoveryPoint(e.upTo)
		*e = unflushedSeg{}
	}
	return nil
}

// failMaybeLocked is failLocked, taking l.mu unless the caller holds it.
func (l *Log) failMaybeLocked(locked bool, op string, err error) error {
	if !locked {
		l.mu.Lock()
		defer l.mu.Unlock()
	}
	return l.failLocked(op, err)
}

// flushRolled is the background work under FlushNever and FlushInterval
// after a roll: sync the rolled segments, then record the recovery point
// and publish the durable offset. REQUIRES: l.syncMu (not l.mu).
func (l *Log) flushRolled() error {
	if l.nUnflushed.Load() == 0 {
		return nil
	}
	l.mu.Lock()
	if l.holdBackground.Load() {
		// Checked under l.mu: a roll that a test makes after setting
		// the hold is never taken.
		l.mu.Unlock()
		return nil
	}
	l.flushBuf = l.takeUnflushedLocked(l.flushBuf[:0])
	l.mu.Unlock()
	rolled := l.flushBuf
	if err := l.syncRolled(rolled, false); err != nil {
		return err
	}
	if err := l.persistRecoveryPoint(); err != nil {
		return l.failMaybeLocked(false, "recovery point", err)
	}
	l.setDurable(l.recoveryPoint.Load())
	return nil
}

// signal wakes the flusher without blocking.
func (l *Log) signal() {
	select {
	case l.wake <- struct{}{}:
	default:
	}
}

func (l *Log) startFlusher() {
	l.wake = make(chan struct{}, 1)
	l.stop = make(chan struct{})
	l.done = make(chan struct{})
	go l.flushLoop()
}

func (l *Log) stopFlusher() {
	select {
	case <-l.stop:
	default:
		close(l.stop)
	}
	<-l.done
}

// flushLoop is the group commit and the background sync of rolled
// segments. Under FlushAlways each wake-up syncs the rolled segments not
// yet synced and the active segment once, covering every append completed
// before the sync started; appends completed during the sync are covered by
// the next one, which starts right after. No timer is involved. Under the
// other policies a wake-up (a roll) syncs only the rolled segments.
func (l *Log) flushLoop() {
	defer close(l.done)
	var tick <-chan time.Time
	if l.cfg.Flush == FlushInterval {
		t := time.NewTicker(l.cfg.FlushInterval)
		defer t.Stop()
		tick = t.C
	}
	for {
		select {
		case <-l.stop:
			return
		case <-l.wake:
			if l.cfg.Flush != FlushAlways {
				// A roll (or recovery) left segments to sync; the active
				// segment waits for the interval, Flush or Close.
				l.syncMu.Lock()
				_ = l.flushRolled() // a failure takes the log offline
				l.syncMu.Unlock()
				continue
			}
		case <-tick:
			if l.holdBackground.Load() {
				continue
			}
		}
		l.syncMu.Lock()
		_ = l.syncActive(false) // a failure takes the log offline and fires waiters
		l.syncMu.Unlock()
	}
}

// syncActive syncs the rolled segments not yet synced and the active
// segment's log file, and publishes the new durable offset. With full (Flush)
// it also syncs the active segment's transaction index and records the
// recovery point at the synced end. It does not take l.mu unless segments
// rolled or the sync fails, so appends proceed during the sync.
//
// Ordering: the log end is read first, then the active segment, then the
// list of rolled segments. A roll puts the old segment on that list before
// it publishes the new segment in syncSeg, and writes to the new segment
// are counted in written only after that; so every byte below the end read
// first lies in a segment already durable, on the list, or the one read
// second. REQUIRES: l.syncMu (not l.mu).
func (l *Log) syncActive(full bool) error {
	target := l.written.Load()
	seg := l.syncSeg.Load()
	rolled := l.takeUnflushed()
	l.dmu.Lock()
	if err := l.dcheck(); err != nil {
		l.fireWaiters()
		l.dmu.Unlock()
		return err
	}
	if target <= l.durable && len(rolled) == 0 && !(full && l.recoveryPoint.Load() < target) {
		l.fireWaiters()
		l.dmu.Unlock()
		return nil
	}
	l.dmu.Unlock()

	if err := l.syncRolled(rolled, false); err != nil {
		return err
	}
	start := time.Now()
	err := seg.flushLog.Sync()
	if l.cfg.OnFlush != nil {
		l.cfg.OnFlush(time.Since(start))
	}
	if err != nil && !seg.retired.Load() {
		// (A retired segment was empty: everything below target is in
		// the segments before it, durable already or synced above.)
		return l.failMaybeLocked(false, "sync", err)
	}
	if full && !seg.retired.Load() {
		if err := seg.txn.Flush(); err != nil {
			return l.failMaybeLocked(false, "transaction index sync", err)
		}
		l.raiseRecoveryPoint(target)
	}
	if full || len(rolled) > 0 {
		if err := l.persistRecoveryPoint(); err != nil {
			return l.failMaybeLocked(false, "recovery point", err)
		}
	}
	l.setDurable(target)
	return nil
}

// setDurable raises the durable offset and fires the waiters it satisfies.
func (l *Log) setDurable(off int64) {
	l.dmu.Lock()
	if off > l.durable {
		l.durable = off
	}
	l.fireWaiters()
	l.dmu.Unlock()
}

// fireWaiters calls the callbacks whose offsets are durable, or all of
// them with the failure when the log is offline or closed, and wakes
// WaitDurable callers. REQUIRES: l.dmu.
func (l *Log) fireWaiters() {
	l.durableCond.Broadcast()
	if len(l.waiters) == 0 {
		return
	}
	err := l.dcheck()
	kept := l.waiters[:0]
	for _, w := range l.waiters {
		switch {
		case err != nil:
			w.fn(err)
		case w.upTo <= l.durable:
			w.fn(nil)
		default:
			kept = append(kept, w)
		}
	}
	for i := len(kept); i < len(l.waiters); i++ {
		l.waiters[i] = durableWaiter{}
	}
	l.waiters = kept
}

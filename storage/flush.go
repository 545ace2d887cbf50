package storage

import (
	"fmt"
	"time"
)

// FlushPolicy is the durability policy of a Log (`--flush`).
type FlushPolicy int

const (
	// FlushNever leaves data in the page cache, Kafka's default: the log
	// syncs only when a segment rolls, on Flush and on Close, plus a
	// background sync each time the active segment grows by an eighth of
	// the segment size (at most 128 MiB) so that rolls stay short.
	FlushNever FlushPolicy = iota
	// FlushInterval syncs the active segment every Config.FlushInterval
	// when something was written.
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
// Under FlushNever and FlushInterval durability comes only from rolls,
// intervals, Flush and Close; brokers acknowledge on write under those
// policies. Registering a preallocated fn does not allocate in steady state.
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

// Flush syncs everything written so far and returns when it is durable.
func (l *Log) Flush() error {
	l.syncMu.Lock()
	defer l.syncMu.Unlock()
	return l.syncActive()
}

// presyncBytes is how much a segment grows between background syncs under
// FlushNever and FlushInterval: a roll syncs the segment before the next
// one starts (see rollLocked), and syncing in the background as it fills
// keeps the data left for that synchronous sync, and so the roll's pause,
// small. An eighth of the segment size, at most 128 MiB.
func presyncBytes(segmentBytes int64) int64 {
	n := segmentBytes / 8
	if n > 128<<20 {
		n = 128 << 20
	}
	if n < 1<<20 {
		n = 1 << 20
	}
	return n
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

// flushLoop is the group commit. Under FlushAlways each wake-up syncs the
// active segment once, covering every append completed before the sync
// started; appends completed during the sync are covered by the next one,
// which starts right after. No timer is involved.
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
			if l.cfg.Flush != FlushAlways && !l.presync.Swap(false) {
				// Waiters under other policies are woken by rolls,
				// intervals, Flush and Close.
				continue
			}
		case <-tick:
		}
		l.syncMu.Lock()
		_ = l.syncActive() // a failure takes the log offline and fires waiters
		l.syncMu.Unlock()
	}
}

// syncActive syncs the active segment's log file and publishes the new
// durable offset. It does not take l.mu unless the sync fails, so appends
// proceed during the sync. The log end is read before the active segment:
// a roll makes the old segment durable and switches syncSeg before any
// write to the new segment is counted in written, so the segment read
// second holds every byte below the end read first that is not durable
// already. REQUIRES: l.syncMu (not l.mu).
func (l *Log) syncActive() error {
	target := l.written.Load()
	seg := l.syncSeg.Load()
	l.dmu.Lock()
	if err := l.dcheck(); err != nil {
		l.fireWaiters()
		l.dmu.Unlock()
		return err
	}
	if target <= l.durable {
		l.fireWaiters()
		l.dmu.Unlock()
		return nil
	}
	l.dmu.Unlock()

	if err := seg.log.Sync(); err != nil && !seg.retired.Load() {
		// (A retired segment was empty: everything below target is in
		// the segments before it, synced when it was created.)
		l.mu.Lock()
		defer l.mu.Unlock()
		return l.failLocked("sync", err)
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

package storage

import (
	"fmt"
	"time"
)

// FlushPolicy is the durability policy of a Log (`--flush`).
type FlushPolicy int

const (
	// FlushNever leaves data in the page cache, Kafka's default: the log
	// syncs only when a segment rolls, on Flush and on Close.
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
// on the flusher goroutine (or inline when already decided) and must not
// block or call back into the Log's append methods. Pass LastOffset+1 of an
// AppendResult as upTo.
//
// Under FlushNever and FlushInterval durability comes only from rolls,
// intervals, Flush and Close; brokers acknowledge on write under those
// policies. Registering a preallocated fn does not allocate in steady state.
func (l *Log) OnDurable(upTo int64, fn func(error)) {
	l.mu.Lock()
	if err := l.checkLocked(); err != nil {
		l.mu.Unlock()
		fn(err)
		return
	}
	if l.durable >= upTo {
		l.mu.Unlock()
		fn(nil)
		return
	}
	l.waiters = append(l.waiters, durableWaiter{upTo: upTo, fn: fn})
	l.mu.Unlock()
	l.signal()
}

// WaitDurable blocks until every offset below upTo is durable, or returns
// the error that prevents it (ErrOffline, ErrClosed).
func (l *Log) WaitDurable(upTo int64) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	for l.durable < upTo {
		if err := l.checkLocked(); err != nil {
			return err
		}
		l.signal()
		l.durableCond.Wait()
	}
	return nil
}

// Flush syncs everything written so far and returns when it is durable.
func (l *Log) Flush() error {
	l.syncMu.Lock()
	defer l.syncMu.Unlock()
	return l.syncActive()
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
	l.durableCond.L = &l.mu
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
// active segment once, covering every append made before the sync
// started; appends made during the sync are covered by the next one, which
// starts right after. No timer is involved.
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
				// Waiters under other policies are woken by rolls,
				// intervals, Flush and Close; a failure fires them below.
				l.mu.Lock()
				if l.failed != nil {
					l.fireWaitersLocked(true)
				}
				l.mu.Unlock()
				continue
			}
		case <-tick:
		}
		l.syncMu.Lock()
		_ = l.syncActive() // failures take the log offline and fire waiters
		l.syncMu.Unlock()
	}
}

// syncActive syncs the active segment's log file and publishes the new
// durable offset. REQUIRES: l.syncMu (not l.mu).
func (l *Log) syncActive() error {
	l.mu.Lock()
	if err := l.checkLocked(); err != nil {
		l.fireWaitersLocked(true)
		l.mu.Unlock()
		return err
	}
	target := l.leo
	if target <= l.durable {
		l.fireWaitersLocked(false)
		l.mu.Unlock()
		return nil
	}
	f := l.active().log
	l.mu.Unlock()

	err := f.Sync()

	l.mu.Lock()
	defer l.mu.Unlock()
	if err != nil {
		return l.failLocked("sync", err)
	}
	if target > l.durable {
		l.durable = target
	}
	l.fireWaitersLocked(false)
	return nil
}

// fireWaitersLocked calls the callbacks whose offsets are durable, or all
// of them with the failure when the log is offline or closed (all=true
// with a nil error means closed). Callbacks run under l.mu, so they must be
// short and must not call into the Log. REQUIRES: l.mu.
func (l *Log) fireWaitersLocked(all bool) {
	l.durableCond.Broadcast()
	if len(l.waiters) == 0 {
		return
	}
	err := l.failed
	if err == nil && l.closed {
		err = ErrClosed
	}
	if all && err == nil {
		err = ErrClosed
	}
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

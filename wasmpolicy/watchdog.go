package wasmpolicy

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// Deadlines without a timer per call. A judge call runs under its
// instance's callContext, whose Done channel a single watchdog goroutine
// per Host closes once the call has run longer than CallTimeout; wazero
// (WithCloseOnContextDone) then stops the guest at its next loop back-edge
// or function entry. A fired context is never reused: the instance that
// overran is discarded. This keeps the per-call price at two atomic
// stores instead of a context.WithDeadline (a timer and 4 allocations).
// The deadline is enforced with a resolution of CallTimeout/4.

// callContext is an instance's reusable context for judge calls.
type callContext struct {
	vals    context.Context // carries the guestState
	done    chan struct{}
	fired   atomic.Bool
	started atomic.Int64 // nanoseconds since hostStart when the call began; 0 when idle
}

func newCallContext(vals context.Context) *callContext {
	return &callContext{vals: vals, done: make(chan struct{})}
}

func (c *callContext) Deadline() (time.Time, bool) { return time.Time{}, false }
func (c *callContext) Done() <-chan struct{}       { return c.done }
func (c *callContext) Value(k any) any             { return c.vals.Value(k) }
func (c *callContext) Err() error {
	if c.fired.Load() {
		return context.DeadlineExceeded
	}
	return nil
}

// begin marks a call begun at now (hostStart's monotonic clock: no clock
// read here).
func (c *callContext) begin(now time.Time) { c.started.Store(max(int64(now.Sub(hostStart)), 1)) }
func (c *callContext) end()                { c.started.Store(0) }

func (c *callContext) expire() {
	if c.fired.CompareAndSwap(false, true) {
		close(c.done)
	}
}

// watchdog expires the calls that overran.
type watchdog struct {
	timeout time.Duration
	stop    chan struct{}
	mu      struct {
		sync.Mutex
		calls map[*callContext]struct{}
	}
}

func newWatchdog(timeout time.Duration) *watchdog {
	w := &watchdog{timeout: timeout, stop: make(chan struct{})}
	w.mu.calls = map[*callContext]struct{}{}
	go w.run()
	return w
}

func (w *watchdog) add(c *callContext) {
	w.mu.Lock()
	w.mu.calls[c] = struct{}{}
	w.mu.Unlock()
}

func (w *watchdog) remove(c *callContext) {
	w.mu.Lock()
	delete(w.mu.calls, c)
	w.mu.Unlock()
}

func (w *watchdog) close() { close(w.stop) }

func (w *watchdog) run() {
	every(w.stop, max(w.timeout/4, time.Millisecond), func() {
		now := int64(time.Since(hostStart))
		w.mu.Lock()
		for c := range w.mu.calls {
			if s := c.started.Load(); s != 0 && now-s > int64(w.timeout) {
				c.expire()
			}
		}
		w.mu.Unlock()
	})
}

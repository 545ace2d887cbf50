package budget

import (
	"context"
	"errors"
	"fmt"
	"sync"
)

// ErrOverLimit is returned by Acquire for more bytes than the limit: they
// could never fit.
var ErrOverLimit = errors.New("budget: request over the limit")

// ErrClosed is returned by Acquire once the budget is closed.
var ErrClosed = errors.New("budget: closed")

// Budget is a byte semaphore: Acquire blocks until the bytes fit under the
// limit. Waiters are served in arrival order, so a large frame is not
// starved by a stream of small ones.
type Budget struct {
	mu      sync.Mutex
	limit   int64
	used    int64
	closed  bool
	waiters []*budgetWaiter
	waits   uint64 // Acquire calls that had to queue
}

type budgetWaiter struct {
	n       int64
	granted bool // set under Budget.mu before ready is closed
	ready   chan struct{}
}

// New returns a budget of limit bytes (limit > 0).
func New(limit int64) *Budget {
	if limit <= 0 {
		panic(fmt.Sprintf("budget: limit %d must be positive", limit))
	}
	return &Budget{limit: limit}
}

// Limit returns the budget's limit; InUse the bytes currently acquired.
func (b *Budget) Limit() int64 { return b.limit }

func (b *Budget) InUse() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.used
}

// Waiting returns the number of Acquire calls queued now; Waits the number
// that ever had to queue. Tests and metrics read them to show who waited.
func (b *Budget) Waiting() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.waiters)
}

func (b *Budget) Waits() uint64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.waits
}

// Acquire takes n bytes, blocking until they fit or ctx ends. n larger than
// the limit can never fit and returns ErrOverLimit.
func (b *Budget) Acquire(ctx context.Context, n int64) error {
	if n > b.limit {
		return fmt.Errorf("%w: %d bytes over a budget of %d", ErrOverLimit, n, b.limit)
	}
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return ErrClosed
	}
	if len(b.waiters) == 0 && b.used+n <= b.limit {
		b.used += n
		b.mu.Unlock()
		return nil
	}
	w := &budgetWaiter{n: n, ready: make(chan struct{})}
	b.waiters = append(b.waiters, w)
	b.waits++
	b.mu.Unlock()
	select {
	case <-w.ready:
		if w.granted {
			return nil
		}
		return ErrClosed
	case <-ctx.Done():
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if w.granted {
		// Granted while we were giving up: keep the grant, the caller
		// sees success and releases as usual.
		return nil
	}
	for i, x := range b.waiters {
		if x == w {
			b.waiters = append(b.waiters[:i], b.waiters[i+1:]...)
			break
		}
	}
	if b.closed {
		return ErrClosed
	}
	b.grantLocked() // our departure may unblock the next waiter
	return ctx.Err()
}

// TryAcquire takes n bytes if they fit now, without queueing (and
// without overtaking a waiter); it reports whether it took them. Callers
// use it to keep the common path free of the allocations a wait costs
// (a deadline context, say) and only pay for them when they must wait.
func (b *Budget) TryAcquire(n int64) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed || len(b.waiters) > 0 || b.used+n > b.limit {
		return false
	}
	b.used += n
	return true
}

// Release gives back n bytes acquired earlier.
func (b *Budget) Release(n int64) {
	b.mu.Lock()
	b.used -= n
	if b.used < 0 {
		b.mu.Unlock()
		panic(fmt.Sprintf("budget: released %d bytes more than acquired", -b.used))
	}
	b.grantLocked()
	b.mu.Unlock()
}

func (b *Budget) grantLocked() {
	for len(b.waiters) > 0 && !b.closed {
		w := b.waiters[0]
		if b.used+w.n > b.limit {
			return
		}
		b.used += w.n
		w.granted = true
		b.waiters[0] = nil
		b.waiters = b.waiters[1:]
		close(w.ready)
	}
}

// Close fails every waiter and future Acquire with ErrClosed.
func (b *Budget) Close() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.closed = true
	for _, w := range b.waiters {
		close(w.ready) // not granted: the waiter returns ErrClosed
	}
	b.waiters = nil
}

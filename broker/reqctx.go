package broker

import (
	"context"
	"sync"
	"time"
)

// requestCtx is the context a handler gets: it ends at the request
// deadline (Config.RequestTimeout after decode), when the server aborts
// in-flight work, or once the request is finished. It is embedded in the
// request's pending entry, and its timer and channel are only created when
// a handler first asks for Done(): most handlers never wait on their
// context, and the requests that do (long-polling fetches, durable-ack
// waits) pay for what they use. This removes the four allocations and the
// timer of a context.WithTimeout from every request.
type requestCtx struct {
	parent   context.Context
	deadline time.Time

	// w, when set, is the connection writer's waiter (see awaitReady).
	w *waiter

	mu   sync.Mutex
	done chan struct{} // created by Done
	err  error         // set when the context ends
	stop func()        // stops the deadline timer and the parent watch
}

var _ context.Context = (*requestCtx)(nil)

func (c *requestCtx) init(parent context.Context, deadline time.Time) {
	c.parent, c.deadline = parent, deadline
}

func (c *requestCtx) Deadline() (time.Time, bool) { return c.deadline, true }

func (c *requestCtx) Value(key any) any { return c.parent.Value(key) }

func (c *requestCtx) Done() <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.done != nil {
		return c.done
	}
	c.done = make(chan struct{})
	if c.err == nil {
		c.err = c.expiredLocked()
	}
	if c.err != nil {
		close(c.done)
		return c.done
	}
	t := time.AfterFunc(time.Until(c.deadline), func() { c.end(context.DeadlineExceeded) })
	stopParent := context.AfterFunc(c.parent, func() { c.end(context.Cause(c.parent)) })
	c.stop = func() { t.Stop(); stopParent() }
	return c.done
}

// expiredLocked reports why the context has ended without a timer having
// told it: the deadline passed or the parent ended.
// REQUIRES: c.mu is held.
func (c *requestCtx) expiredLocked() error {
	if err := c.parent.Err(); err != nil {
		return err
	}
	if !time.Now().Before(c.deadline) {
		return context.DeadlineExceeded
	}
	return nil
}

func (c *requestCtx) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.done != nil || c.err != nil {
		// With a Done channel, Err follows it exactly.
		return c.err
	}
	return c.expiredLocked()
}

// end ends the context with err unless it has ended already.
func (c *requestCtx) end(err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err != nil {
		return
	}
	c.err = err
	if c.done != nil {
		close(c.done)
	}
}

// release ends the context once its request is finished (as a
// context.CancelFunc would) and stops its timer.
func (c *requestCtx) release() {
	c.end(context.Canceled)
	c.mu.Lock()
	stop := c.stop
	c.stop = nil
	c.mu.Unlock()
	if stop != nil {
		stop()
	}
}

// waiter lets the connection writer wait for a deferred reply's
// completion, the request deadline or the server's abort without creating
// the request's Done channel and timers: its timer is reused for every
// request of the connection. Only the writer goroutine uses it.
type waiter struct {
	timer *time.Timer
	abort <-chan struct{} // the server's base context
}

func newWaiter(base context.Context) *waiter {
	t := time.NewTimer(time.Hour)
	t.Stop()
	return &waiter{timer: t, abort: base.Done()}
}

// awaitReady waits until ch is ready (and receives from it) or ctx ends,
// whose error it then returns. With the connection writer's request
// context it allocates nothing.
func awaitReady(ctx context.Context, ch <-chan struct{}) error {
	select {
	case <-ch:
		return nil
	default:
	}
	rc, ok := ctx.(*requestCtx)
	if !ok || rc.w == nil {
		select {
		case <-ch:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	if err := rc.Err(); err != nil {
		return err
	}
	t := rc.w.timer
	t.Reset(time.Until(rc.deadline))
	defer t.Stop()
	select {
	case <-ch:
		return nil
	case <-t.C:
		return context.DeadlineExceeded
	case <-rc.w.abort:
		return context.Cause(rc.parent)
	}
}

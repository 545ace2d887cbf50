package client

import (
	"context"
	"time"
)

// Clock is the time source of retries and of anything above the client
// that waits: a test passes a simulated one.
type Clock interface {
	Now() time.Time
	// Sleep waits d, or until ctx ends (then it returns ctx.Err()).
	Sleep(ctx context.Context, d time.Duration) error
}

// SystemClock is the wall clock.
type SystemClock struct{}

// Now is time.Now.
func (SystemClock) Now() time.Time { return time.Now() }

// Sleep waits d or until ctx ends.
func (SystemClock) Sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// Backoff paces the retries of one operation: waits from 100 ms doubling
// to 2 s, within a budget that starts at NewBackoff or Reset.
type Backoff struct {
	clk      Clock
	budget   time.Duration
	deadline time.Time
	wait     time.Duration
}

// NewBackoff starts a budget of the given length on clk.
func NewBackoff(clk Clock, budget time.Duration) *Backoff {
	b := &Backoff{clk: clk, budget: budget}
	b.Reset()
	return b
}

// Reset starts the budget and the waits again (after progress).
func (b *Backoff) Reset() {
	b.deadline, b.wait = b.clk.Now().Add(b.budget), 100*time.Millisecond
}

// Expired reports whether the budget is spent.
func (b *Backoff) Expired() bool { return b.clk.Now().After(b.deadline) }

// Budget is the length of the budget.
func (b *Backoff) Budget() time.Duration { return b.budget }

// Wait sleeps the next wait.
func (b *Backoff) Wait(ctx context.Context) error {
	if err := b.clk.Sleep(ctx, b.wait); err != nil {
		return err
	}
	b.wait = min(b.wait*2, 2*time.Second)
	return nil
}

// GiveUpError is returned by Retry when transient failures outlasted the
// budget; Err is the last one.
type GiveUpError struct {
	Err    error
	Budget time.Duration
}

func (e *GiveUpError) Error() string {
	return "giving up after " + e.Budget.String() + ": " + e.Err.Error()
}
func (e *GiveUpError) Unwrap() error { return e.Err }

// Retry runs fn until it succeeds, fails with an error Transient rejects,
// or transient failures have lasted budget (then a *GiveUpError).
// onRetry, when set, sees each transient failure before the wait.
func Retry(ctx context.Context, clk Clock, budget time.Duration, fn func() error, onRetry func(error)) error {
	b := NewBackoff(clk, budget)
	for {
		err := fn()
		if err == nil || !Transient(err) {
			return err
		}
		if b.Expired() {
			return &GiveUpError{Err: err, Budget: budget}
		}
		if onRetry != nil {
			onRetry(err)
		}
		if err := b.Wait(ctx); err != nil {
			return err
		}
	}
}

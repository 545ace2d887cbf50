package testkit

import (
	"context"
	"sync"
	"time"
)

// SleepClock is a client.Clock (and mirror.Clock) for tests that
// advances only when slept on: its time is the start plus the sum of the
// sleeps, so retry bounds, back-offs and throttles run without waiting.
type SleepClock struct {
	mu  sync.Mutex
	now time.Time
}

// NewSleepClock starts a SleepClock at start.
func NewSleepClock(start time.Time) *SleepClock { return &SleepClock{now: start} }

// Now is the clock's time.
func (c *SleepClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Sleep advances the clock by d at once (ctx done: its error, no advance).
func (c *SleepClock) Sleep(ctx context.Context, d time.Duration) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
	return nil
}

package link

import (
	"context"
	"math"
	"sync"
	"time"

	"github.com/verbatim-kafka/verbatim/client"
)

// throttle is a link's fetch rate cap, a token bucket on the link's clock
// like Kafka's replication throttle: what a response brought is taken
// from the bucket (which may go into debt), and the next request of any
// of the link's sessions waits until the debt is paid back. It delays
// fetches, it never drops what was fetched. The bucket holds at most one
// second of the rate.
type throttle struct {
	clk    client.Clock
	mu     sync.Mutex
	rate   float64 // bytes per second; 0: unthrottled
	tokens float64
	last   time.Time
}

func newThrottle(clk client.Clock, bytesPerSec int64) *throttle {
	t := &throttle{clk: clk, last: clk.Now()}
	t.setRate(bytesPerSec)
	t.tokens = t.rate
	return t
}

func (t *throttle) setRate(bytesPerSec int64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.refillLocked()
	t.rate = float64(max(bytesPerSec, 0))
	t.tokens = min(t.tokens, t.rate)
}

// refillLocked adds the tokens earned since the last call. REQUIRES: t.mu.
func (t *throttle) refillLocked() {
	now := t.clk.Now()
	if d := now.Sub(t.last); d > 0 {
		t.tokens = min(t.tokens+t.rate*d.Seconds(), t.rate)
	}
	t.last = now
}

// take charges n fetched bytes.
func (t *throttle) take(n int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.rate == 0 {
		return
	}
	t.refillLocked()
	t.tokens -= float64(n)
}

// wait returns once the bucket is out of debt.
func (t *throttle) wait(ctx context.Context) error {
	for {
		t.mu.Lock()
		if t.rate == 0 {
			t.mu.Unlock()
			return nil
		}
		t.refillLocked()
		debt := -t.tokens
		rate := t.rate
		t.mu.Unlock()
		if debt <= 0 {
			return nil
		}
		d := time.Duration(math.Ceil(debt / rate * float64(time.Second)))
		if err := t.clk.Sleep(ctx, d); err != nil {
			return err
		}
	}
}

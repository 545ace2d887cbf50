package client

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
)

type fakeClock struct {
	now   time.Time
	slept []time.Duration
}

func (c *fakeClock) Now() time.Time { return c.now }
func (c *fakeClock) Sleep(ctx context.Context, d time.Duration) error {
	c.slept = append(c.slept, d)
	c.now = c.now.Add(d)
	return ctx.Err()
}

func TestRetry(t *testing.T) {
	ctx := context.Background()
	clk := &fakeClock{now: time.Unix(0, 0)}
	n := 0
	err := Retry(ctx, clk, time.Minute, func() error {
		if n++; n < 4 {
			return kerr.NotLeaderForPartition
		}
		return nil
	}, nil)
	if err != nil || n != 4 || len(clk.slept) != 3 || clk.slept[0] != 100*time.Millisecond || clk.slept[2] != 400*time.Millisecond {
		t.Fatalf("transient then success: err %v after %d calls, waits %v", err, n, clk.slept)
	}

	// A non-transient error ends at once.
	clk = &fakeClock{now: time.Unix(0, 0)}
	if err := Retry(ctx, clk, time.Minute, func() error { return kerr.OffsetOutOfRange }, nil); !errors.Is(err, kerr.OffsetOutOfRange) || len(clk.slept) != 0 {
		t.Fatalf("non-transient: %v, waits %v", err, clk.slept)
	}

	// Transient failures past the budget give up with the last one; the
	// waits stop growing at 2 s.
	clk = &fakeClock{now: time.Unix(0, 0)}
	var seen int
	err = Retry(ctx, clk, 10*time.Second, func() error { return errors.New("connection reset") }, func(error) { seen++ })
	var gu *GiveUpError
	if !errors.As(err, &gu) || gu.Budget != 10*time.Second || clk.now.Sub(time.Unix(0, 0)) <= 10*time.Second || seen != len(clk.slept) {
		t.Fatalf("budget: %v after %v, %d retries seen, waits %v", err, clk.now.Sub(time.Unix(0, 0)), seen, clk.slept)
	}
	if last := clk.slept[len(clk.slept)-1]; last != 2*time.Second {
		t.Fatalf("last wait %v, want the 2 s cap", last)
	}

	// A cancelled context ends the waits.
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if err := Retry(cctx, &fakeClock{}, time.Minute, func() error { return errors.New("eof") }, nil); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled: %v", err)
	}
}

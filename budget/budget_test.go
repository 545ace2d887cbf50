package budget

import (
	"context"
	"errors"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
)

// waitForWaiters yields until b has n queued waiters (no timing involved:
// the goroutines under test are runnable and will queue).
func waitForWaiters(t *testing.T, b *Budget, n int) {
	t.Helper()
	for i := 0; b.Waiting() != n; i++ {
		if i > 1_000_000 {
			t.Fatalf("budget has %d waiters, want %d", b.Waiting(), n)
		}
		runtime.Gosched()
	}
}

func waiters(b *Budget) int { return b.Waiting() }

func TestBudgetCancelAndClose(t *testing.T) {
	b := New(100)
	if err := b.Acquire(context.Background(), 80); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- b.Acquire(ctx, 50) }()
	waitForWaiters(t, b, 1)
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled acquire: %v", err)
	}
	if b.InUse() != 80 || waiters(b) != 0 {
		t.Fatalf("after cancel: used %d waiters %d", b.InUse(), waiters(b))
	}
	go func() { done <- b.Acquire(context.Background(), 50) }()
	waitForWaiters(t, b, 1)
	b.Close()
	if err := <-done; !errors.Is(err, ErrClosed) {
		t.Fatalf("acquire across close: %v", err)
	}
	if err := b.Acquire(context.Background(), 1); !errors.Is(err, ErrClosed) {
		t.Fatalf("acquire after close: %v", err)
	}
	if err := New(10).Acquire(context.Background(), 11); !errors.Is(err, ErrOverLimit) {
		t.Fatalf("acquire over the limit: %v", err)
	}
}

// A large request is served before smaller ones that arrive after it.
func TestBudgetFIFO(t *testing.T) {
	b := New(8)
	_ = b.Acquire(context.Background(), 4)
	_ = b.Acquire(context.Background(), 4)
	big := make(chan error, 1)
	go func() { big <- b.Acquire(context.Background(), 8) }()
	waitForWaiters(t, b, 1)
	b.Release(4)
	small := make(chan error, 1)
	go func() { small <- b.Acquire(context.Background(), 4) }()
	waitForWaiters(t, b, 2) // queued behind the big one although 4 bytes are free
	b.Release(4)
	if err := <-big; err != nil {
		t.Fatal(err)
	}
	select {
	case <-small:
		t.Fatal("small acquire overtook while the big one holds everything")
	default:
	}
	b.Release(8)
	if err := <-small; err != nil {
		t.Fatal(err)
	}
	b.Release(4)
	if b.InUse() != 0 {
		t.Fatal("leak")
	}
}

// Many goroutines acquiring and releasing random amounts never push the
// budget over its limit, never deadlock, and leave it empty.
func TestBudgetHammer(t *testing.T) {
	const limit = 1000
	b := New(limit)
	var over atomic.Bool
	var wg sync.WaitGroup
	for w := 0; w < 8; w++ {
		wg.Add(1)
		go func(seed int) {
			defer wg.Done()
			n := int64(seed*37%limit + 1)
			for i := 0; i < 500; i++ {
				n = (n*7919 + 13) % limit
				want := n + 1
				ctx, cancel := context.WithCancel(context.Background())
				if i%17 == 0 {
					cancel() // some acquires give up
				}
				if err := b.Acquire(ctx, want); err != nil {
					cancel()
					continue
				}
				cancel()
				if b.InUse() > limit {
					over.Store(true)
				}
				runtime.Gosched()
				b.Release(want)
			}
		}(w)
	}
	wg.Wait()
	if over.Load() {
		t.Fatal("budget exceeded its limit")
	}
	if b.InUse() != 0 || waiters(b) != 0 {
		t.Fatalf("after the hammer: %d in use, %d waiters", b.InUse(), waiters(b))
	}
}

// TryAcquire takes what fits now, never queues and never overtakes a
// waiter.
func TestBudgetTryAcquire(t *testing.T) {
	b := New(10)
	if !b.TryAcquire(6) || b.TryAcquire(5) || b.InUse() != 6 || b.Waits() != 0 {
		t.Fatalf("try: in use %d, waits %d", b.InUse(), b.Waits())
	}
	done := make(chan error, 1)
	go func() { done <- b.Acquire(context.Background(), 8) }()
	waitForWaiters(t, b, 1)
	if b.TryAcquire(1) {
		t.Fatal("TryAcquire overtook a queued waiter")
	}
	b.Release(6)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	b.Release(8)
	b.Close()
	if b.TryAcquire(1) {
		t.Fatal("TryAcquire on a closed budget")
	}
}

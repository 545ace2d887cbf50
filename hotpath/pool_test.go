package hotpath

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
)

func frameBytes(bodies ...[]byte) []byte {
	var out []byte
	for _, b := range bodies {
		out = binary.BigEndian.AppendUint32(out, uint32(len(b)))
		out = append(out, b...)
	}
	return out
}

func waiters(b *Budget) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.waiters)
}

// waitForWaiters yields until b has n queued waiters (no timing involved:
// the goroutines under test are runnable and will queue).
func waitForWaiters(t *testing.T, b *Budget, n int) {
	t.Helper()
	for i := 0; waiters(b) != n; i++ {
		if i > 1_000_000 {
			t.Fatalf("budget has %d waiters, want %d", waiters(b), n)
		}
		runtime.Gosched()
	}
}

func TestSizeClasses(t *testing.T) {
	for _, c := range []struct{ n, class, size int }{
		{1, 0, 4096}, {4096, 0, 4096}, {4097, 1, 8192}, {1 << 20, 8, 1 << 20}, {1<<20 + 1, 9, 2 << 20}, {1 << 27, 15, 1 << 27},
	} {
		if got := classOf(c.n); got != c.class || classSize(got) != c.size {
			t.Fatalf("classOf(%d) = %d (size %d), want %d (%d)", c.n, got, classSize(got), c.class, c.size)
		}
	}
	b, p := getBuffer(5000)
	if len(b) != 5000 || cap(*p) != 8192 {
		t.Fatalf("getBuffer(5000): len %d cap %d", len(b), cap(*p))
	}
	putBuffer(p)
}

func TestFrameReaderReadsAndReleases(t *testing.T) {
	broker := NewBudget(1 << 20)
	fr, err := NewFrameReader(64<<10, broker, 32<<10)
	if err != nil {
		t.Fatal(err)
	}
	a, b := bytes.Repeat([]byte{1}, 100), bytes.Repeat([]byte{2}, 20000)
	r := bytes.NewReader(frameBytes(a, b, nil))
	f1, err := fr.ReadFrame(context.Background(), r)
	if err != nil || !bytes.Equal(f1.Buf, a) {
		t.Fatalf("frame 1: %v", err)
	}
	f2, err := fr.ReadFrame(context.Background(), r)
	if err != nil || !bytes.Equal(f2.Buf, b) {
		t.Fatalf("frame 2: %v", err)
	}
	if fr.InFlight() != 4096+32768 || broker.InUse() != 4096+32768 {
		t.Fatalf("in flight %d / broker %d", fr.InFlight(), broker.InUse())
	}
	f3, err := fr.ReadFrame(context.Background(), r)
	if err != nil || len(f3.Buf) != 0 {
		t.Fatalf("empty frame: %v %d", err, len(f3.Buf))
	}
	f1.Release()
	f2.Release()
	f3.Release()
	f3.Release() // zeroed by the first Release: no-op
	if fr.InFlight() != 0 || broker.InUse() != 0 {
		t.Fatalf("after release: %d / %d", fr.InFlight(), broker.InUse())
	}
	if _, err := fr.ReadFrame(context.Background(), r); err != io.EOF {
		t.Fatalf("at end: %v", err)
	}
}

func TestFrameReaderRejectsBadSizes(t *testing.T) {
	fr, err := NewFrameReader(64<<10, nil, 10000)
	if err != nil {
		t.Fatal(err)
	}
	big := binary.BigEndian.AppendUint32(nil, 10001)
	if _, err := fr.ReadFrame(context.Background(), bytes.NewReader(big)); !errors.Is(err, ErrFrameTooLarge) {
		t.Fatalf("oversized frame: %v", err)
	}
	neg := binary.BigEndian.AppendUint32(nil, 0xffffffff)
	if _, err := fr.ReadFrame(context.Background(), bytes.NewReader(neg)); !errors.Is(err, ErrFrameTooLarge) {
		t.Fatalf("negative size: %v", err)
	}
	short := append(binary.BigEndian.AppendUint32(nil, 50), 1, 2, 3)
	if _, err := fr.ReadFrame(context.Background(), bytes.NewReader(short)); err != io.ErrUnexpectedEOF {
		t.Fatalf("truncated body: %v", err)
	}
	if fr.InFlight() != 0 {
		t.Fatalf("failed read kept %d bytes charged", fr.InFlight())
	}
	if _, err := fr.ReadFrame(context.Background(), bytes.NewReader([]byte{0, 0})); err != io.ErrUnexpectedEOF {
		t.Fatalf("truncated size: %v", err)
	}
	if _, err := NewFrameReader(8<<10, nil, 9000); err == nil {
		t.Fatal("max frame whose class exceeds the connection budget accepted")
	}
	if _, err := NewFrameReader(1<<40, NewBudget(1<<20), 2<<20); err == nil {
		t.Fatal("max frame over the broker budget accepted")
	}
	if _, err := NewFrameReader(1<<40, nil, 1<<28); err == nil {
		t.Fatal("max frame above the largest class accepted")
	}
}

// The connection stops being read while its budget is spent, and resumes
// when a frame is released.
func TestFrameReaderBackPressure(t *testing.T) {
	fr, err := NewFrameReader(8<<10, nil, 4096)
	if err != nil {
		t.Fatal(err)
	}
	body := bytes.Repeat([]byte{7}, 3000)
	r := bytes.NewReader(frameBytes(body, body, body))
	f1, _ := fr.ReadFrame(context.Background(), r)
	f2, _ := fr.ReadFrame(context.Background(), r)
	done := make(chan error, 1)
	var f3 Frame
	go func() {
		var err error
		f3, err = fr.ReadFrame(context.Background(), r)
		done <- err
	}()
	waitForWaiters(t, fr.conn, 1)
	select {
	case err := <-done:
		t.Fatalf("third frame read over budget (%v)", err)
	default:
	}
	f1.Release()
	if err := <-done; err != nil || !bytes.Equal(f3.Buf, body) {
		t.Fatalf("third frame after release: %v", err)
	}
	f2.Release()
	f3.Release()
}

// Two connections share the broker budget.
func TestBrokerBudgetSharedByConnections(t *testing.T) {
	broker := NewBudget(8 << 10)
	c1, _ := NewFrameReader(8<<10, broker, 4096)
	c2, _ := NewFrameReader(8<<10, broker, 4096)
	body := []byte("x")
	f1, _ := c1.ReadFrame(context.Background(), bytes.NewReader(frameBytes(body)))
	f2, _ := c1.ReadFrame(context.Background(), bytes.NewReader(frameBytes(body)))
	done := make(chan error, 1)
	var f3 Frame
	go func() {
		var err error
		f3, err = c2.ReadFrame(context.Background(), bytes.NewReader(frameBytes(body)))
		done <- err
	}()
	waitForWaiters(t, broker, 1)
	if c2.InFlight() != 4096 {
		t.Fatalf("c2 should hold its connection charge while waiting for the broker, has %d", c2.InFlight())
	}
	f2.Release()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	f1.Release()
	f3.Release()
	if broker.InUse() != 0 || c1.InFlight() != 0 || c2.InFlight() != 0 {
		t.Fatal("budget leak")
	}
}

func TestBudgetCancelAndClose(t *testing.T) {
	b := NewBudget(100)
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
	if err := <-done; !errors.Is(err, ErrClosedBudget) {
		t.Fatalf("acquire across close: %v", err)
	}
	if err := b.Acquire(context.Background(), 1); !errors.Is(err, ErrClosedBudget) {
		t.Fatalf("acquire after close: %v", err)
	}
	if err := NewBudget(10).Acquire(context.Background(), 11); !errors.Is(err, ErrFrameTooLarge) {
		t.Fatalf("acquire over the limit: %v", err)
	}
}

// A large request is served before smaller ones that arrive after it.
func TestBudgetFIFO(t *testing.T) {
	b := NewBudget(8)
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
	b := NewBudget(limit)
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

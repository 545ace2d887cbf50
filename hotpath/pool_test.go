package hotpath

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"runtime"
	"testing"

	"github.com/verbatim-kafka/verbatim/budget"
)

func frameBytes(bodies ...[]byte) []byte {
	var out []byte
	for _, b := range bodies {
		out = binary.BigEndian.AppendUint32(out, uint32(len(b)))
		out = append(out, b...)
	}
	return out
}

// waitForWaiters yields until b has n queued waiters (no timing involved:
// the goroutines under test are runnable and will queue).
func waitForWaiters(t *testing.T, b *budget.Budget, n int) {
	t.Helper()
	for i := 0; b.Waiting() != n; i++ {
		if i > 1_000_000 {
			t.Fatalf("budget has %d waiters, want %d", b.Waiting(), n)
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
	broker := budget.New(1 << 20)
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
	if _, err := fr.ReadFrame(context.Background(), bytes.NewReader(short)); !errors.Is(err, io.ErrUnexpectedEOF) {
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
	if _, err := NewFrameReader(1<<40, budget.New(1<<20), 2<<20); err == nil {
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
	waitForWaiters(t, fr.ConnBudget(), 1)
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
	broker := budget.New(8 << 10)
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

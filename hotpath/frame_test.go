package hotpath

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/verbatim-kafka/verbatim/budget"
)

// scriptReader hands out data at most chunk bytes per Read, records the
// read deadlines it is given, and once stopAt bytes have been read
// answers like a connection whose deadline fired (the peer sent nothing
// more). onRead sees the position before each Read.
type scriptReader struct {
	mu        sync.Mutex
	data      []byte
	pos       int
	chunk     int
	stopAt    int // -1: never
	deadlines []time.Time
	onRead    func(pos int)
}

type timeoutError struct{}

func (timeoutError) Error() string { return "i/o timeout" }
func (timeoutError) Timeout() bool { return true }

func (r *scriptReader) Read(p []byte) (int, error) {
	if r.onRead != nil {
		r.onRead(r.pos)
	}
	if r.stopAt >= 0 && r.pos >= r.stopAt {
		return 0, timeoutError{}
	}
	if r.pos == len(r.data) {
		return 0, io.EOF
	}
	n := len(p)
	if r.chunk > 0 {
		n = min(n, r.chunk)
	}
	if r.stopAt >= 0 {
		n = min(n, r.stopAt-r.pos)
	}
	n = copy(p[:n], r.data[r.pos:])
	r.pos += n
	return n, nil
}

func (r *scriptReader) SetReadDeadline(t time.Time) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.deadlines = append(r.deadlines, t)
	return nil
}

func (r *scriptReader) lastDeadline() time.Time {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.deadlines[len(r.deadlines)-1]
}

// fakeClock is a settable clock.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

func sizePrefix(n int) []byte { return binary.BigEndian.AppendUint32(nil, uint32(n)) }

// Hole 1: a 90 MiB frame announced with 64 bytes sent holds one 32 KiB
// chunk, not its 128 MiB class, and is closed by the rate deadline.
func TestFrameChargeFollowsBytesReceived(t *testing.T) {
	broker, peer := budget.New(256<<20), budget.New(FrameFootprint(100<<20))
	fr, err := NewFrameReaderConfig(FrameConfig{
		ConnBytes: FrameFootprint(100 << 20), Shared: []*budget.Budget{peer, broker}, MaxFrame: 100 << 20,
		MinRate: 1 << 20, Grace: 5 * time.Second, Timeout: 30 * time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	head := bytes.Repeat([]byte{'h'}, 64)
	var seen []int64
	r := &scriptReader{data: append(sizePrefix(90<<20), head...), stopAt: 4 + 64}
	r.onRead = func(pos int) {
		if pos > 4 {
			seen = append(seen, fr.InFlight(), peer.InUse(), broker.InUse())
		}
	}
	_, err = fr.ReadFrame(context.Background(), r)
	var fe *FrameError
	if !errors.As(err, &fe) || !errors.Is(err, ErrFrameTooSlow) {
		t.Fatalf("stalled frame: %v, want ErrFrameTooSlow", err)
	}
	if fe.Size != 90<<20 || fe.Received != 64 || !bytes.Equal(fe.Head, head) {
		t.Fatalf("error details: size %d received %d head %q", fe.Size, fe.Received, fe.Head)
	}
	if len(seen) == 0 {
		t.Fatal("no read after the first bytes")
	}
	for _, c := range seen {
		if c != FirstChunk {
			t.Fatalf("charges while 64 bytes were in: %v, want %d on every budget", seen, FirstChunk)
		}
	}
	if fr.InFlight() != 0 || peer.InUse() != 0 || broker.InUse() != 0 {
		t.Fatalf("after the failure: conn %d peer %d broker %d", fr.InFlight(), peer.InUse(), broker.InUse())
	}
}

// Frames grow only as they fill: small ones stay in their first chunk,
// up to 2 MiB they move once to their class, above it by x8 steps; the
// charge is bounded by what has arrived and equals the class at the end.
func TestFramePromotion(t *testing.T) {
	fp := FrameFootprint(20 << 20)
	broker := budget.New(fp)
	fr, err := NewFrameReader(fp, broker, 20<<20)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		n     int
		steps []int64
	}{
		{100, []int64{4 << 10}},
		{FirstChunk, []int64{FirstChunk}},
		{FirstChunk + 1, []int64{FirstChunk, 2 * FirstChunk}},
		{1 << 20, []int64{FirstChunk, 1 << 20}},
		{3 << 20, []int64{FirstChunk, 512 << 10, 4 << 20}},
		{17 << 20, []int64{FirstChunk, 512 << 10, 4 << 20, 32 << 20}},
	} {
		body := make([]byte, c.n)
		for i := range body {
			body[i] = byte(i * 7)
		}
		var steps []int64
		frameStart := 0
		r := &scriptReader{data: append(sizePrefix(c.n), body...), chunk: 48 << 10, stopAt: -1}
		r.onRead = func(pos int) {
			got := pos - frameStart - 4
			if got < 0 {
				return
			}
			charge := fr.InFlight()
			if broker.InUse() != charge {
				t.Errorf("n=%d: broker %d, connection %d", c.n, broker.InUse(), charge)
			}
			if bound := max(int64(DirectMax+FirstChunk), int64(GrowFactor+1)*int64(got)); charge > bound || charge < int64(got) {
				t.Errorf("n=%d: %d bytes in, charge %d (bound %d)", c.n, got, charge, bound)
			}
			if len(steps) == 0 || steps[len(steps)-1] != charge {
				steps = append(steps, charge)
			}
		}
		f, err := fr.ReadFrame(context.Background(), r)
		if err != nil || !bytes.Equal(f.Buf, body) {
			t.Fatalf("n=%d: %v", c.n, err)
		}
		if f.charged != c.steps[len(c.steps)-1] || fr.InFlight() != f.charged {
			t.Fatalf("n=%d: final charge %d / %d, want %d", c.n, f.charged, fr.InFlight(), c.steps[len(c.steps)-1])
		}
		if !slices.Equal(steps, c.steps) {
			t.Fatalf("n=%d: charges while reading %v, want %v", c.n, steps, c.steps)
		}
		f.Release()
		if fr.InFlight() != 0 || broker.InUse() != 0 {
			t.Fatalf("n=%d: after release %d / %d", c.n, fr.InFlight(), broker.InUse())
		}
	}
	if got := FrameFootprint(100 << 20); got != 144<<20 {
		t.Fatalf("footprint of a 100 MiB frame %d, want 144 MiB (128 MiB + the 16 MiB it grows from)", got)
	}
	if got := FrameFootprint(1 << 20); got != 1<<20+FirstChunk {
		t.Fatalf("footprint of a 1 MiB frame %d", got)
	}
}

// The read deadline follows the bytes: never earlier than the rate allows,
// moved once per slack of progress, never past the request timeout; a
// timeout at the cap is ErrFrameTimeout.
func TestFramePacingDeadlines(t *testing.T) {
	clock := &fakeClock{t: time.Unix(1000, 0)}
	const rate, grace = 1000, 4 * time.Second
	fr, err := NewFrameReaderConfig(FrameConfig{ConnBytes: 64 << 10, MaxFrame: 32 << 10,
		MinRate: rate, Grace: grace, Timeout: 10 * time.Second, Now: clock.now})
	if err != nil {
		t.Fatal(err)
	}
	start := clock.now()
	body := make([]byte, 20000)
	r := &scriptReader{data: append(sizePrefix(len(body)), body...), chunk: 100, stopAt: -1}
	reads := 0
	r.onRead = func(pos int) {
		reads++
		got := pos - 4
		if got < 0 || len(r.deadlines) == 0 {
			return
		}
		due := start.Add(grace + time.Duration(got)*time.Second/rate)
		capAt := start.Add(10 * time.Second)
		d := r.lastDeadline()
		if d.Before(min64(due, capAt)) || d.After(capAt) {
			t.Fatalf("after %d bytes: deadline %s, due %s, cap %s", got, d.Sub(start), due.Sub(start), capAt.Sub(start))
		}
	}
	f, err := fr.ReadFrame(context.Background(), r)
	if err != nil {
		t.Fatal(err)
	}
	f.Release()
	if n := len(r.deadlines); n < 3 || n > reads/5 {
		t.Fatalf("%d deadlines set over %d reads", n, reads)
	}
	if last := r.lastDeadline(); !last.Equal(start.Add(10 * time.Second)) {
		t.Fatalf("last deadline %s, want the cap at 10s", last.Sub(start))
	}

	// Stalled once the deadline is at the cap: the timeout is the cap's.
	r = &scriptReader{data: append(sizePrefix(len(body)), body...), chunk: 1000, stopAt: 4 + 15000}
	if _, err := fr.ReadFrame(context.Background(), r); !errors.Is(err, ErrFrameTimeout) {
		t.Fatalf("stalled at the cap: %v", err)
	}
	// Stalled early: the rate's.
	r = &scriptReader{data: append(sizePrefix(len(body)), body...), chunk: 1000, stopAt: 4 + 100}
	if _, err := fr.ReadFrame(context.Background(), r); !errors.Is(err, ErrFrameTooSlow) {
		t.Fatalf("stalled early: %v", err)
	}
	if fr.InFlight() != 0 {
		t.Fatal("leak")
	}
}

func min64(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

// Time spent waiting for budget does not count against the peer's rate
// (the deadline moves by the wait), and a frame waiting on its peer's
// budget holds none of the broker's.
func TestFrameBudgetWaitPausesRate(t *testing.T) {
	clock := &fakeClock{t: time.Unix(1000, 0)}
	broker, peer := budget.New(1<<20), budget.New(64<<10)
	fr, err := NewFrameReaderConfig(FrameConfig{ConnBytes: 64 << 10, Shared: []*budget.Budget{peer, broker}, MaxFrame: 32 << 10,
		MinRate: 1000, Grace: time.Second, Timeout: time.Hour, Now: clock.now})
	if err != nil {
		t.Fatal(err)
	}
	start := clock.now()
	if err := peer.Acquire(context.Background(), 64<<10); err != nil {
		t.Fatal(err)
	}
	body := bytes.Repeat([]byte{3}, 1000)
	r := &scriptReader{data: append(sizePrefix(len(body)), body...), stopAt: -1}
	done := make(chan error, 1)
	var f Frame
	go func() {
		var err error
		f, err = fr.ReadFrame(context.Background(), r)
		done <- err
	}()
	waitForWaiters(t, peer, 1)
	if broker.InUse() != 0 || fr.InFlight() != 4096 {
		t.Fatalf("waiting on the peer budget: broker holds %d, connection %d", broker.InUse(), fr.InFlight())
	}
	clock.advance(time.Minute)
	peer.Release(64 << 10)
	if err := <-done; err != nil || !bytes.Equal(f.Buf, body) {
		t.Fatalf("after the wait: %v", err)
	}
	if d := r.lastDeadline(); d.Before(start.Add(time.Minute + time.Second)) {
		t.Fatalf("deadline %s after a minute's wait: the wait was counted against the rate", d.Sub(start))
	}
	f.Release()
	if broker.InUse() != 0 || peer.InUse() != 0 || fr.InFlight() != 0 {
		t.Fatal("leak")
	}
}

// budgetShortReader is a reader with a 20 ms frame timeout whose shared
// broker budget has room for a 60,000-byte frame's first chunk (32 KiB),
// not for its 64 KiB promotion; data is that frame.
func budgetShortReader(t *testing.T) (*FrameReader, *budget.Budget, []byte) {
	t.Helper()
	broker := budget.New(128 << 10)
	fr, err := NewFrameReaderConfig(FrameConfig{ConnBytes: 128 << 10, Shared: []*budget.Budget{broker}, MaxFrame: 64 << 10,
		MinRate: 1 << 20, Grace: time.Second, Timeout: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if err := broker.Acquire(context.Background(), 40<<10); err != nil {
		t.Fatal(err)
	}
	return fr, broker, append(sizePrefix(60000), make([]byte, 60000)...)
}

// A wait for budget ends at the frame's timeout: a holder of partial
// charge cannot wait (and make others wait) for ever.
func TestFrameBudgetWaitEndsAtTimeout(t *testing.T) {
	fr, broker, data := budgetShortReader(t)
	r := &scriptReader{data: data, stopAt: -1}
	_, err := fr.ReadFrame(context.Background(), r)
	var fe *FrameError
	if !errors.As(err, &fe) || !errors.Is(err, ErrFrameTimeout) || fe.Received != FirstChunk || fe.Waited <= 0 {
		t.Fatalf("wait for the promotion: %v", err)
	}
	if broker.InUse() != 40<<10 || fr.InFlight() != 0 {
		t.Fatalf("after the timeout: broker %d, connection %d", broker.InUse(), fr.InFlight())
	}
}

// A connection that ends inside a frame gets io.ErrUnexpectedEOF with what
// had arrived, and holds nothing.
func TestFrameTruncated(t *testing.T) {
	fr, err := NewFrameReader(64<<10, nil, 32<<10)
	if err != nil {
		t.Fatal(err)
	}
	data := append(sizePrefix(30000), make([]byte, 20000)...)
	_, err = fr.ReadFrame(context.Background(), &scriptReader{data: data, chunk: 7000, stopAt: -1})
	var fe *FrameError
	if !errors.As(err, &fe) || !errors.Is(err, io.ErrUnexpectedEOF) || fe.Received != 20000 || len(fe.Head) != headBytes {
		t.Fatalf("truncated frame: %v", err)
	}
	if fr.InFlight() != 0 {
		t.Fatal("leak")
	}
}

// TestFrameSetMaxFrame lowers and restores the limit between frames: an
// over-limit size is refused before any body byte is read, and the limit
// never rises above the one the reader was made with.
func TestFrameSetMaxFrame(t *testing.T) {
	fr, err := NewFrameReader(256<<10, nil, 64<<10)
	if err != nil {
		t.Fatal(err)
	}
	fr.SetMaxFrame(1000)
	r := &scriptReader{data: append(sizePrefix(1001), make([]byte, 1001)...), stopAt: -1}
	_, err = fr.ReadFrame(context.Background(), r)
	var fe *FrameError
	if !errors.As(err, &fe) || !errors.Is(err, ErrFrameTooLarge) || fe.Max != 1000 || r.pos != 4 {
		t.Fatalf("over the lowered limit: %v, %d bytes read", err, r.pos)
	}
	fr.SetMaxFrame(1 << 30)
	f, err := fr.ReadFrame(context.Background(), &scriptReader{data: append(sizePrefix(64<<10), make([]byte, 64<<10)...), stopAt: -1})
	if err != nil || len(f.Buf) != 64<<10 {
		t.Fatalf("at the original limit: %v", err)
	}
	f.Release()
	_, err = fr.ReadFrame(context.Background(), &scriptReader{data: sizePrefix(64<<10 + 1), stopAt: -1})
	if !errors.Is(err, ErrFrameTooLarge) {
		t.Fatalf("above the original limit: %v", err)
	}
}

// bufferedReader is a scriptReader that says how much of its data is
// held already (as bufio.Reader does): held bytes past the position.
type bufferedReader struct {
	*scriptReader
	held int // data[:held] has arrived
}

func (r *bufferedReader) Buffered() int { return max(r.held-r.pos, 0) }

// A body that has arrived whole is read without touching the deadline or
// the clock; a body not yet whole is paced as before; a wait for budget
// of a buffered body still ends at the frame's timeout.
func TestFrameBufferedBodySkipsDeadlines(t *testing.T) {
	clock := &fakeClock{t: time.Unix(1000, 0)}
	reads := 0
	now := func() time.Time { reads++; return clock.now() }
	fr, err := NewFrameReaderConfig(FrameConfig{ConnBytes: 256 << 10, MaxFrame: 64 << 10,
		MinRate: 1 << 20, Grace: time.Second, Timeout: 5 * time.Second, Now: now})
	if err != nil {
		t.Fatal(err)
	}
	body := bytes.Repeat([]byte{7}, 1000)
	data := append(sizePrefix(len(body)), body...)
	// Whole: no deadline, no clock.
	r := &bufferedReader{scriptReader: &scriptReader{data: data, stopAt: -1}, held: len(data)}
	f, err := fr.ReadFrame(context.Background(), r)
	if err != nil || !bytes.Equal(f.Buf, body) {
		t.Fatalf("buffered frame: %v", err)
	}
	f.Release()
	if len(r.deadlines) != 0 || reads != 0 {
		t.Fatalf("a buffered body set %d deadlines and read the clock %d times, want none", len(r.deadlines), reads)
	}
	// Part of the body held: paced from the size on.
	r = &bufferedReader{scriptReader: &scriptReader{data: data, chunk: 300, stopAt: -1}, held: 500}
	f, err = fr.ReadFrame(context.Background(), r)
	if err != nil || !bytes.Equal(f.Buf, body) {
		t.Fatalf("partly buffered frame: %v", err)
	}
	f.Release()
	if len(r.deadlines) == 0 || reads == 0 {
		t.Fatal("a body not yet whole was read without a deadline")
	}

	// A buffered body that must wait for budget: the wait ends at the
	// timeout, counted from when the wait began.
	fr, broker, data := budgetShortReader(t)
	r = &bufferedReader{scriptReader: &scriptReader{data: data, stopAt: -1}, held: len(data)}
	_, err = fr.ReadFrame(context.Background(), r)
	var fe *FrameError
	if !errors.As(err, &fe) || !errors.Is(err, ErrFrameTimeout) || fe.Waited <= 0 || fe.Elapsed < fe.Waited {
		t.Fatalf("buffered body waiting for budget: %v (%+v)", err, fe)
	}
	if len(r.deadlines) != 0 || broker.InUse() != 40<<10 || fr.InFlight() != 0 {
		t.Fatalf("after the timeout: %d deadlines, broker %d, connection %d", len(r.deadlines), broker.InUse(), fr.InFlight())
	}
}

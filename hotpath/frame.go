package hotpath

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/verbatim-kafka/verbatim/budget"
)

// Request frames are read into pooled buffers charged to byte budgets as
// their bytes arrive, never by the size a peer announces:
//
//   - Before any body byte has arrived a frame holds one chunk of at most
//     FirstChunk bytes (its own size class when it is smaller). Frames
//     that fit, most requests, are read into it and done: no copy.
//   - A larger frame is promoted only once that chunk is full: straight to
//     its own size class when that is at most DirectMax (one copy of
//     FirstChunk bytes), else through buffers GrowFactor times larger, each
//     taken when the previous one is full (the classes F/8^k of the frame's
//     class F above DirectMax/8, so the last step is from F/8 to F).
//     The charge held is therefore never more than about DirectMax, or
//     GrowFactor+1 times the bytes received, whichever is larger.
//   - While a buffer is copied into the next both are held and both are
//     charged: the charge always equals the capacity held. FrameFootprint
//     is the most one frame can hold, which every budget must allow.
//
// Every budget is acquired in order (the connection's own, then the
// shared ones: per peer address, then per broker) and released together.
// A frame waiting for budget holds what it has received, so waits are
// bounded: they end at the frame's Timeout, which closes the connection
// and releases its charge; nobody can block others for longer.
//
// Pacing: once a frame's size is read its body must keep up with MinRate
// after Grace (at every moment, received >= (elapsed - Grace) x MinRate,
// time spent waiting for budget not counted: the peer cannot send while
// we do not read), and must be complete within Timeout. Both are enforced
// by the read deadline of the reader (when it has SetReadDeadline), which
// is moved forward as bytes arrive; no goroutine polls.

const (
	// FirstChunk is the most a frame is charged before any of its body
	// has been read. 32 KiB rather than 16: the Java producer's default
	// batch.size (16384) makes the most common Produce frame a little
	// over 16 KiB (batch plus request header), which then fits with no
	// copy; a slow peer holds 32 KiB instead of 16.
	FirstChunk = 32 << 10
	// DirectMax is the largest size class a frame is promoted to straight
	// from its first chunk.
	DirectMax = 2 << 20
	// GrowFactor is how much a frame's buffer grows at each step above
	// DirectMax.
	GrowFactor = 8
	// headBytes is how much of a failed frame's beginning FrameError
	// keeps (enough for a request header: who sent it).
	headBytes = 256
)

// ErrFrameTooLarge is returned for a frame larger than the configured
// maximum; the broker closes the connection, as Kafka does when a request
// exceeds socket.request.max.bytes.
var ErrFrameTooLarge = errors.New("hotpath: request frame too large")

// ErrFrameTooSlow is returned when a frame body falls behind the minimum
// rate after its grace period.
var ErrFrameTooSlow = errors.New("hotpath: request frame arriving too slowly")

// ErrFrameTimeout is returned when a frame is not complete within the
// frame timeout (waits for budget included).
var ErrFrameTimeout = errors.New("hotpath: request frame not complete within the timeout")

// FrameError describes a frame that could not be read once its size was:
// Err is ErrFrameTooLarge, ErrFrameTooSlow, ErrFrameTimeout,
// io.ErrUnexpectedEOF (the connection ended inside the frame) or the
// reader's or a budget's error.
type FrameError struct {
	Err error
	// Size is the announced body size, Max the largest allowed, Received
	// the body bytes that had arrived.
	Size, Max, Received int
	// Elapsed is the time since the size was read, Waited the part of it
	// spent waiting for budget.
	Elapsed, Waited time.Duration
	// Head is a copy of the first body bytes received (at most 256): the
	// request header, when it had arrived.
	Head []byte
}

func (e *FrameError) Error() string {
	if errors.Is(e.Err, ErrFrameTooLarge) {
		return fmt.Sprintf("%v: %d bytes, maximum %d", e.Err, e.Size, e.Max)
	}
	s := fmt.Sprintf("%v: %d of %d bytes received in %s", e.Err, e.Received, e.Size, e.Elapsed.Round(time.Millisecond))
	if e.Waited > 0 {
		s += fmt.Sprintf(" (%s of it waiting for memory budget)", e.Waited.Round(time.Millisecond))
	}
	return s
}

func (e *FrameError) Unwrap() error { return e.Err }

// ReadDeadliner is what ReadFrame needs of its reader to pace a frame
// (net.Conn has it); a reader without it is read without deadlines.
type ReadDeadliner interface {
	SetReadDeadline(t time.Time) error
}

// FrameConfig configures a FrameReader.
type FrameConfig struct {
	// ConnBytes bounds the bytes held by the connection's frames (its own
	// budget). Shared are the budgets it shares with others, acquired
	// after its own and in order (per peer address, then per broker); nil
	// entries are skipped. Each must allow FrameFootprint(MaxFrame).
	ConnBytes int64
	Shared    []*budget.Budget
	// MaxFrame bounds one frame (Kafka's socket.request.max.bytes).
	MaxFrame int
	// MinRate (bytes per second, 0: none) and Grace: a body must keep up
	// with MinRate after Grace. Timeout (0: none) bounds a whole body.
	MinRate int64
	Grace   time.Duration
	Timeout time.Duration
	// Now is the clock (nil: time.Now).
	Now func() time.Time
}

// FrameReader reads size-prefixed request frames for one connection into
// pooled buffers charged to its budgets until they are released.
type FrameReader struct {
	// budgets are the connection's own, then the shared ones.
	budgets  []*budget.Budget
	maxFrame int
	// limit is the MaxFrame the reader was made with, the most SetMaxFrame
	// may allow (the budgets were checked against it).
	limit int
	// first, direct: FirstChunk and DirectMax (tests shrink them).
	first, direct int
	minRate       int64
	grace         time.Duration
	timeout       time.Duration
	// slack is how far past the exact rate deadline the read deadline is
	// set, so that it is moved once per slack of progress, not per read.
	slack time.Duration
	now   func() time.Time
	size  [4]byte
}

// FrameFootprint is the most memory one frame of up to maxFrame bytes
// holds at once: during its last promotion, its final buffer and the one
// copied into it.
func FrameFootprint(maxFrame int) int64 { return footprint(maxFrame, FirstChunk, DirectMax) }

func footprint(maxFrame, first, direct int) int64 {
	held, peak := 0, 0
	for held < max(maxFrame, 1) {
		next := nextSize(held, maxFrame, first, direct)
		peak = max(peak, held+next)
		held = next
	}
	return int64(peak)
}

// nextSize is the buffer a frame of n bytes holding a full buffer of held
// bytes (0: none yet) moves to.
func nextSize(held, n, first, direct int) int {
	n = max(n, 1)
	if held == 0 {
		return classSize(classOf(min(n, first)))
	}
	final := classSize(classOf(n))
	if final <= direct {
		return final
	}
	s := final
	for s/GrowFactor > held && s/GrowFactor > direct/GrowFactor {
		s /= GrowFactor
	}
	return s
}

// NewFrameReader returns a reader for one connection with its own budget
// of connBytes, sharing broker (may be nil), without pacing.
func NewFrameReader(connBytes int64, broker *budget.Budget, maxFrame int) (*FrameReader, error) {
	return NewFrameReaderConfig(FrameConfig{ConnBytes: connBytes, Shared: []*budget.Budget{broker}, MaxFrame: maxFrame})
}

// NewFrameReaderConfig returns a reader for one connection.
func NewFrameReaderConfig(cfg FrameConfig) (*FrameReader, error) {
	if cfg.MaxFrame <= 0 || classOf(cfg.MaxFrame) >= numClasses {
		return nil, fmt.Errorf("hotpath: max frame %d outside 1..%d (the largest size class)", cfg.MaxFrame, classSize(numClasses-1))
	}
	if cfg.MinRate < 0 || cfg.Grace < 0 || cfg.Timeout < 0 {
		return nil, fmt.Errorf("hotpath: negative frame rate %d, grace %s or timeout %s", cfg.MinRate, cfg.Grace, cfg.Timeout)
	}
	fp := FrameFootprint(cfg.MaxFrame)
	if fp > cfg.ConnBytes {
		return nil, fmt.Errorf("hotpath: a %d-byte frame holds up to %d bytes while it is read, over the connection budget %d", cfg.MaxFrame, fp, cfg.ConnBytes)
	}
	fr := &FrameReader{
		budgets:  []*budget.Budget{budget.New(cfg.ConnBytes)},
		maxFrame: cfg.MaxFrame,
		limit:    cfg.MaxFrame,
		first:    FirstChunk,
		direct:   DirectMax,
		minRate:  cfg.MinRate,
		grace:    cfg.Grace,
		timeout:  cfg.Timeout,
		slack:    max(cfg.Grace/4, 50*time.Millisecond),
		now:      cfg.Now,
	}
	for _, b := range cfg.Shared {
		if b == nil {
			continue
		}
		if fp > b.Limit() {
			return nil, fmt.Errorf("hotpath: a %d-byte frame holds up to %d bytes while it is read, over a shared budget of %d", cfg.MaxFrame, fp, b.Limit())
		}
		fr.budgets = append(fr.budgets, b)
	}
	if fr.now == nil {
		fr.now = time.Now
	}
	return fr, nil
}

// SetMaxFrame changes the largest frame the next ReadFrame accepts, at
// most the MaxFrame the reader was made with (a SASL connection reads
// with Kafka's sasl.server.max.receive.size until it has authenticated).
// Only the goroutine calling ReadFrame may call it.
func (fr *FrameReader) SetMaxFrame(n int) { fr.maxFrame = max(min(n, fr.limit), 1) }

// Frame is one request frame (without its size prefix) in a pooled buffer.
// Release it once the response has been written and nothing aliases it.
type Frame struct {
	Buf     []byte
	pooled  *[]byte
	charged int64
	owner   *FrameReader
}

// pacer is the timing of the frame being read.
type pacer struct {
	d      ReadDeadliner // nil: no deadlines
	start  time.Time     // zero: not begun (a buffered body that has not waited)
	cap    time.Time     // start + timeout; zero: none
	armed  time.Time     // the read deadline set
	atCap  bool          // armed is the cap
	waited time.Duration
}

// Buffered is a reader that can say how many bytes it holds already (as
// bufio.Reader does); ReadFrame reads a body it holds whole without
// deadlines.
type Buffered interface {
	Buffered() int
}

// begin starts p's clock at now.
func (fr *FrameReader) begin(p *pacer, now time.Time) {
	p.start = now
	if fr.timeout > 0 {
		p.cap = now.Add(fr.timeout)
	}
}

// ReadFrame reads the next frame from r: the 4-byte size (under whatever
// deadline the caller set), then the body, charging buffers as it
// arrives (blocking while a budget is spent: back-pressure). io.EOF is
// returned only at a frame boundary; once the size has been read every
// error is a *FrameError.
func (fr *FrameReader) ReadFrame(ctx context.Context, r io.Reader) (Frame, error) {
	if _, err := io.ReadFull(r, fr.size[:]); err != nil {
		return Frame{}, err
	}
	n := int(int32(binary.BigEndian.Uint32(fr.size[:])))
	if n < 0 || n > fr.maxFrame {
		return Frame{}, &FrameError{Err: ErrFrameTooLarge, Size: n, Max: fr.maxFrame}
	}
	var p pacer
	var f Frame
	// A body that has arrived whole cannot block, so it needs no
	// deadline, and its clock starts only if it waits for budget (most
	// small requests: one clock read and one deadline move fewer per
	// frame); p then stays not begun.
	if b, ok := r.(Buffered); !ok || b.Buffered() < n {
		p.d, _ = r.(ReadDeadliner)
		fr.begin(&p, fr.now())
		if err := fr.arm(&p, 0); err != nil {
			return Frame{}, fr.fail(&f, err, n, 0, &p)
		}
	}
	if err := fr.grow(ctx, &f, 0, n, &p); err != nil {
		return Frame{}, fr.fail(&f, err, n, 0, &p)
	}
	got := 0
	for got < n {
		if got == len(f.Buf) {
			if err := fr.grow(ctx, &f, got, n, &p); err != nil {
				return Frame{}, fr.fail(&f, err, n, got, &p)
			}
		}
		m, err := r.Read(f.Buf[got:])
		got += m
		if got == n {
			break
		}
		if err == nil {
			err = fr.arm(&p, got)
		}
		if err != nil {
			return Frame{}, fr.fail(&f, fr.readErr(err, &p), n, got, &p)
		}
	}
	f.Buf = f.Buf[:n]
	return f, nil
}

// grow moves f, holding got bytes of an n-byte frame, to its next buffer
// (the first chunk when it has none).
func (fr *FrameReader) grow(ctx context.Context, f *Frame, got, n int, p *pacer) error {
	size := nextSize(int(f.charged), n, fr.first, fr.direct)
	if err := fr.acquire(ctx, int64(size), p); err != nil {
		return err
	}
	buf, pooled := getBuffer(size)
	copy(buf, f.Buf[:got])
	if f.owner != nil {
		putBuffer(f.pooled)
		fr.release(f.charged)
	}
	*f = Frame{Buf: buf[:min(size, n)], pooled: pooled, charged: int64(size), owner: fr}
	// A wait for budget moved the rate deadline.
	if p.waited > 0 {
		return fr.arm(p, got)
	}
	return nil
}

// acquire takes n bytes from every budget in order. Only when one of them
// is spent does it wait (allocating the wait's deadline), at most until
// the frame's timeout.
func (fr *FrameReader) acquire(ctx context.Context, n int64, p *pacer) error {
	i := 0
	for i < len(fr.budgets) && fr.budgets[i].TryAcquire(n) {
		i++
	}
	if i == len(fr.budgets) {
		return nil
	}
	t0 := fr.now()
	if p.start.IsZero() {
		fr.begin(p, t0)
	}
	if !p.cap.IsZero() {
		left := p.cap.Sub(t0)
		if left <= 0 {
			fr.releaseFirst(i, n)
			return ErrFrameTimeout
		}
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, left)
		defer cancel()
	}
	var err error
	for ; i < len(fr.budgets); i++ {
		if err = fr.budgets[i].Acquire(ctx, n); err != nil {
			break
		}
	}
	p.waited += fr.now().Sub(t0)
	if err != nil {
		fr.releaseFirst(i, n)
		if errors.Is(err, context.DeadlineExceeded) {
			return ErrFrameTimeout
		}
		return err
	}
	return nil
}

func (fr *FrameReader) releaseFirst(i int, n int64) {
	for j := range i {
		fr.budgets[j].Release(n)
	}
}

func (fr *FrameReader) release(n int64) {
	for _, b := range fr.budgets {
		b.Release(n)
	}
}

// arm moves the read deadline to what got bytes allow, when that is past
// the one set (plus slack, never past the cap).
func (fr *FrameReader) arm(p *pacer, got int) error {
	if p.d == nil || p.atCap {
		return nil
	}
	if fr.minRate == 0 && p.cap.IsZero() {
		// Neither rate nor timeout: no deadline for the body.
		p.atCap = true
		return p.d.SetReadDeadline(time.Time{})
	}
	due := p.cap
	if fr.minRate > 0 {
		due = p.start.Add(fr.grace + p.waited + time.Duration(int64(got)*int64(time.Second)/fr.minRate))
		if !p.cap.IsZero() && due.After(p.cap) {
			due = p.cap
		}
	}
	if !p.armed.IsZero() && !due.After(p.armed) {
		return nil
	}
	t := due
	if !due.Equal(p.cap) {
		t = due.Add(fr.slack)
		if !p.cap.IsZero() && t.After(p.cap) {
			t = p.cap
		}
	}
	p.armed, p.atCap = t, !p.cap.IsZero() && t.Equal(p.cap)
	return p.d.SetReadDeadline(t)
}

// readErr names a read error: a timeout of the deadline we set is the
// rate's or the cap's.
func (fr *FrameReader) readErr(err error, p *pacer) error {
	var te interface{ Timeout() bool }
	switch {
	case errors.Is(err, io.EOF):
		return io.ErrUnexpectedEOF
	case p.d != nil && !p.armed.IsZero() && errors.As(err, &te) && te.Timeout():
		if p.atCap {
			return ErrFrameTimeout
		}
		return ErrFrameTooSlow
	}
	return err
}

// fail releases what f holds and describes the failure.
func (fr *FrameReader) fail(f *Frame, err error, n, got int, p *pacer) error {
	e := &FrameError{Err: err, Size: n, Max: fr.maxFrame, Received: got, Waited: p.waited}
	if !p.start.IsZero() {
		e.Elapsed = fr.now().Sub(p.start)
	}
	if got > 0 {
		e.Head = bytes.Clone(f.Buf[:min(got, headBytes)])
	}
	f.Release()
	return e
}

// Release returns the buffer to its pool and the bytes to the budgets. It
// is a no-op on a zero Frame; calling it twice is a bug.
func (f *Frame) Release() {
	if f.owner == nil {
		return
	}
	putBuffer(f.pooled)
	f.owner.release(f.charged)
	*f = Frame{}
}

// InFlight returns the bytes charged to this connection.
func (fr *FrameReader) InFlight() int64 { return fr.budgets[0].InUse() }

// ConnBudget is the connection's own budget (tests and metrics read its
// waits).
func (fr *FrameReader) ConnBudget() *budget.Budget { return fr.budgets[0] }

// Close fails reads blocked on this connection's budget.
func (fr *FrameReader) Close() { fr.budgets[0].Close() }

package broker

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/verbatim-kafka/verbatim/budget"
	"github.com/verbatim-kafka/verbatim/hotpath"
	"github.com/verbatim-kafka/verbatim/metrics"
)

var errTooManyFiles = syscall.EMFILE

// pending is a request that has been read and handled (or is deferred)
// and waits for its response to be written, in read order.
type pending struct {
	key           int16
	correlationID int32
	// headerV1 is true for response header v1 (flexible, tagged fields).
	headerV1 bool
	reply    Reply
	// ctx is the handler's context (reqctx.go), released once the
	// response is written.
	ctx requestCtx
	// frame is released once the response is written, unless the
	// handler kept it (req.kept).
	frame hotpath.Frame
	// req is the decoded request, allocated with its pending entry.
	req Request
	// start is when the frame was decoded, for the request metrics;
	// queued how long it waited for the handler goroutine, handled when
	// the handler returned and ready when the answer was ready to write
	// (zero: none written).
	start, handled, ready time.Time
	queued                time.Duration
}

// handedFrame is a frame handed to the handler goroutine and when.
type handedFrame struct {
	frame hotpath.Frame
	at    time.Time
}

// conn serves one client connection with three goroutines: the reader
// decodes frames and runs handlers in arrival order, handing large frames
// (and whatever follows them until it catches up) to the handler
// goroutine so that socket reads overlap large appends; the writer sends
// the responses in the same order. The bounded queue before the writer is
// the per-connection in-flight limit.
type conn struct {
	s     *Server
	nc    net.Conn
	id    uint64
	log   *slog.Logger
	queue chan *pending
	// frames reads frames into pooled buffers under the connection's, its
	// peer address's and the broker's byte budgets.
	frames *hotpath.FrameReader
	// peer is the connection's remote address entry (nil for a non-IP
	// peer): its connection count and frame budget (conn_limits.go).
	peer *peer
	// ctx ends when the reader must stop (shutdown), unblocking a reader
	// waiting for budget.
	ctx        context.Context
	cancelRead context.CancelFunc
	stopMu     sync.Mutex
	// stopped is set by stopReading: the reader finishes, the writer
	// drains what was already read.
	stopped bool
	// readDeadline is the read deadline last set (under stopMu), so an
	// idle deadline close to it is not set again; writeDeadline is the
	// writer's own.
	readDeadline  time.Time
	writeDeadline time.Time
	// clientID is the last client id read (used by whichever goroutine
	// handles frames; they never run at the same time, see handoff).
	clientID string

	// handoff passes large frames from the reader to the handler
	// goroutine, so the reader reads the next frame while a large append
	// is written (a 1 MiB pwrite no longer holds up the socket). It is
	// unbuffered: the reader is at most one frame ahead. handing counts
	// frames handed off and not yet queued for the writer; while it is
	// above zero every frame is handed off, so requests are handled, and
	// answered, in arrival order.
	handoff     chan handedFrame
	handing     atomic.Int32
	handlerDone chan struct{} // closed when the handler goroutine fails
	handlerErr  error         // set before handlerDone is closed

	// wait is the writer's waiter for deferred replies (awaitReady).
	wait *waiter

	// listener is the listener the connection arrived on; principal is
	// its authenticated principal (AnonymousPrincipal before), set only
	// by the goroutine handling frames; host is the client's IP.
	listener  *Listener
	principal string
	host      string
	// sasl is the SASL gate on a SASL_PLAINTEXT or SASL_SSL listener
	// (sasl_conn.go), nil otherwise.
	sasl *saslConn
	// lm is the listener's connection and authentication metrics.
	lm *metrics.Listener
}

// handoffBytes is the frame size from which the reader hands a frame to
// the handler goroutine instead of handling it itself. Below it the
// goroutine hand-off costs more than the overlap gains.
const handoffBytes = 512 << 10

func newConn(s *Server, nc net.Conn, p *peer, l *Listener) (*conn, error) {
	id := s.connSeq.Add(1)
	var peerBudget *budget.Budget
	if p != nil {
		peerBudget = p.budget
	}
	fr, err := hotpath.NewFrameReaderConfig(hotpath.FrameConfig{
		ConnBytes: s.cfg.MaxInFlightBytesPerConn,
		Shared:    []*budget.Budget{peerBudget, s.budget},
		MaxFrame:  int(s.cfg.MaxFrameBytes),
		MinRate:   max(s.cfg.FrameMinRate, 0),
		Grace:     s.cfg.FrameGrace,
		Timeout:   s.cfg.RequestTimeout,
	})
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(s.baseCtx)
	c := &conn{
		s:           s,
		nc:          nc,
		id:          id,
		log:         s.log.With("conn", id, "remote", nc.RemoteAddr().String()),
		queue:       make(chan *pending, s.cfg.MaxInFlightPerConn),
		handoff:     make(chan handedFrame),
		handlerDone: make(chan struct{}),
		frames:      fr,
		peer:        p,
		ctx:         ctx,
		cancelRead:  cancel,
		wait:        newWaiter(s.baseCtx),
		listener:    l,
		principal:   principalOf(s.cfg, nc.RemoteAddr()),
		host:        hostOf(nc.RemoteAddr()),
		lm:          s.metrics.Listener(l.Name, string(l.Protocol)),
	}
	if l.Protocol.UsesSASL() {
		c.sasl = s.newSASLConn(c, l)
		fr.SetMaxFrame(int(s.cfg.SASLMaxReceiveSize))
	}
	return c, nil
}

// stopReading makes the reader stop at the next frame boundary (or abort
// the frame it is reading); requests already read are still answered.
func (c *conn) stopReading() {
	c.stopMu.Lock()
	c.stopped = true
	c.stopMu.Unlock()
	c.cancelRead()
	_ = c.nc.SetReadDeadline(time.Now())
}

// armRead sets the read deadline unless the reader has been stopped; the
// check and the set happen under one lock so a concurrent stopReading is
// never overwritten.
//
// Moving a deadline costs a runtime timer update and a clock read, once
// per request, so a deadline already set at most deadlineSlack(d) before
// the one asked for is left as it is: the idle timeout then fires up to
// that much early.
func (c *conn) armRead(d time.Duration) bool {
	t := time.Now().Add(d)
	c.stopMu.Lock()
	defer c.stopMu.Unlock()
	if c.stopped {
		return false
	}
	if !c.readDeadline.After(t) && t.Sub(c.readDeadline) <= deadlineSlack(d) {
		return true
	}
	c.readDeadline = t
	_ = c.nc.SetReadDeadline(t)
	return true
}

// deadlineSlack is how much earlier than asked an idle or write deadline
// of d may be left standing: a 32nd (about 19 s of a 10-minute idle
// timeout, 1 s of a 30 s request timeout).
func deadlineSlack(d time.Duration) time.Duration { return d / 32 }

func (c *conn) armAt(t time.Time) bool {
	c.stopMu.Lock()
	defer c.stopMu.Unlock()
	if c.stopped {
		return false
	}
	c.readDeadline = t
	_ = c.nc.SetReadDeadline(t)
	return true
}

func (c *conn) isStopped() bool {
	c.stopMu.Lock()
	defer c.stopMu.Unlock()
	return c.stopped
}

func (c *conn) serve() {
	defer c.s.removeConn(c)
	if tc, ok := c.nc.(*tls.Conn); ok && !c.handshake(tc) {
		return
	}
	writerDone := make(chan struct{})
	go func() {
		defer close(writerDone)
		c.writeLoop()
	}()
	handlerExited := make(chan struct{})
	go func() {
		defer close(handlerExited)
		c.handleLoop()
	}()
	err := c.readLoop()
	close(c.handoff)
	<-handlerExited
	if c.handlerErr != nil {
		err = c.handlerErr
	}
	close(c.queue)
	<-writerDone
	c.cancelRead()
	var refused *connRefusal
	if errors.As(err, &refused) {
		// Counted before the close, so a client that sees the close
		// also sees the count.
		c.s.refusals[refused.reason].Add(1)
	}
	c.nc.Close()
	var saslRefused *saslRefusal
	switch {
	case errors.As(err, &refused):
		c.logRefusal(refused)
	case errors.As(err, &saslRefused):
		c.logSASLRefusal(saslRefused)
	case c.handlerErr != nil:
		c.log.Info("connection closed", "reason", err.Error())
	case err == nil, errors.Is(err, io.EOF), c.isStopped():
		c.log.Debug("connection closed")
	default:
		c.log.Info("connection closed", "reason", err.Error())
	}
}

// errClose is returned by the reader for input that closes the connection
// as Kafka closes it (unknown key, unsupported version, oversized or
// undecodable frame).
type errClose struct{ msg string }

func (e *errClose) Error() string { return e.msg }

func closeErr(format string, args ...any) error { return &errClose{msg: fmt.Sprintf(format, args...)} }

func (c *conn) readLoop() error {
	fr := &frameDeadlines{c: c, r: bufio.NewReaderSize(c.nc, 16<<10)}
	for {
		// Between frames the idle timeout applies; once a frame's size
		// has been read the frame reader paces its body (minimum rate
		// after a grace, the request timeout for the whole body) through
		// frameDeadlines, so a peer stalling mid-frame is dropped.
		// A size already buffered is read without blocking: then the
		// deadline is left as it is (the next read that can block, of a
		// body or of a size, arms its own first).
		if fr.r.Buffered() >= 4 {
			if c.isStopped() {
				return nil
			}
		} else if !c.armRead(c.s.cfg.IdleTimeout) {
			return nil
		}
		c.applySASLFrameLimit()
		fr.n = 0
		frame, err := c.frames.ReadFrame(c.ctx, fr)
		if err != nil {
			if c.isStopped() {
				return nil
			}
			var fe *hotpath.FrameError
			var ne net.Error
			switch {
			case errors.As(err, &fe):
				if r := c.saslFrameRefusal(fe); r != nil {
					return r
				}
				return c.frameRefusal(fe)
			case errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, io.EOF) && fr.n > 0:
				return &connRefusal{reason: refusedTruncated, msg: fmt.Sprintf("truncated frame: connection ended inside a frame size (%d of 4 bytes)", fr.n)}
			case errors.As(err, &ne) && ne.Timeout():
				return fmt.Errorf("idle for %s", c.s.cfg.IdleTimeout)
			}
			return err
		}
		if len(frame.Buf) >= handoffBytes && c.mayHandOff() || c.handing.Load() > 0 {
			c.handing.Add(1)
			select {
			case c.handoff <- handedFrame{frame, time.Now()}:
				continue
			case <-c.handlerDone:
				frame.Release()
				return nil // serve reports the handler's error
			}
		}
		p, err := c.handleFrame(frame, time.Time{})
		if p != nil {
			c.queue <- p
		}
		if err != nil {
			c.waitFailedAuthDelay(err, c.ctx.Done())
			return err
		}
	}
}

// handleLoop is the handler goroutine: it handles the frames the reader
// hands off, in order. After a failure it stops the reader and releases
// whatever is still handed to it.
func (c *conn) handleLoop() {
	failed := false
	for hf := range c.handoff {
		if failed {
			hf.frame.Release()
			continue
		}
		p, err := c.handleFrame(hf.frame, hf.at)
		if p != nil {
			c.queue <- p
		}
		if err != nil {
			failed = true
			c.waitFailedAuthDelay(err, c.s.baseCtx.Done())
			c.handlerErr = err
			close(c.handlerDone)
			c.stopReading()
			continue
		}
		c.handing.Add(-1)
	}
}

// frameDeadlines is the reader under hotpath.FrameReader: it counts the
// bytes of the current frame and lets the frame reader move the
// connection's read deadline (hotpath.ReadDeadliner), unless the reader
// has been stopped.
type frameDeadlines struct {
	c *conn
	r *bufio.Reader
	n int
}

// Buffered is how many bytes the reader holds already
// (hotpath.Buffered: a body held whole is read without deadlines).
func (f *frameDeadlines) Buffered() int { return f.r.Buffered() }

func (f *frameDeadlines) Read(p []byte) (int, error) {
	n, err := f.r.Read(p)
	f.n += n
	return n, err
}

// errStopped fails a frame read once the connection stops reading.
var errStopped = errors.New("connection stopped reading")

func (f *frameDeadlines) SetReadDeadline(t time.Time) error {
	if !f.c.armAt(t) {
		return errStopped
	}
	return nil
}

// handleFrame parses and decodes a frame and runs its handler. It owns
// the frame: on success the pending entry holds it until the response is
// written; on error (which closes the connection) it is released here,
// except for a SASL refusal that is answered first: then the pending
// entry comes back with the error.
//
// handedAt is when the reader handed the frame to the handler goroutine
// (zero: handled by the reader itself).
func (c *conn) handleFrame(frame hotpath.Frame, handedAt time.Time) (*pending, error) {
	if c.sasl != nil {
		if err := c.sasl.admit(frame.Buf); err != nil {
			frame.Release()
			return nil, err
		}
	}
	p, e, req, err := decodeFrameCached(frame.Buf, &c.clientID)
	if err != nil {
		frame.Release()
		return nil, err
	}
	p.frame = frame
	p.start = time.Now()
	p.handled, p.ready, p.queued = time.Time{}, time.Time{}, 0
	if !handedAt.IsZero() {
		p.queued = p.start.Sub(handedAt)
	}
	p.ctx.init(c.s.baseCtx, p.start.Add(c.s.cfg.RequestTimeout))
	p.ctx.w = c.wait
	if p.reply != nil {
		return p, nil
	}
	req.ConnID, req.Remote = c.id, c.nc.RemoteAddr()
	req.Listener, req.Principal, req.Host = c.listener, c.principal, c.host
	req.Received = p.start
	req.sasl = c.sasl
	req.frame = &p.frame
	reply, err := callHandler(&p.ctx, c.s, e, req)
	p.handled = time.Now()
	req.frame = nil
	if req.kept {
		// The handler owns the frame now.
		p.frame = hotpath.Frame{}
	}
	if err != nil {
		p.ctx.release()
		p.frame.Release()
		return nil, closeErr("%s v%d (correlation id %d): %v", apiName(req.Key), req.Version, req.CorrelationID, err)
	}
	p.reply = reply
	return p, c.sasl.takeClosing()
}

func (c *conn) writeLoop() {
	bw := bufio.NewWriterSize(c.nc, 32<<10)
	buf := make([]byte, 0, 4<<10)
	broken := false
	for p := range c.queue {
		if broken {
			c.finish(p, nil)
			continue
		}
		reply := p.reply
		if d, ok := reply.(DeferredReply); ok {
			r, err := d.Await(&p.ctx)
			if err != nil {
				c.log.Warn("request failed after decode; closing connection", "api", apiName(p.key),
					"correlation_id", p.correlationID, "err", err)
				broken = true
				c.nc.Close()
				c.finish(p, nil)
				continue
			}
			reply = r
		}
		if reply == nil {
			c.finish(p, nil)
			continue
		}
		p.ready = time.Now()
		var err error
		buf, err = c.writeResponse(bw, buf[:0], p, reply)
		if err == nil && len(c.queue) == 0 {
			err = bw.Flush()
		}
		c.finish(p, reply)
		if err != nil {
			c.log.Debug("write failed", "err", err)
			broken = true
			c.nc.Close()
		}
		if cap(buf) > 1<<20 {
			buf = make([]byte, 0, 4<<10)
		}
	}
	if !broken {
		_ = bw.Flush()
	}
}

// finish releases a request's resources once its answer (reply, nil when
// none was written) is done with: the reply, the deferred reply it came
// from, the handler context and the frame.
func (c *conn) finish(p *pending, reply Reply) {
	if r, ok := reply.(Releaser); ok {
		r.Release()
	}
	if h, ok := p.reply.(frameHolder); ok && !h.Settled() {
		f := p.frame
		p.frame = hotpath.Frame{}
		h.ReleaseWhenSettled(f.Release)
	}
	if _, ok := p.reply.(DeferredReply); ok {
		if r, ok := p.reply.(Releaser); ok {
			r.Release()
		}
	}
	c.s.requestDone(p)
	p.ctx.release()
	p.frame.Release()
}

// writeResponse frames reply: size, correlation id, the header's empty
// tagged fields for header v1, then the body.
func (c *conn) writeResponse(bw *bufio.Writer, buf []byte, p *pending, reply Reply) ([]byte, error) {
	// p.ready was read just before; the deadline is moved only once it
	// falls behind by more than the slack (as the idle deadline).
	if t := p.ready.Add(c.s.cfg.RequestTimeout); t.Sub(c.writeDeadline) > deadlineSlack(c.s.cfg.RequestTimeout) {
		c.writeDeadline = t
		_ = c.nc.SetWriteDeadline(t)
	}
	buf = append(buf, 0, 0, 0, 0)
	buf = binary.BigEndian.AppendUint32(buf, uint32(p.correlationID))
	if p.headerV1 {
		buf = append(buf, 0)
	}
	if v, ok := reply.(VectoredReply); ok {
		bufs := v.BodyBuffers()
		n := len(buf) - 4
		for _, b := range bufs {
			n += len(b)
		}
		binary.BigEndian.PutUint32(buf, uint32(n))
		if _, isTLS := c.nc.(*tls.Conn); isTLS {
			// No writev through TLS: each buffer would be a record and a
			// write of its own; the buffered writer packs small ones.
			if _, err := bw.Write(buf); err != nil {
				return buf, err
			}
			for _, b := range bufs {
				if _, err := bw.Write(b); err != nil {
					return buf, err
				}
			}
			return buf, nil
		}
		if err := bw.Flush(); err != nil {
			return buf, err
		}
		all := append(net.Buffers{buf}, bufs...)
		_, err := all.WriteTo(c.nc)
		return buf, err
	}
	buf = reply.AppendTo(buf)
	binary.BigEndian.PutUint32(buf, uint32(len(buf)-4))
	_, err := bw.Write(buf)
	return buf, err
}

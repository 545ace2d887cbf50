package hotpath

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/bits"
	"sync"

	"github.com/verbatim-kafka/verbatim/budget"
)

// Frame buffers: power-of-two size classes backed by sync.Pools, and byte
// budgets that bound the request bytes in flight per connection and per
// broker. Acquiring blocks (with a context) when a budget is spent, so a
// connection that sends faster than the broker appends simply stops being
// read: TCP back-pressure instead of unbounded memory.

const (
	minClassShift = 12 // 4 KiB
	maxClassShift = 27 // 128 MiB
	numClasses    = maxClassShift - minClassShift + 1
)

var classPools [numClasses]sync.Pool

// classOf returns the size class index for n bytes (n >= 1).
func classOf(n int) int {
	if n <= 1<<minClassShift {
		return 0
	}
	return bits.Len(uint(n-1)) - minClassShift
}

// classSize is the capacity of buffers of class c.
func classSize(c int) int { return 1 << (c + minClassShift) }

// getBuffer returns a buffer of length n from its class pool, and the pool
// handle to give back.
func getBuffer(n int) ([]byte, *[]byte) {
	c := classOf(n)
	if p, _ := classPools[c].Get().(*[]byte); p != nil {
		return (*p)[:n], p
	}
	b := make([]byte, classSize(c))
	return b[:n], &b
}

func putBuffer(p *[]byte) {
	c := classOf(cap(*p))
	if classSize(c) != cap(*p) {
		return // not one of ours
	}
	classPools[c].Put(p)
}

// ErrFrameTooLarge is returned for a frame larger than the configured
// maximum; the broker closes the connection, as Kafka does when a request
// exceeds socket.request.max.bytes.
var ErrFrameTooLarge = errors.New("hotpath: request frame too large")

// FrameReader reads size-prefixed request frames for one connection into
// pooled buffers, charging each frame to the connection's and the broker's
// budgets until it is released.
type FrameReader struct {
	conn, broker *budget.Budget
	maxFrame     int
	size         [4]byte
}

// NewFrameReader returns a reader for one connection. connBytes bounds the
// request bytes in flight on the connection, broker (shared by every
// connection, may be nil) the broker-wide total; maxFrame bounds one frame
// (Kafka's socket.request.max.bytes) and must fit both budgets.
func NewFrameReader(connBytes int64, broker *budget.Budget, maxFrame int) (*FrameReader, error) {
	if maxFrame > 0 && classOf(maxFrame) >= numClasses {
		return nil, fmt.Errorf("hotpath: max frame %d above the largest size class %d", maxFrame, classSize(numClasses-1))
	}
	if maxFrame <= 0 || int64(classSize(classOf(maxFrame))) > connBytes ||
		(broker != nil && int64(classSize(classOf(maxFrame))) > broker.Limit()) {
		return nil, fmt.Errorf("hotpath: max frame %d (class %d) does not fit the connection budget %d / broker budget",
			maxFrame, classSize(classOf(maxFrame)), connBytes)
	}
	return &FrameReader{conn: budget.New(connBytes), broker: broker, maxFrame: maxFrame}, nil
}

// Frame is one request frame (without its size prefix) in a pooled buffer.
// Release it once the response has been written and nothing aliases it.
type Frame struct {
	Buf     []byte
	pooled  *[]byte
	charged int64
	owner   *FrameReader
}

// ReadFrame reads the next frame from r: the 4-byte size, then (after
// acquiring budget for the buffer's size class, blocking if the connection
// or the broker is over budget) the body in one read. io.EOF is returned
// only at a frame boundary.
func (fr *FrameReader) ReadFrame(ctx context.Context, r io.Reader) (Frame, error) {
	if _, err := io.ReadFull(r, fr.size[:]); err != nil {
		return Frame{}, err
	}
	n := int(int32(binary.BigEndian.Uint32(fr.size[:])))
	if n < 0 || n > fr.maxFrame {
		return Frame{}, fmt.Errorf("%w: %d bytes, maximum %d", ErrFrameTooLarge, n, fr.maxFrame)
	}
	charge := int64(classSize(classOf(max(n, 1))))
	if err := fr.conn.Acquire(ctx, charge); err != nil {
		return Frame{}, err
	}
	if fr.broker != nil {
		if err := fr.broker.Acquire(ctx, charge); err != nil {
			fr.conn.Release(charge)
			return Frame{}, err
		}
	}
	buf, p := getBuffer(max(n, 1))
	f := Frame{Buf: buf[:n], pooled: p, charged: charge, owner: fr}
	if _, err := io.ReadFull(r, f.Buf); err != nil {
		f.Release()
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return Frame{}, err
	}
	return f, nil
}

// Release returns the buffer to its pool and the bytes to the budgets. It
// is a no-op on a zero Frame; calling it twice is a bug.
func (f *Frame) Release() {
	if f.owner == nil {
		return
	}
	putBuffer(f.pooled)
	f.owner.conn.Release(f.charged)
	if f.owner.broker != nil {
		f.owner.broker.Release(f.charged)
	}
	*f = Frame{}
}

// InFlight returns the bytes charged to this connection.
func (fr *FrameReader) InFlight() int64 { return fr.conn.InUse() }

// Close fails reads blocked on this connection's budget.
func (fr *FrameReader) Close() { fr.conn.Close() }

package hotpath

import (
	"io"
	"net"
)

// ResponseWriter coalesces response frames that are ready at the same time
// into one vectored write (net.Buffers: writev on TCP connections), then
// gives their buffers back to the response pool. One per connection, used
// by its writer goroutine only.
type ResponseWriter struct {
	bufs net.Buffers
	held []*[]byte
	// MaxPending bounds the frames held before Add reports that a flush
	// is due (writev takes up to 1024 iovecs per call).
	MaxPending int
}

// Add queues a response frame built in a buffer from GetResponseBuffer; the
// writer owns it from now on. It reports whether the caller should Flush
// now because MaxPending frames are waiting.
func (rw *ResponseWriter) Add(p *[]byte) bool {
	rw.bufs = append(rw.bufs, *p)
	rw.held = append(rw.held, p)
	limit := rw.MaxPending
	if limit <= 0 {
		limit = 1024
	}
	return len(rw.held) >= limit
}

// Pending returns the number of frames waiting.
func (rw *ResponseWriter) Pending() int { return len(rw.held) }

// Flush writes every queued frame, in order, with as few syscalls as the
// connection allows, and recycles the buffers (also on error: the
// connection is then unusable anyway).
func (rw *ResponseWriter) Flush(w io.Writer) error {
	if len(rw.held) == 0 {
		return nil
	}
	bufs := rw.bufs // WriteTo consumes its receiver; keep our backing array
	_, err := bufs.WriteTo(w)
	for i, p := range rw.held {
		PutResponseBuffer(p)
		rw.held[i] = nil
	}
	clear(rw.bufs)
	rw.bufs, rw.held = rw.bufs[:0], rw.held[:0]
	return err
}

package benchmarks

// The reference copier of the cluster link benchmark (`make bench-link`):
// the least a copy from a Kafka source into a broker must do. It fetches
// the partitions raw from the source with the link's fetch shape (one
// KIP-227 fetch session per source broker, multi-partition requests,
// read_uncommitted, the link's fetch sizes) and writes every fetched batch
// into the write-only Sink over the wire: no registration, no expected
// offsets, no index, no epoch bookkeeping, no state.

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/verbatim-kafka/verbatim/client"
	"github.com/verbatim-kafka/verbatim/mirror"
)

// RefCopyOptions configures RefCopy.
type RefCopyOptions struct {
	Cluster *client.Cluster // the source (its Options dial the sessions)
	// Ends are the partitions to copy and the offset each is copied up
	// to (from offset 0).
	Ends map[client.TopicPartition]int64
	Sink string // the write-only Sink's address
	// Sessions is the number of fetch sessions (each its own connection,
	// partitions spread round-robin) per source broker; default 2, as the
	// link's runner.
	Sessions int
	// PartitionBytes and ResponseBytes are the fetch sizes: the link's
	// 4 MiB per partition and 32 MiB per response by default.
	PartitionBytes, ResponseBytes int32
	// InFlight bounds the Produce requests outstanding on a session's
	// sink connection (default 8): the back-pressure from the sink.
	InFlight int
}

// RefCopyResult is what RefCopy moved.
type RefCopyResult struct {
	Bytes   int64 // batch bytes fetched and written
	Elapsed time.Duration
}

// RefCopy copies every partition of o.Ends from offset 0 to its end into
// the sink: each session sends one fetch request at a time for all its
// partitions not yet copied, cuts each answer into whole batches (a
// partial trailing batch is fetched again), and sends what a response
// carried as one Produce request (v9, acks=-1) on its own sink connection:
// a writer goroutine encodes and sends it while the next fetch is under
// way, with up to InFlight requests unanswered. It returns once every
// write was acknowledged.
func RefCopy(ctx context.Context, o RefCopyOptions) (RefCopyResult, error) {
	if o.Sessions <= 0 {
		o.Sessions = 2
	}
	if o.PartitionBytes <= 0 {
		o.PartitionBytes = 4 << 20
	}
	if o.ResponseBytes <= 0 {
		o.ResponseBytes = 32 << 20
	}
	if o.InFlight <= 0 {
		o.InFlight = 8
	}
	start := time.Now()
	// Every session's partitions, by leader.
	var groups [][]client.TopicPartition
	byAddr := map[string]int{}
	seen := map[string]int{}
	for tp := range o.Ends {
		addr, _, err := o.Cluster.LeaderAddr(ctx, tp.Topic, tp.Partition)
		if err != nil {
			return RefCopyResult{}, err
		}
		i, ok := byAddr[addr]
		if !ok {
			i = len(groups)
			byAddr[addr] = i
			for range o.Sessions {
				groups = append(groups, nil)
			}
		}
		g := i + seen[addr]%o.Sessions
		seen[addr]++
		groups[g] = append(groups[g], tp)
	}
	addrOf := make([]string, len(groups))
	for addr, i := range byAddr {
		for j := range o.Sessions {
			addrOf[i+j] = addr
		}
	}
	var total atomic.Int64
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	errs := make(chan error, len(groups))
	var wg sync.WaitGroup
	for i, tps := range groups {
		if len(tps) == 0 {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			n, err := refSession(ctx, o, addrOf[i], tps)
			total.Add(n)
			if err != nil {
				errs <- err
				cancel()
			}
		}()
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		return RefCopyResult{}, err
	}
	return RefCopyResult{Bytes: total.Load(), Elapsed: time.Since(start)}, nil
}

// refSession copies tps through one fetch session with the broker at
// addr into one sink connection.
func refSession(ctx context.Context, o RefCopyOptions, addr string, tps []client.TopicPartition) (int64, error) {
	cn, err := client.Dial(ctx, addr, o.Cluster.Options())
	if err != nil {
		return 0, err
	}
	defer cn.Close()
	sess := client.NewFetchSession(cn)
	sc, err := dialSinkConn(o.Sink, o.InFlight)
	if err != nil {
		return 0, err
	}
	defer sc.close()
	// The writer: encodes and sends what the fetch loop hands it.
	reqs := make(chan *kmsg.ProduceRequest, o.InFlight)
	werr := make(chan error, 1)
	go func() {
		var err error
		for req := range reqs {
			if err == nil {
				err = sc.send(req)
			}
		}
		if err == nil {
			err = sc.drain()
		}
		werr <- err
	}()
	copied, err := refFetch(ctx, o, sess, tps, reqs)
	close(reqs)
	if werr := <-werr; err == nil {
		err = werr
	}
	return copied, err
}

// refFetch is a session's fetch loop: it hands each response's batches to
// the writer as one Produce request.
func refFetch(ctx context.Context, o RefCopyOptions, sess *client.FetchSession, tps []client.TopicPartition, reqs chan<- *kmsg.ProduceRequest) (int64, error) {
	next := make(map[client.TopicPartition]int64, len(tps))
	for _, tp := range tps {
		if o.Ends[tp] > 0 {
			next[tp] = 0
		}
	}
	var copied int64
	want := make([]client.SessionPartition, 0, len(next))
	for len(next) > 0 {
		want = want[:0]
		for _, tp := range tps {
			if off, ok := next[tp]; ok {
				want = append(want, client.SessionPartition{TopicPartition: tp, Offset: off, MaxBytes: o.PartitionBytes, CurrentEpoch: -1, LastFetchedEpoch: -1})
			}
		}
		resp, err := sess.Fetch(ctx, want, client.SessionOptions{MaxWaitMs: 500, MinBytes: 1, MaxBytes: o.ResponseBytes, Isolation: client.ReadUncommitted})
		if err != nil {
			return copied, err
		}
		req := kmsg.NewPtrProduceRequest()
		req.Version, req.Acks, req.TimeoutMillis = ProduceVersion, -1, 30000
		topics := map[string]int{}
		for _, a := range resp.Answers {
			if a.Err != nil {
				return copied, fmt.Errorf("fetch %s at %d: %w", a.TopicPartition, next[a.TopicPartition], a.Err)
			}
			from, ok := next[a.TopicPartition]
			if !ok {
				continue
			}
			bs, span, _, err := mirror.Split(a.Records, from)
			if err != nil {
				return copied, fmt.Errorf("%s at %d: %w", a.TopicPartition, from, err)
			}
			if len(bs) == 0 {
				continue
			}
			ti := client.TopicEntry(topics, &req.Topics, a.Topic, func() kmsg.ProduceRequestTopic {
				rt := kmsg.NewProduceRequestTopic()
				rt.Topic = a.Topic
				return rt
			})
			rp := kmsg.NewProduceRequestTopicPartition()
			rp.Partition, rp.Records = a.Partition, span
			req.Topics[ti].Partitions = append(req.Topics[ti].Partitions, rp)
			copied += int64(len(span))
			if n := mirror.LastOffset(bs[len(bs)-1]) + 1; n >= o.Ends[a.TopicPartition] {
				delete(next, a.TopicPartition)
			} else {
				next[a.TopicPartition] = n
			}
		}
		if len(req.Topics) > 0 {
			select {
			case reqs <- req:
			case <-ctx.Done():
				return copied, ctx.Err()
			}
		}
	}
	return copied, nil
}

// sinkConn is one connection to the Sink with up to inFlight Produce
// requests outstanding; a reader checks the answers in order.
type sinkConn struct {
	c       net.Conn
	w       *bufio.Writer
	slots   chan struct{}
	corr    int32
	buf     []byte
	readErr chan error
	mu      sync.Mutex
	err     error
	sent    int32
	read    atomic.Int32
	done    chan struct{}
}

func dialSinkConn(addr string, inFlight int) (*sinkConn, error) {
	c, err := net.Dial("tcp", addr)
	if err != nil {
		return nil, err
	}
	s := &sinkConn{c: c, w: bufio.NewWriterSize(c, 64<<10), slots: make(chan struct{}, inFlight), done: make(chan struct{})}
	go s.readLoop()
	return s, nil
}

func (s *sinkConn) fail(err error) {
	s.mu.Lock()
	if s.err == nil {
		s.err = err
	}
	s.mu.Unlock()
}

func (s *sinkConn) failed() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err
}

// send writes req, waiting first for a free slot.
func (s *sinkConn) send(req *kmsg.ProduceRequest) error {
	select {
	case s.slots <- struct{}{}:
	case <-s.done:
		return s.failed()
	}
	if err := s.failed(); err != nil {
		return err
	}
	b := s.buf[:0]
	b = append(b, 0, 0, 0, 0)
	b = binary.BigEndian.AppendUint16(b, 0) // Produce
	b = binary.BigEndian.AppendUint16(b, uint16(req.Version))
	b = binary.BigEndian.AppendUint32(b, uint32(s.corr))
	const id = "link-bench-ref"
	b = binary.BigEndian.AppendUint16(b, uint16(len(id)))
	b = append(b, id...)
	b = append(b, 0) // request header v2 tagged fields
	b = req.AppendTo(b)
	binary.BigEndian.PutUint32(b, uint32(len(b)-4))
	s.buf = b
	s.corr++
	s.sent++
	if _, err := s.w.Write(b); err != nil {
		return err
	}
	return s.w.Flush()
}

// readLoop reads answers in order and fails on any partition error.
func (s *sinkConn) readLoop() {
	defer close(s.done)
	r := bufio.NewReaderSize(s.c, 64<<10)
	var hdr [4]byte
	for corr := int32(0); ; corr++ {
		if _, err := io.ReadFull(r, hdr[:]); err != nil {
			if !errors.Is(err, net.ErrClosed) {
				s.fail(fmt.Errorf("sink answer %d: %w", corr, err))
			}
			return
		}
		body := make([]byte, binary.BigEndian.Uint32(hdr[:]))
		if _, err := io.ReadFull(r, body); err != nil {
			s.fail(fmt.Errorf("sink answer %d: %w", corr, err))
			return
		}
		if got := int32(binary.BigEndian.Uint32(body)); got != corr || len(body) < 5 {
			s.fail(fmt.Errorf("sink answer %d has correlation id %d", corr, got))
			return
		}
		resp := kmsg.NewPtrProduceResponse()
		resp.Version = ProduceVersion
		rest, err := skipTagBuffer(body[4:])
		if err == nil {
			err = resp.ReadFrom(rest)
		}
		for _, t := range resp.Topics {
			for _, p := range t.Partitions {
				if err == nil {
					err = kerr.ErrorForCode(p.ErrorCode)
				}
			}
		}
		if err != nil {
			s.fail(fmt.Errorf("sink answer %d: %w", corr, err))
			return
		}
		s.read.Add(1)
		<-s.slots
	}
}

// drain waits until every request sent was answered.
func (s *sinkConn) drain() error {
	for s.read.Load() < s.sent {
		select {
		case <-s.done:
			if err := s.failed(); err != nil {
				return err
			}
			return errors.New("sink connection closed with answers outstanding")
		case <-time.After(time.Millisecond):
		}
	}
	return s.failed()
}

func (s *sinkConn) close() {
	s.c.Close()
	<-s.done
}

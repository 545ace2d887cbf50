package benchmarks

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"sync"
	"syscall"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/verbatim-kafka/verbatim/kbatch"
	"github.com/verbatim-kafka/verbatim/wireext"
)

// Sink is the reference server of `make bench-ingest`: the least a Kafka
// produce endpoint must do. It reads Produce frames (v3+; anything else
// closes the connection), checks the structure and CRC-32C of every batch,
// appends the bytes to one file per partition and answers with a valid
// Produce response. With Durable set, a partition's writer group-commits:
// it writes every append queued since its last sync, calls fdatasync once
// and only then acknowledges them all (the pattern of Verbatim's
// --flush always). It keeps no index and assigns offsets only in the
// answer, so it is an upper bound, not a broker.
type Sink struct {
	Dir     string
	Durable bool

	mu    sync.Mutex
	parts map[string]*sinkPartition
	wg    sync.WaitGroup
}

type sinkAppend struct {
	data []byte
	recs int64
	base int64
	err  error
	done chan struct{}
}

type sinkPartition struct {
	f    *os.File
	q    chan *sinkAppend
	next int64
}

// Serve accepts connections until ln is closed.
func (s *Sink) Serve(ln net.Listener) error {
	s.mu.Lock()
	if s.parts == nil {
		s.parts = map[string]*sinkPartition{}
	}
	s.mu.Unlock()
	for {
		c, err := ln.Accept()
		if err != nil {
			return err
		}
		go s.serveConn(c)
	}
}

// Close stops the partition writers and closes their files, once every
// connection is done (the caller closes the listener and its clients
// first). Calling it again does nothing.
func (s *Sink) Close() {
	s.mu.Lock()
	for k, p := range s.parts {
		close(p.q)
		delete(s.parts, k)
	}
	s.mu.Unlock()
	s.wg.Wait()
}

func (s *Sink) partition(topic string, part int32) (*sinkPartition, error) {
	key := fmt.Sprintf("%s-%d", topic, part)
	s.mu.Lock()
	defer s.mu.Unlock()
	if p := s.parts[key]; p != nil {
		return p, nil
	}
	if topic == "" || filepath.Base(topic) != topic || part < 0 {
		return nil, kerr.UnknownTopicOrPartition
	}
	f, err := os.OpenFile(filepath.Join(s.Dir, key+".log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	p := &sinkPartition{f: f, q: make(chan *sinkAppend, 1024)}
	s.parts[key] = p
	s.wg.Add(1)
	go s.write(p)
	return p, nil
}

// write is the partition's single writer: it takes every queued append,
// writes them in order, syncs once when durable, then acknowledges them.
func (s *Sink) write(p *sinkPartition) {
	defer s.wg.Done()
	defer p.f.Close()
	group := make([]*sinkAppend, 0, 256)
	for a := range p.q {
		group = append(group[:0], a)
	drain:
		for len(group) < cap(group) {
			select {
			case more, ok := <-p.q:
				if !ok {
					break drain
				}
				group = append(group, more)
			default:
				break drain
			}
		}
		var err error
		for _, g := range group {
			if err == nil {
				_, err = p.f.Write(g.data)
			}
			g.base = p.next
			p.next += g.recs
		}
		if err == nil && s.Durable {
			err = syscall.Fdatasync(int(p.f.Fd()))
		}
		for _, g := range group {
			g.err = err
			close(g.done)
		}
	}
}

// pendingReply is one request's answer in connection order.
type pendingReply struct {
	corr    int32
	version int16
	req     *kmsg.ProduceRequest
	appends [][]*sinkAppend // per topic, per partition; nil when refused
	codes   [][]int16
	buf     *[]byte
}

var framePool = sync.Pool{New: func() any { b := make([]byte, 0, 64<<10); return &b }}

func (s *Sink) serveConn(c net.Conn) {
	defer c.Close()
	replies := make(chan *pendingReply, 256)
	writerDone := make(chan struct{})
	go func() {
		defer close(writerDone)
		w := bufio.NewWriterSize(c, 16<<10)
		var out []byte
		for r := range replies {
			out = s.answer(out[:0], r)
			framePool.Put(r.buf)
			if _, err := w.Write(out); err != nil {
				c.Close()
				continue
			}
			if len(replies) == 0 {
				if err := w.Flush(); err != nil {
					c.Close()
				}
			}
		}
	}()
	defer func() {
		close(replies)
		<-writerDone
	}()
	r := bufio.NewReaderSize(c, 64<<10)
	var hdr [4]byte
	for {
		if _, err := io.ReadFull(r, hdr[:]); err != nil {
			return
		}
		size := int(binary.BigEndian.Uint32(hdr[:]))
		if size < 8 || size > 100<<20 {
			return
		}
		bp := framePool.Get().(*[]byte)
		if cap(*bp) < size {
			*bp = make([]byte, size)
		}
		body := (*bp)[:size]
		if _, err := io.ReadFull(r, body); err != nil {
			return
		}
		pr, err := s.decode(body)
		if err != nil {
			return // as Kafka: an unparsable request closes the connection
		}
		pr.buf = bp
		replies <- pr
	}
}

// parseProduceFrame parses a request frame body (after the size): it must
// be a Produce request, v3 to v12 (v13 names topics by ID, which the sink
// does not keep).
func parseProduceFrame(body []byte) (corr int32, version int16, req *kmsg.ProduceRequest, err error) {
	if len(body) < 10 {
		return 0, 0, nil, errors.New("sink: short header")
	}
	key := int16(binary.BigEndian.Uint16(body))
	version = int16(binary.BigEndian.Uint16(body[2:]))
	corr = int32(binary.BigEndian.Uint32(body[4:]))
	if key != 0 || version < 3 || version > 12 {
		return 0, 0, nil, fmt.Errorf("sink: unsupported request key %d v%d", key, version)
	}
	b := body[8:]
	cl := int(int16(binary.BigEndian.Uint16(b)))
	b = b[2:]
	if cl > 0 {
		if len(b) < cl {
			return 0, 0, nil, errors.New("sink: short client id")
		}
		b = b[cl:]
	}
	req = kmsg.NewPtrProduceRequest()
	req.Version = version
	if req.IsFlexible() {
		if b, err = skipTagBuffer(b); err != nil {
			return 0, 0, nil, err
		}
	}
	if err := req.ReadFrom(b); err != nil {
		return 0, 0, nil, err
	}
	return corr, version, req, nil
}

// decode parses a Produce request, checks its batches and queues their
// appends.
func (s *Sink) decode(body []byte) (*pendingReply, error) {
	corr, version, req, err := parseProduceFrame(body)
	if err != nil {
		return nil, err
	}
	pr := &pendingReply{corr: corr, version: version, req: req}
	pr.appends = make([][]*sinkAppend, len(req.Topics))
	pr.codes = make([][]int16, len(req.Topics))
	for ti := range req.Topics {
		t := &req.Topics[ti]
		pr.appends[ti] = make([]*sinkAppend, len(t.Partitions))
		pr.codes[ti] = make([]int16, len(t.Partitions))
		for pi := range t.Partitions {
			p := &t.Partitions[pi]
			recs, err := checkBatches(p.Records)
			if err != nil {
				pr.codes[ti][pi] = kerr.CorruptMessage.Code
				continue
			}
			part, err := s.partition(t.Topic, p.Partition)
			if err != nil {
				pr.codes[ti][pi] = kerr.UnknownTopicOrPartition.Code
				continue
			}
			a := &sinkAppend{data: p.Records, recs: recs, done: make(chan struct{})}
			pr.appends[ti][pi] = a
			part.q <- a
		}
	}
	return pr, nil
}

// checkBatches checks the structure and CRC of every batch and returns the
// number of offsets they span.
func checkBatches(set []byte) (int64, error) {
	if len(set) == 0 {
		return 0, errors.New("empty record set")
	}
	var n int64
	for len(set) > 0 {
		batch, rest, err := kbatch.Next(set)
		if err != nil {
			return 0, err
		}
		if batch == nil {
			return 0, errors.New("truncated batch")
		}
		h, err := kbatch.ParseHeader(batch)
		if err != nil {
			return 0, err
		}
		if kbatch.CRC(batch) != h.CRC {
			return 0, errors.New("CRC mismatch")
		}
		n += int64(h.LastOffsetDelta) + 1
		set = rest
	}
	return n, nil
}

func skipTagBuffer(b []byte) ([]byte, error) {
	t := wireext.ReadTags(b)
	for t.Next() {
	}
	if t.Err() != nil {
		return nil, fmt.Errorf("sink: bad tag buffer: %w", t.Err())
	}
	return t.Rest(), nil
}

// answer waits for r's appends and encodes its response frame into out.
func (s *Sink) answer(out []byte, r *pendingReply) []byte {
	resp := kmsg.NewPtrProduceResponse()
	resp.Version = r.version
	for ti := range r.req.Topics {
		t := &r.req.Topics[ti]
		rt := kmsg.NewProduceResponseTopic()
		rt.Topic = t.Topic
		for pi := range t.Partitions {
			rp := kmsg.NewProduceResponseTopicPartition()
			rp.Partition = t.Partitions[pi].Partition
			rp.ErrorCode = r.codes[ti][pi]
			if a := r.appends[ti][pi]; a != nil {
				<-a.done
				if a.err != nil {
					rp.ErrorCode = kerr.KafkaStorageError.Code
				} else {
					rp.BaseOffset = a.base
				}
			}
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	out = append(out, 0, 0, 0, 0)
	out = binary.BigEndian.AppendUint32(out, uint32(r.corr))
	if resp.IsFlexible() {
		out = append(out, 0)
	}
	out = resp.AppendTo(out)
	binary.BigEndian.PutUint32(out, uint32(len(out)-4))
	return out
}

package link

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/verbatim-kafka/verbatim/client"
	"github.com/verbatim-kafka/verbatim/internal/testkit"
	"github.com/verbatim-kafka/verbatim/kbatch"
	"github.com/verbatim-kafka/verbatim/mirror"
)

// memDest is an in-memory destination for partition copies: each
// partition's log is the batches written, in order, at the log end each
// write expected.
type memDest struct {
	mu   sync.Mutex
	logs map[client.TopicPartition]*memLog
	// gate, when set, is waited on before each write is applied.
	gate chan struct{}
}

type memLog struct {
	data    []byte
	end     int64
	last    []byte // the last batch
	writes  int
	written int64
}

func newMemDest() *memDest { return &memDest{logs: map[client.TopicPartition]*memLog{}} }

func (d *memDest) log(tp client.TopicPartition) *memLog {
	d.mu.Lock()
	defer d.mu.Unlock()
	l := d.logs[tp]
	if l == nil {
		l = &memLog{}
		d.logs[tp] = l
	}
	return l
}

// snapshot returns a copy of tp's log bytes and its end.
func (d *memDest) snapshot(tp client.TopicPartition) ([]byte, int64) {
	d.mu.Lock()
	defer d.mu.Unlock()
	l := d.logs[tp]
	if l == nil {
		return nil, 0
	}
	return bytes.Clone(l.data), l.end
}

func (d *memDest) Partition(topic string, p int32) mirror.Dest {
	return memPart{d: d, tp: client.TopicPartition{Topic: topic, Partition: p}}
}

type memPart struct {
	d  *memDest
	tp client.TopicPartition
}

func (p memPart) Leader(context.Context) (mirror.DestConn, int32, error) { return p, 0, nil }
func (p memPart) Broken() bool                                           { return false }

func (p memPart) ListOffset(_ context.Context, ts int64) (client.OffsetAnswer, error) {
	_, end := p.d.snapshot(p.tp)
	if ts == client.Earliest {
		return client.OffsetAnswer{Offset: 0, LeaderEpoch: -1}, nil
	}
	return client.OffsetAnswer{Offset: end, LeaderEpoch: -1}, nil
}

func (p memPart) Fetch(_ context.Context, a client.FetchArgs) (client.FetchResult, error) {
	p.d.mu.Lock()
	defer p.d.mu.Unlock()
	l := p.d.logs[p.tp]
	if l == nil || a.Offset != l.end-1 || l.last == nil {
		return client.FetchResult{}, fmt.Errorf("memDest: only the last batch can be read")
	}
	return client.FetchResult{HighWatermark: l.end, Records: bytes.Clone(l.last)}, nil
}

func (p memPart) DeleteRecords(_ context.Context, w mirror.Writer, _ int64) (int32, error) {
	if w.Epoch == mirror.RegisterEpoch {
		return 1, nil
	}
	return w.Epoch, nil
}

type doneWait struct{ err error }

func (w doneWait) Wait(context.Context) error { return w.err }

// ForwardStartEpoch: the copies of these tests never forward a log start
// (their sources keep all their records).
func (p memPart) ForwardStartEpoch(context.Context, mirror.Writer, int64, int32) error {
	return mirror.ErrStartEpochUnsupported
}

func (p memPart) SendProduce(ctx context.Context, _ mirror.Writer, set []byte, expect int64, _ int32, _ int64) (mirror.ProduceWait, error) {
	if g := p.d.gate; g != nil {
		select {
		case <-g:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	bs, span, partial, err := mirror.Split(set, expect)
	if err != nil || partial || len(bs) == 0 || len(span) != len(set) {
		return doneWait{fmt.Errorf("memDest: %s: a write of %d bytes is not whole batches (%v)", p.tp, len(set), err)}, nil
	}
	l := p.d.log(p.tp)
	p.d.mu.Lock()
	defer p.d.mu.Unlock()
	if expect != l.end || kbatch.BaseOffset(bs[0]) < l.end {
		return doneWait{&mirror.ProduceError{Err: kerr.OffsetOutOfRange, Message: fmt.Sprintf("expected log end %d, log ends at %d, first batch %d", expect, l.end, kbatch.BaseOffset(bs[0]))}}, nil
	}
	l.data = append(l.data, set...)
	l.last = bs[len(bs)-1]
	l.end = mirror.LastOffset(l.last) + 1
	l.writes++
	l.written += int64(len(set))
	return doneWait{}, nil
}

// countingListener counts the TCP connections a source broker accepted.
type countingListener struct {
	net.Listener
	n *atomic.Int64
}

func (l countingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err == nil {
		l.n.Add(1)
	}
	return c, err
}

// countedSource is a kfake cluster whose brokers count the connections
// they accept, by listen address.
type countedSource struct {
	*kfake.Cluster
	mu     sync.Mutex
	counts map[string]*atomic.Int64
}

func startCountedSource(t *testing.T, opts ...kfake.Opt) *countedSource {
	t.Helper()
	s := &countedSource{counts: map[string]*atomic.Int64{}}
	listen := func(network, address string) (net.Listener, error) {
		ln, err := net.Listen(network, address)
		if err != nil {
			return nil, err
		}
		n := &atomic.Int64{}
		s.mu.Lock()
		s.counts[ln.Addr().String()] = n
		s.mu.Unlock()
		return countingListener{Listener: ln, n: n}, nil
	}
	c, err := kfake.NewCluster(append([]kfake.Opt{kfake.ListenFn(listen)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	s.Cluster = c
	return s
}

// accepted returns each broker's accepted connection count.
func (s *countedSource) accepted() map[string]int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[string]int64{}
	for a, n := range s.counts {
		out[a] = n.Load()
	}
	return out
}

func testCtx(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

func kgoClient(t *testing.T, addr string, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(addr), kgo.RecordPartitioner(kgo.ManualPartitioner())}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// produceEach writes per records into every partition of topics, in
// batches of batch records.
func produceEach(t *testing.T, ctx context.Context, cl *kgo.Client, topics []string, parts int32, per, batch int) {
	t.Helper()
	var wg sync.WaitGroup
	var errs atomic.Int64
	for round := 0; round < per; round += batch {
		for _, tp := range topics {
			for p := int32(0); p < parts; p++ {
				for i := round; i < min(round+batch, per); i++ {
					wg.Add(1)
					cl.Produce(ctx, &kgo.Record{Topic: tp, Partition: p, Value: []byte(fmt.Sprintf("%s-%d-%d", tp, p, i))}, func(_ *kgo.Record, err error) {
						if err != nil {
							errs.Add(1)
						}
						wg.Done()
					})
				}
			}
		}
		if err := cl.Flush(ctx); err != nil {
			t.Fatal(err)
		}
	}
	wg.Wait()
	if errs.Load() != 0 {
		t.Fatalf("%d produce errors", errs.Load())
	}
}

// rawSourceLog reads a source partition's bytes from its log start to its
// high watermark, sessionless.
func rawSourceLog(t *testing.T, ctx context.Context, cl *client.Cluster, tp client.TopicPartition) ([]byte, int64) {
	t.Helper()
	return testkit.ReadLog(t, ctx, cl, tp.Topic, tp.Partition)
}

// copyAll runs one PartitionCopy per partition through f into d, until
// the source high watermark read at their start (follow false) or until
// ctx ends (follow true), and returns the copies' errors.
func copyAll(ctx context.Context, f *sourceFetchers, d *memDest, tps []client.TopicPartition, follow bool, clk client.Clock, fetchBytes int32) []error {
	errs := make([]error, len(tps))
	var wg sync.WaitGroup
	for i, tp := range tps {
		c := mirror.NewPartitionCopy(mirror.CopyConfig{Topic: tp.Topic, Partition: tp.Partition, Source: f.Source(tp.Topic, tp.Partition),
			Dest: d.Partition(tp.Topic, tp.Partition), Clock: clk, Follow: follow, FetchBytes: fetchBytes, RetryFor: time.Minute,
			Writer: mirror.Writer{Epoch: mirror.RegisterEpoch, ID: [16]byte{1}}})
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = c.Run(ctx)
		}()
	}
	wg.Wait()
	return errs
}

// partitions lists topics x parts.
func partitions(topics []string, parts int32) []client.TopicPartition {
	var out []client.TopicPartition
	for _, t := range topics {
		for p := int32(0); p < parts; p++ {
			out = append(out, client.TopicPartition{Topic: t, Partition: p})
		}
	}
	return out
}

// sameAsSource checks that every partition of d holds the source's bytes
// up to its high watermark.
func sameAsSource(t *testing.T, ctx context.Context, seed string, d *memDest, tps []client.TopicPartition) {
	t.Helper()
	cl := plainCluster(t, seed)
	for _, tp := range tps {
		want, hw := rawSourceLog(t, ctx, cl, tp)
		got, end := d.snapshot(tp)
		if end != hw || !bytes.Equal(got, want) {
			t.Fatalf("%s: destination ends at %d with %d bytes, source high watermark %d with %d bytes (equal %v)", tp, end, len(got), hw, len(want), bytes.Equal(got, want))
		}
	}
}

// switchProxy forwards connections to a broker and can go down (its
// listener closed, its connections cut: the broker is unreachable) and
// come back on the same address, as a restarting broker does.
type switchProxy struct {
	to, addr string
	accepted atomic.Int64
	mu       sync.Mutex
	ln       net.Listener
	conns    []net.Conn
}

func startSwitchProxy(t *testing.T, to string) *switchProxy {
	t.Helper()
	p := &switchProxy{to: to}
	if err := p.up("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.down)
	return p
}

func (p *switchProxy) up(addr string) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	p.mu.Lock()
	p.ln, p.addr = ln, ln.Addr().String()
	p.mu.Unlock()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			p.accepted.Add(1)
			up, err := net.Dial("tcp", p.to)
			if err != nil {
				c.Close()
				continue
			}
			p.mu.Lock()
			p.conns = append(p.conns, c, up)
			p.mu.Unlock()
			go func() { _, _ = io.Copy(up, c); up.Close() }()
			go func() { _, _ = io.Copy(c, up); c.Close() }()
		}
	}()
	return nil
}

func (p *switchProxy) down() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ln != nil {
		p.ln.Close()
		p.ln = nil
	}
	for _, c := range p.conns {
		c.Close()
	}
	p.conns = nil
}

// dial sends every connection to the broker through the proxy.
func (p *switchProxy) dial(ctx context.Context, network, _ string) (net.Conn, error) {
	var d net.Dialer
	return d.DialContext(ctx, network, p.address())
}

func (p *switchProxy) address() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.addr
}

// plainCluster is a client of the source for the test's own reads, closed
// when the test ends.
func plainCluster(t *testing.T, seed string) *client.Cluster {
	t.Helper()
	cl, err := client.NewCluster(seed, client.Options{ClientID: "link-test-reader"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

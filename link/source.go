package link

// The link's fetch side: every partition copy of a link gets a
// mirror.Source whose Fetch is served by a fetch session shared by all the
// partitions the same source broker leads (client.FetchSession), instead
// of a connection and a long poll per partition. ListOffsets and
// OffsetForLeaderEpoch go over the source cluster's one shared connection
// per broker (client.Cluster), which also carries Metadata.

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/verbatim-kafka/verbatim/client"
	"github.com/verbatim-kafka/verbatim/mirror"
)

// Defaults and bounds of sourceConfig.
const (
	defaultFetchConns = 1
	// linkFetchConns is what a link's runner uses: two sessions keep two
	// requests in flight per broker (Kafka serves one request per
	// connection at a time), so a broker's answer is being read while the
	// next is prepared; with few partitions one session was the limit
	// (benchmarks/README.md "Cluster link").
	linkFetchConns = 2
	// maxFetchConns keeps a link within 4 connections per source broker:
	// the sessions, the cluster's shared connection per broker, and the
	// seed's when the seed names a broker otherwise than it advertises
	// itself.
	maxFetchConns        = 2
	defaultFetchMaxBytes = 32 << 20
	requestTimeout       = 30 * time.Second
)

// sourceConfig configures a link's fetchers.
type sourceConfig struct {
	// Cluster is the source cluster: its shared connection per broker
	// carries Metadata, ListOffsets and OffsetForLeaderEpoch, and its
	// Options dial the fetch sessions' connections.
	Cluster *client.Cluster
	// source is the cluster as the fetchers use it (nil: Cluster's,
	// clientSource); the simulation's fake source cluster sets it.
	source sourceCluster
	Clock  client.Clock
	Log    *slog.Logger
	// FetchConns is the number of fetch sessions (each its own
	// connection) per source broker: default 1, at most 2.
	FetchConns int
	// ThrottleBytesPerSec caps the bytes the link fetches per second
	// (0: unthrottled).
	ThrottleBytesPerSec int64
	// MaxBytes is a fetch response's max bytes (default 32 MiB).
	MaxBytes int32
	// BufferBytes bounds the bytes delivered to copies and not yet
	// appended (budget.go; default 64 MiB): a request goes out only
	// with room for its answer, and asks for no more than the room.
	BufferBytes int64
}

// sourceFetchers are one link's fetch sessions, per source broker.
type sourceFetchers struct {
	cfg    sourceConfig
	ctx    context.Context
	cancel context.CancelFunc
	thr    *throttle
	budget *fetchBudget
	wg     sync.WaitGroup

	mu     sync.Mutex
	loops  map[string][]*sessionLoop // by broker address
	closed bool

	meta  metaCache
	moves atomic.Int64 // partitions rebound to another broker
}

// newSourceFetchers starts a link's fetchers; Close stops them.
func newSourceFetchers(cfg sourceConfig) *sourceFetchers {
	if cfg.Clock == nil {
		cfg.Clock = client.SystemClock{}
	}
	if cfg.source == nil {
		cfg.source = newClientSource(cfg.Cluster)
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	cfg.FetchConns = min(max(cfg.FetchConns, defaultFetchConns), maxFetchConns)
	if cfg.MaxBytes <= 0 {
		cfg.MaxBytes = defaultFetchMaxBytes
	}
	if cfg.BufferBytes <= 0 {
		cfg.BufferBytes = defaultBufferBytes
	}
	ctx, cancel := context.WithCancel(context.Background())
	f := &sourceFetchers{cfg: cfg, ctx: ctx, cancel: cancel, thr: newThrottle(cfg.Clock, cfg.ThrottleBytesPerSec), budget: newFetchBudget(cfg.BufferBytes), loops: map[string][]*sessionLoop{}}
	f.meta.init(cfg.source)
	return f
}

// Close stops every session (pending fetches fail) and closes their
// connections; the cluster's shared connections are the caller's.
func (f *sourceFetchers) Close() {
	f.mu.Lock()
	f.closed = true
	f.mu.Unlock()
	f.cancel()
	f.wg.Wait()
}

// SetThrottle changes the link's rate (bytes/s, 0: unthrottled).
func (f *sourceFetchers) SetThrottle(bytesPerSec int64) { f.thr.setRate(bytesPerSec) }

// Moves is how many times a partition was rebound to another broker's
// session (a leader change).
func (f *sourceFetchers) Moves() int64 { return f.moves.Load() }

// Source is the mirror.Source of one source partition, outside the
// fetch buffer (what it is given is not counted).
func (f *sourceFetchers) Source(topic string, partition int32) mirror.Source {
	return f.sourceWith(topic, partition, nil)
}

// sourceWith is the Source of one partition's copy whose deliveries are
// charged to led (nil: not counted) until the destination appended them.
func (f *sourceFetchers) sourceWith(topic string, partition int32, led *ledger) mirror.Source {
	return &partSource{f: f, tp: client.TopicPartition{Topic: topic, Partition: partition}, led: led}
}

// newLedger is a copy's share of the fetch buffer.
func (f *sourceFetchers) newLedger() *ledger { return newLedger(f.budget) }

// loopFor is the session that serves tp on the broker at addr.
func (f *sourceFetchers) loopFor(addr string, tp client.TopicPartition) (*sessionLoop, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return nil, errFetchersClosed
	}
	ls := f.loops[addr]
	if ls == nil {
		ls = make([]*sessionLoop, f.cfg.FetchConns)
		for i := range ls {
			ls[i] = newSessionLoop(f, addr)
			f.wg.Add(1)
			go ls[i].run()
		}
		f.loops[addr] = ls
	}
	if len(ls) == 1 {
		return ls[0], nil
	}
	h := fnv.New32a()
	fmt.Fprintf(h, "%s\x00%d", tp.Topic, tp.Partition)
	return ls[h.Sum32()%uint32(len(ls))], nil
}

// errFetchersClosed is what a fetch meets once the link stopped.
var errFetchersClosed = permanentError("the link's fetchers are closed")

type permanentError string

func (e permanentError) Error() string   { return string(e) }
func (e permanentError) Permanent() bool { return true }

// adminCall runs fn (a request on the source's shared connection to a
// broker) with the fetchers' context, so a caller that gives up does not
// tear the shared connection down (a Conn drops itself when a waiter
// abandons a request). fn's answer travels back on the channel only, so
// an abandoned call's late answer is written nowhere the caller reads.
func adminCall[T any](ctx context.Context, f *sourceFetchers, fn func(ctx context.Context) (T, error)) (T, error) {
	type answer struct {
		v   T
		err error
	}
	done := make(chan answer, 1)
	go func() {
		actx, cancel := context.WithTimeout(f.ctx, requestTimeout)
		defer cancel()
		var a answer
		a.v, a.err = fn(actx)
		done <- a
	}()
	select {
	case a := <-done:
		return a.v, a.err
	case <-ctx.Done():
		var zero T
		return zero, ctx.Err()
	}
}

// partSource is one partition's mirror.Source.
type partSource struct {
	f   *sourceFetchers
	tp  client.TopicPartition
	led *ledger

	mu   sync.Mutex
	addr string // the leader it was last bound to
	// id is the source topic's id as first seen (zero: none yet, or a
	// source without topic ids): a later answer with another id is the
	// topic deleted and re-created, which the copy must not follow.
	id [16]byte
}

// Leader reads fresh metadata (shared with the other partitions asking at
// the same time) and binds the partition to the session of its leader.
func (s *partSource) Leader(ctx context.Context) (mirror.SourceConn, int32, error) {
	addr, epoch, id, err := s.f.meta.leader(ctx, s.f.ctx, s.tp)
	if err != nil {
		return nil, -1, err
	}
	l, err := s.f.loopFor(addr, s.tp)
	if err != nil {
		return nil, -1, err
	}
	s.mu.Lock()
	if id != ([16]byte{}) {
		if s.id == ([16]byte{}) {
			s.id = id
		} else if id != s.id {
			was := s.id
			s.mu.Unlock()
			return nil, -1, permanentError(fmt.Sprintf("source topic re-created: id %x, was %x (%s is not followed into a new topic)", id, was, s.tp))
		}
	}
	if s.addr != "" && s.addr != addr {
		s.f.moves.Add(1)
	}
	s.addr = addr
	s.mu.Unlock()
	return &partConn{s: s, loop: l, addr: addr, id: id}, epoch, nil
}

// partConn is a partition's binding to its leader's session.
type partConn struct {
	s      *partSource
	loop   *sessionLoop
	addr   string
	id     [16]byte
	closed atomic.Bool
}

// Fetch waits until the session's next request that includes the
// partition answers for it (a partition is fetched for only while its copy
// waits here), the connection fails, or ctx ends.
func (c *partConn) Fetch(ctx context.Context, a client.FetchArgs) (client.FetchResult, error) {
	if c.closed.Load() {
		return client.FetchResult{}, errors.New("fetch on a closed source connection")
	}
	if a.Isolation != client.ReadUncommitted {
		return client.FetchResult{}, permanentError("the link fetches read_uncommitted only")
	}
	if a.Topic != c.s.tp.Topic || a.Partition != c.s.tp.Partition {
		return client.FetchResult{}, permanentError(fmt.Sprintf("fetch of %s/%d on the source of %s", a.Topic, a.Partition, c.s.tp))
	}
	k := &ask{
		p: client.SessionPartition{TopicPartition: c.s.tp, TopicID: c.id, Offset: a.Offset, MaxBytes: a.MaxBytes,
			CurrentEpoch: a.CurrentEpoch, LastFetchedEpoch: a.LastFetchedEpoch},
		maxWait: a.MaxWaitMs,
		led:     c.s.led,
		done:    make(chan askResult, 1),
	}
	c.loop.put(k)
	select {
	case r := <-k.done:
		return r.res, r.err
	case <-ctx.Done():
		c.loop.drop(k)
		return client.FetchResult{}, ctx.Err()
	}
}

func (c *partConn) ListOffset(ctx context.Context, ts int64) (client.OffsetAnswer, error) {
	return adminCall(ctx, c.s.f, func(ctx context.Context) (client.OffsetAnswer, error) {
		return c.s.f.cfg.source.ListOffset(ctx, c.addr, c.s.tp, ts)
	})
}

func (c *partConn) OffsetForLeaderEpoch(ctx context.Context, epoch int32) (client.EpochEnd, error) {
	return adminCall(ctx, c.s.f, func(ctx context.Context) (client.EpochEnd, error) {
		return c.s.f.cfg.source.OffsetForLeaderEpoch(ctx, c.addr, c.s.tp, epoch)
	})
}

// Broken reports a closed binding; failures of the shared session are
// delivered to the fetches waiting on it, which then close and rebind.
func (c *partConn) Broken() bool { return c.closed.Load() }

// Close unbinds the partition: the session forgets it unless it asks
// again.
func (c *partConn) Close() { c.closed.Store(true) }

// metaCache coalesces the partitions' metadata refreshes: a partition
// that needs its leader joins a refresh in flight that covers its topic,
// or starts one for every topic asked about so far.
type metaCache struct {
	cl     sourceCluster
	mu     sync.Mutex
	topics map[string]struct{}
	call   *metaCall
}

type metaCall struct {
	done   chan struct{}
	topics map[string]struct{}
	md     map[string]*client.TopicMeta
	err    error
}

func (m *metaCache) init(cl sourceCluster) { m.cl, m.topics = cl, map[string]struct{}{} }

// leader returns the address, leader epoch and topic id of tp's leader;
// the refresh runs on bg so that a caller giving up does not fail the
// others.
func (m *metaCache) leader(ctx, bg context.Context, tp client.TopicPartition) (string, int32, [16]byte, error) {
	m.mu.Lock()
	c := m.call
	if !c.covers(tp.Topic) {
		m.topics[tp.Topic] = struct{}{}
		c = &metaCall{done: make(chan struct{}), topics: make(map[string]struct{}, len(m.topics))}
		ts := make([]string, 0, len(m.topics))
		for t := range m.topics {
			c.topics[t] = struct{}{}
			ts = append(ts, t)
		}
		m.call = c
		go func() {
			rctx, cancel := context.WithTimeout(bg, requestTimeout)
			defer cancel()
			c.md, c.err = m.cl.Metadata(rctx, ts)
			// Retired before it is answered: a caller that comes once
			// its waiters have their answer starts a refresh of its
			// own rather than take this one's (by then old) metadata.
			m.mu.Lock()
			if m.call == c {
				m.call = nil
			}
			m.mu.Unlock()
			close(c.done)
		}()
	}
	m.mu.Unlock()
	select {
	case <-c.done:
	case <-ctx.Done():
		return "", -1, [16]byte{}, ctx.Err()
	}
	if c.err != nil {
		return "", -1, [16]byte{}, c.err
	}
	return leaderOf(m.cl, c.md, tp)
}

// leaderOf reads tp's leader (its address and epoch) and its topic's id
// from md, the source's metadata.
func leaderOf(src sourceCluster, md map[string]*client.TopicMeta, tp client.TopicPartition) (string, int32, [16]byte, error) {
	tm := md[tp.Topic]
	switch {
	case tm == nil:
		return "", -1, [16]byte{}, fmt.Errorf("%w: %s on %s", client.ErrTopicMissing, tp.Topic, src.Seed())
	case tm.Err != nil:
		return "", -1, [16]byte{}, tm.Err
	case int(tp.Partition) >= len(tm.Partitions):
		return "", -1, [16]byte{}, fmt.Errorf("%s has no partition %d on %s", tp.Topic, tp.Partition, src.Seed())
	}
	pm := tm.Partitions[tp.Partition]
	if pm.Err != nil {
		return "", -1, [16]byte{}, fmt.Errorf("%s on %s: %w", tp, src.Seed(), pm.Err)
	}
	addr, ok := src.BrokerAddr(pm.Leader)
	if pm.Leader < 0 || !ok {
		return "", -1, [16]byte{}, fmt.Errorf("%s on %s: leader %d: %w", tp, src.Seed(), pm.Leader, kerr.LeaderNotAvailable)
	}
	return addr, pm.LeaderEpoch, tm.ID, nil
}

// covers reports whether a refresh in flight (c may be nil) asks for
// topic.
func (c *metaCall) covers(topic string) bool {
	if c == nil {
		return false
	}
	_, ok := c.topics[topic]
	return ok
}

// SourceConfig, SourceFetchers and NewSourceFetchers are the fetchers as
// the real-peer tests and benchmarks outside the package drive them.
type (
	SourceConfig   = sourceConfig
	SourceFetchers = sourceFetchers
)

// NewSourceFetchers starts a link's fetchers (newSourceFetchers).
func NewSourceFetchers(cfg SourceConfig) *SourceFetchers { return newSourceFetchers(cfg) }

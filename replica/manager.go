package replica

import (
	"context"
	"fmt"
	"hash/fnv"
	"io"
	"log/slog"
	"sync"
	"time"

	"github.com/verbatim-kafka/verbatim/broker"
	"github.com/verbatim-kafka/verbatim/client"
)

// Config configures the fetcher manager.
type Config struct {
	Host Host
	// Fetchers is num.replica.fetchers: connections per leader broker
	// (default 1).
	Fetchers int
	// MaxBytes is replica.fetch.response.max.bytes (Kafka's 10 MiB);
	// PartitionMaxBytes replica.fetch.max.bytes (1 MiB); MaxWait
	// replica.fetch.wait.max.ms (500 ms); MinBytes replica.fetch.min.bytes
	// (1).
	MaxBytes, PartitionMaxBytes, MinBytes int32
	MaxWaitMs                             int32
	// Backoff is replica.fetch.backoff.ms (Kafka's 1 s): the longest a
	// partition whose fetch failed (UNKNOWN_LEADER_EPOCH,
	// NOT_LEADER_OR_FOLLOWER, ...) waits before it is asked again (100
	// ms after progress, doubling). A broken connection backs the whole
	// fetcher off (100 ms doubling to 2 s) before it is dialled again.
	Backoff time.Duration
	// Clock is the time source (nil: the wall clock).
	Clock client.Clock
	Log   *slog.Logger
}

func (c Config) withDefaults() Config {
	if c.Fetchers <= 0 {
		c.Fetchers = 1
	}
	if c.MaxBytes <= 0 {
		c.MaxBytes = 10 << 20
	}
	if c.PartitionMaxBytes <= 0 {
		c.PartitionMaxBytes = 1 << 20
	}
	if c.MinBytes <= 0 {
		c.MinBytes = 1
	}
	if c.MaxWaitMs <= 0 {
		c.MaxWaitMs = 500
	}
	if c.Backoff <= 0 {
		c.Backoff = time.Second
	}
	if c.Clock == nil {
		c.Clock = client.SystemClock{}
	}
	if c.Log == nil {
		c.Log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	return c
}

// fetcherKey names one fetcher: a leader broker and the index of one of
// its num.replica.fetchers connections.
type fetcherKey struct {
	leader int32
	index  int
}

// Manager runs the fetchers; it implements broker.Followers.
type Manager struct {
	cfg  Config
	fcfg *fetcherConfig

	mu       sync.Mutex
	fetchers map[fetcherKey]*fetcher
	where    map[client.TopicPartition]fetcherKey
	stopped  []*fetcher // stopped, not yet waited for
	closed   bool
}

var _ broker.Followers = (*Manager)(nil)

// NewManager returns a manager following nothing yet.
func NewManager(c Config) *Manager {
	c = c.withDefaults()
	m := &Manager{cfg: c, fetchers: map[fetcherKey]*fetcher{}, where: map[client.TopicPartition]fetcherKey{}}
	m.fcfg = &fetcherConfig{
		host:    c.Host,
		clock:   c.Clock,
		opts:    client.SessionOptions{MaxWaitMs: c.MaxWaitMs, MinBytes: c.MinBytes, MaxBytes: c.MaxBytes, Isolation: client.ReadUncommitted, Follower: true},
		partMax: c.PartitionMaxBytes,
		backoff: c.Backoff,
		log:     c.Log,
	}
	m.fcfg.dialFunc = m.dial
	return m
}

// dial connects to leaderID's inter-broker endpoint as this replica.
func (m *Manager) dial(ctx context.Context, leaderID int32) (leader, error) {
	addr, ok := m.cfg.Host.LeaderAddr(leaderID)
	if !ok {
		return nil, fmt.Errorf("broker %d is not registered", leaderID)
	}
	dctx, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	cn, err := client.Dial(dctx, addr, m.cfg.Host.InterBrokerClient())
	if err != nil {
		return nil, err
	}
	o := m.fcfg.opts
	o.ReplicaID = m.cfg.Host.NodeID()
	return newConnLeader(cn, o, m.cfg.Host.BrokerEpoch), nil
}

// index is the fetcher of tp among a leader's (Kafka's fetcher id: a hash
// of topic and partition).
func (m *Manager) index(tp client.TopicPartition) int {
	h := fnv.New32a()
	_, _ = h.Write([]byte(tp.Topic))
	return int((h.Sum32()*31 + uint32(tp.Partition)) % uint32(m.cfg.Fetchers))
}

// Follow implements broker.Followers: each partition is fetched from its
// leader at its leader epoch; a partition already followed at the same
// leader, epoch and topic id is left as it is, any other assignment is
// replaced (the old one stops before the new one starts, and the new one
// truncates by OffsetForLeaderEpoch first).
func (m *Manager) Follow(parts []broker.FollowedPartition) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return
	}
	for _, fp := range parts {
		tp := client.TopicPartition{Topic: fp.Topic, Partition: fp.Partition}
		key := fetcherKey{leader: fp.Leader, index: m.index(tp)}
		if old, ok := m.where[tp]; ok {
			f := m.fetchers[old]
			if p := f.get(tp); old == key && p != nil && p.epoch == fp.LeaderEpoch && p.id == fp.TopicID {
				continue
			}
			if old != key {
				f.remove(tp)
			}
		}
		f := m.fetchers[key]
		if f == nil {
			f = newFetcher(m.fcfg, key.leader, key.index)
			m.fetchers[key] = f
			f.start()
		}
		f.add(newPartition(tp, fp.TopicID, fp.LeaderEpoch))
		m.where[tp] = key
	}
	m.stopIdleLocked()
}

// Unfollow implements broker.Followers: it returns once no fetch of the
// partitions will change their replicas again. The caller must not hold
// anything a Replica's Append or Truncate waits for.
func (m *Manager) Unfollow(parts []broker.TopicPartition) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, bp := range parts {
		tp := client.TopicPartition{Topic: bp.Topic, Partition: bp.Partition}
		key, ok := m.where[tp]
		if !ok {
			continue
		}
		delete(m.where, tp)
		m.fetchers[key].remove(tp)
	}
	m.stopIdleLocked()
}

// stopIdleLocked stops the fetchers left with no partition (Kafka's
// shutdownIdleFetcherThreads).
func (m *Manager) stopIdleLocked() {
	for key, f := range m.fetchers {
		if f.size() == 0 {
			f.stop()
			delete(m.fetchers, key)
			m.stopped = append(m.stopped, f)
		}
	}
	// Forget the stopped ones that have ended.
	live := m.stopped[:0]
	for _, f := range m.stopped {
		select {
		case <-f.done:
		default:
			live = append(live, f)
		}
	}
	clear(m.stopped[len(live):])
	m.stopped = live
}

// Connections is how many fetchers (connections to leaders) run.
func (m *Manager) Connections() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.fetchers)
}

// Close stops every fetcher and returns once they have ended; nothing is
// followed afterwards.
func (m *Manager) Close() {
	m.mu.Lock()
	m.closed = true
	all := m.stopped
	m.stopped = nil
	for key, f := range m.fetchers {
		for _, p := range f.snapshot() {
			f.remove(p.tp)
		}
		f.stop()
		all = append(all, f)
		delete(m.fetchers, key)
	}
	clear(m.where)
	m.mu.Unlock()
	for _, f := range all {
		<-f.done
	}
}

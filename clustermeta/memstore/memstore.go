package memstore

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/verbatim-kafka/verbatim/clustermeta"
)

// Store is the in-memory store. The zero value is not usable: New.
type Store struct {
	keys      clustermeta.Keys
	clusterID string

	mu      sync.Mutex
	rev     int64
	kv      map[string]*entry
	b       *clustermeta.Builder
	leases  map[int64]*lease
	nextID  int64
	watches map[chan *clustermeta.Snapshot]struct{}
	// changed closes (and is replaced) at every write: campaigns wait on
	// it.
	changed chan struct{}
	closed  bool
}

type entry struct {
	value     []byte
	createRev int64
	modRev    int64
	lease     int64
}

// lease is a registration's or a controller candidacy's lease: its keys
// vanish and done closes when it ends.
type lease struct {
	id   int64
	node int32
	keys map[string]bool
	done chan struct{}
}

// New is an empty store with a fresh cluster id.
func New() *Store {
	var id [16]byte
	_, _ = rand.Read(id[:])
	k := clustermeta.Keys{Prefix: clustermeta.DefaultPrefix}
	s := &Store{
		keys: k, clusterID: clustermeta.FormatUUID(id),
		kv: map[string]*entry{}, leases: map[int64]*lease{},
		watches: map[chan *clustermeta.Snapshot]struct{}{},
		changed: make(chan struct{}),
	}
	s.b = clustermeta.NewBuilder(k, s.clusterID)
	s.b.Apply(0, nil)
	return s
}

var errClosed = errors.New("memstore: closed")

// op is one put (value non-nil) or delete of a transaction.
type op struct {
	key   string
	value []byte
	lease int64
	// prefix deletes every key under key.
	prefix bool
}

// commitLocked applies the ops as one revision and delivers the new
// snapshot to the watches.
func (s *Store) commitLocked(ops []op) int64 {
	s.rev++
	var kvs []clustermeta.KV
	for _, o := range ops {
		if o.value == nil {
			for _, k := range s.matchLocked(o.key, o.prefix) {
				e := s.kv[k]
				delete(s.kv, k)
				if l := s.leases[e.lease]; l != nil {
					delete(l.keys, k)
				}
				kvs = append(kvs, clustermeta.KV{Key: k, CreateRev: e.createRev, ModRev: s.rev, Deleted: true})
			}
			continue
		}
		e := s.kv[o.key]
		if e == nil {
			e = &entry{createRev: s.rev}
			s.kv[o.key] = e
		}
		e.value, e.modRev, e.lease = o.value, s.rev, o.lease
		if l := s.leases[o.lease]; l != nil {
			l.keys[o.key] = true
		}
		kvs = append(kvs, clustermeta.KV{Key: o.key, Value: o.value, CreateRev: e.createRev, ModRev: s.rev})
	}
	snap := s.b.Apply(s.rev, kvs)
	for w := range s.watches {
		deliver(w, snap)
	}
	close(s.changed)
	s.changed = make(chan struct{})
	return s.rev
}

func (s *Store) matchLocked(key string, prefix bool) []string {
	if !prefix {
		if _, ok := s.kv[key]; ok {
			return []string{key}
		}
		return nil
	}
	var out []string
	for k := range s.kv {
		if strings.HasPrefix(k, key) {
			out = append(out, k)
		}
	}
	sort.Strings(out)
	return out
}

// deliver replaces an undelivered older snapshot (sends are serialized
// by the store's lock).
func deliver(w chan *clustermeta.Snapshot, snap *clustermeta.Snapshot) {
	select {
	case w <- snap:
		return
	default:
	}
	select {
	case <-w:
	default:
	}
	w <- snap
}

func (s *Store) modRev(key string) int64 {
	if e := s.kv[key]; e != nil {
		return e.modRev
	}
	return 0
}

func (s *Store) createRev(key string) int64 {
	if e := s.kv[key]; e != nil {
		return e.createRev
	}
	return 0
}

func (s *Store) fenceHolds(f clustermeta.Fence) bool {
	return f.Key == "" || s.createRev(f.Key) == f.CreateRev && f.CreateRev != 0
}

func (s *Store) lock() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return errClosed
	}
	return nil
}

func (s *Store) ClusterID() string { return s.clusterID }

func (s *Store) Snapshot(ctx context.Context) (*clustermeta.Snapshot, error) {
	if err := s.lock(); err != nil {
		return nil, err
	}
	defer s.mu.Unlock()
	return s.b.Current(), nil
}

func (s *Store) Watch(ctx context.Context) <-chan *clustermeta.Snapshot {
	w := make(chan *clustermeta.Snapshot, 1)
	if err := s.lock(); err != nil {
		close(w)
		return w
	}
	s.watches[w] = struct{}{}
	w <- s.b.Current()
	s.mu.Unlock()
	context.AfterFunc(ctx, func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		if _, ok := s.watches[w]; ok {
			delete(s.watches, w)
			close(w)
		}
	})
	return w
}

func (s *Store) CreateTopic(ctx context.Context, t clustermeta.TopicRecord, parts []clustermeta.PartitionState) (clustermeta.TopicRecord, []clustermeta.PartitionState, error) {
	if err := clustermeta.CheckNewTopic(t, parts); err != nil {
		return t, nil, err
	}
	if err := s.lock(); err != nil {
		return t, nil, err
	}
	defer s.mu.Unlock()
	if s.createRev(s.keys.Topic(t.Name)) != 0 {
		return t, nil, clustermeta.ErrTopicExists
	}
	rev := s.commitLocked(append([]op{{key: s.keys.Topic(t.Name), value: clustermeta.EncodeTopic(t)}}, s.partitionOps(parts)...))
	t.Version = rev
	out := make([]clustermeta.PartitionState, len(parts))
	for i, p := range parts {
		p.Version = rev
		out[i] = p
	}
	return t, out, nil
}

// changeTopic writes what change makes of the stored record of t if its
// version and id are t's (ErrConflict otherwise, ErrNotFound if gone).
func (s *Store) changeTopic(t clustermeta.TopicRecord, change func(stored clustermeta.TopicRecord) (clustermeta.TopicRecord, []op, error)) (clustermeta.TopicRecord, error) {
	if err := s.lock(); err != nil {
		return t, err
	}
	defer s.mu.Unlock()
	key := s.keys.Topic(t.Name)
	e := s.kv[key]
	if e == nil {
		return t, clustermeta.ErrNotFound
	}
	stored, err := clustermeta.DecodeTopic(s.keys, key, e.value)
	if err != nil {
		return t, err
	}
	if e.modRev != t.Version || stored.ID != t.ID {
		return t, clustermeta.ErrConflict
	}
	next, ops, err := change(stored)
	if err != nil {
		return t, err
	}
	next.Version = s.commitLocked(append([]op{{key: key, value: clustermeta.EncodeTopic(next)}}, ops...))
	return next, nil
}

func (s *Store) UpdateTopic(ctx context.Context, t clustermeta.TopicRecord) (clustermeta.TopicRecord, error) {
	return s.changeTopic(t, func(stored clustermeta.TopicRecord) (clustermeta.TopicRecord, []op, error) {
		stored.Configs = t.Configs
		return stored, nil, nil
	})
}

func (s *Store) AddPartitions(ctx context.Context, t clustermeta.TopicRecord, parts []clustermeta.PartitionState) (clustermeta.TopicRecord, error) {
	return s.changeTopic(t, func(stored clustermeta.TopicRecord) (clustermeta.TopicRecord, []op, error) {
		next, err := clustermeta.AddedPartitions(stored, t, parts)
		return next, s.partitionOps(parts), err
	})
}

func (s *Store) partitionOps(parts []clustermeta.PartitionState) []op {
	ops := make([]op, len(parts))
	for i, p := range parts {
		ops[i] = op{key: s.keys.Partition(p.Topic, p.Partition), value: clustermeta.EncodePartition(p)}
	}
	return ops
}

func (s *Store) DeleteTopic(ctx context.Context, name string, id [16]byte) error {
	if err := s.lock(); err != nil {
		return err
	}
	defer s.mu.Unlock()
	key := s.keys.Topic(name)
	e := s.kv[key]
	if e == nil {
		return clustermeta.ErrNotFound
	}
	stored, err := clustermeta.DecodeTopic(s.keys, key, e.value)
	if err != nil {
		return err
	}
	if stored.ID != id {
		return clustermeta.ErrNotFound
	}
	s.commitLocked([]op{{key: key}, {key: s.keys.Partitions(name), prefix: true}})
	return nil
}

func (s *Store) CASPartitions(ctx context.Context, fence clustermeta.Fence, states []clustermeta.PartitionState) ([]clustermeta.PartitionState, error) {
	if len(states) == 0 {
		return nil, nil
	}
	if err := clustermeta.CheckCAS(states); err != nil {
		return nil, err
	}
	if err := s.lock(); err != nil {
		return nil, err
	}
	defer s.mu.Unlock()
	ops := make([]op, len(states))
	conflict := false
	for i, p := range states {
		key := s.keys.Partition(p.Topic, p.Partition)
		conflict = conflict || s.modRev(key) != p.Version
		ops[i] = op{key: key, value: clustermeta.EncodePartition(p)}
	}
	if !s.fenceHolds(fence) {
		return nil, clustermeta.ErrFenced
	}
	if conflict {
		return nil, clustermeta.ErrConflict
	}
	rev := s.commitLocked(ops)
	out := make([]clustermeta.PartitionState, len(states))
	for i, p := range states {
		p.Version = rev
		out[i] = p
	}
	return out, nil
}

func (s *Store) AllocateProducerIDs(ctx context.Context, n int64) (int64, error) {
	if n <= 0 {
		return 0, fmt.Errorf("memstore: allocating %d producer ids", n)
	}
	if err := s.lock(); err != nil {
		return 0, err
	}
	defer s.mu.Unlock()
	key := s.keys.ProducerIDs()
	var next int64
	if e := s.kv[key]; e != nil {
		var err error
		if next, err = clustermeta.DecodeProducerIDs(key, e.value); err != nil {
			return 0, err
		}
	}
	if next > 1<<63-1-n {
		return 0, fmt.Errorf("memstore: producer ids exhausted")
	}
	s.commitLocked([]op{{key: key, value: clustermeta.EncodeProducerIDs(next + n)}})
	return next, nil
}

// grantLocked is a new lease of node.
func (s *Store) grantLocked(node int32) *lease {
	s.nextID++
	l := &lease{id: s.nextID, node: node, keys: map[string]bool{}, done: make(chan struct{})}
	s.leases[l.id] = l
	return l
}

// endLocked ends a lease: its keys vanish in one revision, done closes.
func (s *Store) endLocked(l *lease) {
	if _, ok := s.leases[l.id]; !ok {
		return
	}
	delete(s.leases, l.id)
	var ops []op
	for k := range l.keys {
		ops = append(ops, op{key: k})
	}
	sort.Slice(ops, func(i, j int) bool { return ops[i].key < ops[j].key })
	if len(ops) > 0 {
		s.commitLocked(ops)
	}
	close(l.done)
}

// Expire ends every lease node holds (its registration, its controller
// candidacy), as etcd does when the broker stops renewing them: the keys
// vanish and the Session's and Leadership's Done channels close.
func (s *Store) Expire(node int32) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var ls []*lease
	for _, l := range s.leases {
		if l.node == node {
			ls = append(ls, l)
		}
	}
	sort.Slice(ls, func(i, j int) bool { return ls[i].id < ls[j].id })
	for _, l := range ls {
		s.endLocked(l)
	}
}

func (s *Store) Register(ctx context.Context, b clustermeta.BrokerInfo, ttlSeconds int64) (*clustermeta.Session, error) {
	if b.NodeID < 0 || ttlSeconds <= 0 {
		return nil, fmt.Errorf("memstore: registering node id %d with a TTL of %d s", b.NodeID, ttlSeconds)
	}
	if err := s.lock(); err != nil {
		return nil, err
	}
	defer s.mu.Unlock()
	key := s.keys.Broker(b.NodeID)
	if s.createRev(key) != 0 {
		return nil, fmt.Errorf("%w: node id %d is registered by a live broker", clustermeta.ErrConflict, b.NodeID)
	}
	l := s.grantLocked(b.NodeID)
	b.Epoch = s.commitLocked([]op{{key: key, value: clustermeta.EncodeBroker(b), lease: l.id}})
	return clustermeta.NewSession(b, &session{s: s, l: l, key: key, epoch: b.Epoch}), nil
}

type session struct {
	s     *Store
	l     *lease
	key   string
	epoch int64
}

func (ss *session) Done() <-chan struct{} { return ss.l.done }

func (ss *session) Fence() clustermeta.Fence {
	return clustermeta.Fence{Key: ss.key, CreateRev: ss.epoch}
}

func (ss *session) Update(ctx context.Context, b clustermeta.BrokerInfo) error {
	if err := ss.s.lock(); err != nil {
		return err
	}
	defer ss.s.mu.Unlock()
	if !ss.s.fenceHolds(ss.Fence()) {
		return clustermeta.ErrFenced
	}
	ss.s.commitLocked([]op{{key: ss.key, value: clustermeta.EncodeBroker(b), lease: ss.l.id}})
	return nil
}

func (ss *session) Close(ctx context.Context) error {
	ss.s.mu.Lock()
	defer ss.s.mu.Unlock()
	ss.s.endLocked(ss.l)
	return nil
}

func (s *Store) Campaign(ctx context.Context, nodeID int32, ttlSeconds int64) (*clustermeta.Leadership, error) {
	if nodeID < 0 || ttlSeconds <= 0 {
		return nil, fmt.Errorf("memstore: campaign of node id %d with a TTL of %d s", nodeID, ttlSeconds)
	}
	if err := s.lock(); err != nil {
		return nil, err
	}
	l := s.grantLocked(nodeID)
	key := s.keys.Controller() + strconv.FormatInt(l.id, 16)
	rev := s.commitLocked([]op{{key: key, value: []byte(strconv.FormatInt(int64(nodeID), 10)), lease: l.id}})
	for {
		if s.leadsLocked(key, rev) {
			s.mu.Unlock()
			return clustermeta.NewLeadership(nodeID, &leadership{s: s, l: l, fence: clustermeta.Fence{Key: key, CreateRev: rev}}), nil
		}
		changed := s.changed
		s.mu.Unlock()
		select {
		case <-ctx.Done():
			s.mu.Lock()
			s.endLocked(l)
			s.mu.Unlock()
			return nil, ctx.Err()
		case <-l.done:
			return nil, fmt.Errorf("memstore: node %d's candidacy expired", nodeID)
		case <-changed:
		}
		if err := s.lock(); err != nil {
			return nil, err
		}
	}
}

// leadsLocked: the candidate's key exists and no older candidate does.
func (s *Store) leadsLocked(key string, rev int64) bool {
	if s.createRev(key) != rev {
		return false
	}
	for _, k := range s.matchLocked(s.keys.Controller(), true) {
		if s.kv[k].createRev < rev {
			return false
		}
	}
	return true
}

type leadership struct {
	s     *Store
	l     *lease
	fence clustermeta.Fence
}

func (ld *leadership) Done() <-chan struct{}    { return ld.l.done }
func (ld *leadership) Fence() clustermeta.Fence { return ld.fence }

func (ld *leadership) Resign(ctx context.Context) error {
	ld.s.mu.Lock()
	defer ld.s.mu.Unlock()
	ld.s.endLocked(ld.l)
	return nil
}

// Close ends every lease (Done channels close) and every watch.
func (s *Store) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil
	}
	for _, l := range s.leases {
		delete(s.leases, l.id)
		close(l.done)
	}
	for w := range s.watches {
		delete(s.watches, w)
		close(w)
	}
	s.closed = true
	return nil
}

var _ clustermeta.Store = (*Store)(nil)

// recordHolds: the expected version of a record write holds.
func (s *Store) recordHolds(key string, expect int64) bool {
	switch expect {
	case clustermeta.AnyVersion:
		return true
	case clustermeta.MustNotExist:
		return s.createRev(key) == 0
	default:
		return s.modRev(key) == expect
	}
}

// recordWrite commits o on key if fence and the expected version hold.
func (s *Store) recordWrite(fence clustermeta.Fence, key string, expect int64, o op) (int64, error) {
	if err := s.lock(); err != nil {
		return 0, err
	}
	defer s.mu.Unlock()
	if !s.fenceHolds(fence) {
		return 0, clustermeta.ErrFenced
	}
	if !s.recordHolds(key, expect) {
		return 0, clustermeta.ErrConflict
	}
	if o.value == nil && s.kv[key] == nil {
		return 0, clustermeta.ErrNotFound
	}
	return s.commitLocked([]op{o}), nil
}

func (s *Store) PutRecord(ctx context.Context, fence clustermeta.Fence, kind, name string, value []byte, expectVersion int64) (int64, error) {
	if err := clustermeta.CheckRecord(kind, name, expectVersion, true); err != nil {
		return 0, err
	}
	key := s.keys.Record(kind, name)
	// A copy, never nil (nil is a delete): the caller may reuse value.
	return s.recordWrite(fence, key, expectVersion, op{key: key, value: append([]byte{}, value...)})
}

func (s *Store) DeleteRecord(ctx context.Context, fence clustermeta.Fence, kind, name string, expectVersion int64) (int64, error) {
	if err := clustermeta.CheckRecord(kind, name, expectVersion, false); err != nil {
		return 0, err
	}
	key := s.keys.Record(kind, name)
	return s.recordWrite(fence, key, expectVersion, op{key: key})
}

package clustermeta

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// Config opens a Store over an etcd cluster.
type Config struct {
	// Endpoints are the etcd client URLs (metadata.etcd.endpoints).
	Endpoints []string
	// Prefix is the key prefix of this Verbatim cluster (default
	// "/verbatim/"): several clusters may share one etcd.
	Prefix string
	// DialTimeout bounds the first connection (default 5 s).
	DialTimeout time.Duration
}

// DefaultPrefix is Config.Prefix's default.
const DefaultPrefix = "/verbatim/"

// Open connects to etcd and returns the Store (creating the cluster id on
// first use).
func Open(ctx context.Context, c Config) (Store, error) {
	if len(c.Endpoints) == 0 {
		return nil, errors.New("clustermeta: no etcd endpoints")
	}
	if c.Prefix == "" {
		c.Prefix = DefaultPrefix
	}
	if !strings.HasSuffix(c.Prefix, "/") {
		c.Prefix += "/"
	}
	if c.DialTimeout <= 0 {
		c.DialTimeout = 5 * time.Second
	}
	cli, err := clientv3.New(clientv3.Config{
		Endpoints:   c.Endpoints,
		DialTimeout: c.DialTimeout,
		Logger:      quietLogger(zapcore.ErrorLevel, nil),
		// Keep-alive pings find a dead member so the client moves on.
		DialKeepAliveTime:    2 * time.Second,
		DialKeepAliveTimeout: 2 * time.Second,
	})
	if err != nil {
		return nil, fmt.Errorf("clustermeta: etcd client: %w", err)
	}
	root, cancel := context.WithCancel(context.Background())
	s := &etcdStore{cli: cli, keys: Keys{Prefix: c.Prefix}, ctx: root, cancel: cancel}
	octx, ocancel := context.WithTimeout(ctx, c.DialTimeout)
	defer ocancel()
	if s.clusterID, err = s.ensureClusterID(octx); err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}

// quietLogger is etcd's zap logger: only lev and above, on stderr, so the
// broker's stdout stays its own; without the warnings every embedded
// start prints about choices made on purpose (one port for gRPC and
// HTTP, simple auth tokens: the member serves loopback clients without
// auth), and silent once closing is set (a member's shutdown logs its
// closed listeners as errors).
func quietLogger(lev zapcore.Level, closing *atomic.Bool) *zap.Logger {
	enc := zapcore.NewJSONEncoder(zap.NewProductionEncoderConfig())
	core := zapcore.NewCore(enc, zapcore.Lock(zapcore.AddSync(os.Stderr)), lev)
	return zap.New(quietCore{Core: core, closing: closing})
}

var logNoise = map[string]bool{
	"Running http and grpc server on single port. This is not recommended for production.": true,
	"simple token is not cryptographically signed":                                         true,
}

type quietCore struct {
	zapcore.Core
	closing *atomic.Bool
}

func (c quietCore) With(f []zapcore.Field) zapcore.Core {
	return quietCore{Core: c.Core.With(f), closing: c.closing}
}

func (c quietCore) Check(e zapcore.Entry, ce *zapcore.CheckedEntry) *zapcore.CheckedEntry {
	if logNoise[e.Message] || c.closing != nil && c.closing.Load() && e.Level < zapcore.FatalLevel {
		return ce
	}
	return c.Core.Check(e, ce)
}

type etcdStore struct {
	cli       *clientv3.Client
	keys      Keys
	clusterID string
	// ctx ends with Close: watches and keep-alives derive from it.
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	// beforeFollow, when set (tests), runs between a watch's load and its
	// watch from the loaded revision, before the loaded snapshot is
	// delivered (so a reader that sees the snapshot knows it ran).
	beforeFollow func(rev int64)
}

// newClusterID is a random Kafka Uuid in its text form (kafka-storage's
// random-uuid).
func newClusterID() string {
	var id [16]byte
	_, _ = rand.Read(id[:])
	return FormatUUID(id)
}

func (s *etcdStore) ensureClusterID(ctx context.Context) (string, error) {
	key := s.keys.ClusterID()
	id := newClusterID()
	resp, err := s.cli.Txn(ctx).
		If(clientv3.Compare(clientv3.CreateRevision(key), "=", 0)).
		Then(clientv3.OpPut(key, string(encodeClusterID(id)))).
		Else(clientv3.OpGet(key)).Commit()
	if err != nil {
		return "", fmt.Errorf("clustermeta: reading the cluster id: %w", err)
	}
	if resp.Succeeded {
		return id, nil // the first opener
	}
	kvs := resp.Responses[0].GetResponseRange().Kvs
	if len(kvs) == 0 {
		return "", fmt.Errorf("clustermeta: %s vanished", key)
	}
	return decodeClusterID(key, kvs[0].Value)
}

func (s *etcdStore) ClusterID() string { return s.clusterID }

func (s *etcdStore) Close() error {
	s.cancel()
	s.wg.Wait()
	return s.cli.Close()
}

func toKVs(kvs []*mvccpb.KeyValue) []KV {
	out := make([]KV, len(kvs))
	for i, kv := range kvs {
		out[i] = KV{Key: string(kv.Key), Value: kv.Value, CreateRev: kv.CreateRevision, ModRev: kv.ModRevision}
	}
	return out
}

// loadTimeout bounds a watch's reload, so a member without a leader does
// not hold the watch: it retries (the client moves to another endpoint).
const loadTimeout = 10 * time.Second

func (s *etcdStore) load(ctx context.Context, b *Builder) (*Snapshot, error) {
	resp, err := s.cli.Get(ctx, s.keys.Prefix, clientv3.WithPrefix())
	if err != nil {
		return nil, fmt.Errorf("clustermeta: reading the cluster state: %w", err)
	}
	return b.Load(resp.Header.Revision, toKVs(resp.Kvs)), nil
}

func (s *etcdStore) Snapshot(ctx context.Context) (*Snapshot, error) {
	return s.load(ctx, NewBuilder(s.keys, s.clusterID))
}

// Watch reads the state, then follows etcd's events on the prefix, one
// new snapshot per watch response (etcd never splits a transaction's
// events across responses). A compacted or failed watch reloads the
// state and watches again from there.
func (s *etcdStore) Watch(ctx context.Context) <-chan *Snapshot {
	out := make(chan *Snapshot, 1)
	wctx, cancel := context.WithCancel(ctx)
	stop := context.AfterFunc(s.ctx, cancel)
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		defer close(out)
		defer stop()
		defer cancel()
		b := NewBuilder(s.keys, s.clusterID)
		for wctx.Err() == nil {
			lctx, lcancel := context.WithTimeout(wctx, loadTimeout)
			snap, err := s.load(lctx, b)
			lcancel()
			if err != nil {
				pause(wctx, 200*time.Millisecond)
				continue
			}
			if s.beforeFollow != nil {
				s.beforeFollow(snap.Revision)
			}
			deliver(out, snap)
			s.follow(wctx, b, out, snap.Revision)
			pause(wctx, 50*time.Millisecond)
		}
	}()
	return out
}

// follow applies the watch's events until the watch fails or ctx ends.
func (s *etcdStore) follow(ctx context.Context, b *Builder, out chan *Snapshot, rev int64) {
	wctx, cancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
	defer cancel()
	for wr := range s.cli.Watch(wctx, s.keys.Prefix, clientv3.WithPrefix(), clientv3.WithRev(rev+1)) {
		if wr.Err() != nil || wr.Canceled {
			return
		}
		if len(wr.Events) == 0 {
			continue
		}
		kvs := make([]KV, len(wr.Events))
		last := rev
		for i, ev := range wr.Events {
			kv := ev.Kv
			kvs[i] = KV{Key: string(kv.Key), Value: kv.Value, CreateRev: kv.CreateRevision, ModRev: kv.ModRevision,
				Deleted: ev.Type == clientv3.EventTypeDelete}
			last = max(last, kv.ModRevision)
		}
		deliver(out, b.Apply(last, kvs))
	}
}

// deliver hands s to the one reader of out, replacing an undelivered
// older snapshot (the only sender is the caller, so the second send
// always finds room).
func deliver(out chan *Snapshot, s *Snapshot) {
	select {
	case out <- s:
		return
	default:
	}
	select {
	case <-out:
	default:
	}
	out <- s
}

func pause(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

func (s *etcdStore) CreateTopic(ctx context.Context, t TopicRecord, parts []PartitionState) (TopicRecord, []PartitionState, error) {
	if err := CheckNewTopic(t, parts); err != nil {
		return t, nil, err
	}
	key := s.keys.Topic(t.Name)
	ops := append([]clientv3.Op{clientv3.OpPut(key, string(EncodeTopic(t)))}, s.partitionOps(parts)...)
	resp, err := s.cli.Txn(ctx).If(clientv3.Compare(clientv3.CreateRevision(key), "=", 0)).Then(ops...).Commit()
	if err != nil {
		return t, nil, fmt.Errorf("clustermeta: creating topic %s: %w", t.Name, err)
	}
	if !resp.Succeeded {
		return t, nil, ErrTopicExists
	}
	rev := resp.Header.Revision
	t.Version = rev
	out := make([]PartitionState, len(parts))
	for i, p := range parts {
		p.Version = rev
		out[i] = p
	}
	return t, out, nil
}

// getTopic reads a topic's stored record, ErrNotFound when absent.
func (s *etcdStore) getTopic(ctx context.Context, name string) (TopicRecord, error) {
	key := s.keys.Topic(name)
	resp, err := s.cli.Get(ctx, key)
	if err != nil {
		return TopicRecord{}, fmt.Errorf("clustermeta: reading topic %s: %w", name, err)
	}
	if len(resp.Kvs) == 0 {
		return TopicRecord{}, ErrNotFound
	}
	t, err := DecodeTopic(s.keys, key, resp.Kvs[0].Value)
	t.Version = resp.Kvs[0].ModRevision
	return t, err
}

// putTopic writes t's record (and ops) if the stored version is still
// t.Version.
func (s *etcdStore) putTopic(ctx context.Context, version int64, t TopicRecord, ops ...clientv3.Op) (TopicRecord, error) {
	key := s.keys.Topic(t.Name)
	ops = append([]clientv3.Op{clientv3.OpPut(key, string(EncodeTopic(t)))}, ops...)
	resp, err := s.cli.Txn(ctx).If(clientv3.Compare(clientv3.ModRevision(key), "=", version)).Then(ops...).Commit()
	if err != nil {
		return t, fmt.Errorf("clustermeta: writing topic %s: %w", t.Name, err)
	}
	if !resp.Succeeded {
		return t, ErrConflict
	}
	t.Version = resp.Header.Revision
	return t, nil
}

// changeTopic writes what change makes of the stored record of t if its
// version and id are t's (ErrConflict otherwise, ErrNotFound if gone).
func (s *etcdStore) changeTopic(ctx context.Context, t TopicRecord, change func(stored TopicRecord) (TopicRecord, []clientv3.Op, error)) (TopicRecord, error) {
	stored, err := s.getTopic(ctx, t.Name)
	if err != nil {
		return t, err
	}
	if stored.Version != t.Version || stored.ID != t.ID {
		return t, ErrConflict
	}
	next, ops, err := change(stored)
	if err != nil {
		return t, err
	}
	return s.putTopic(ctx, t.Version, next, ops...)
}

func (s *etcdStore) UpdateTopic(ctx context.Context, t TopicRecord) (TopicRecord, error) {
	return s.changeTopic(ctx, t, func(stored TopicRecord) (TopicRecord, []clientv3.Op, error) {
		stored.Configs = t.Configs
		return stored, nil, nil
	})
}

func (s *etcdStore) AddPartitions(ctx context.Context, t TopicRecord, parts []PartitionState) (TopicRecord, error) {
	return s.changeTopic(ctx, t, func(stored TopicRecord) (TopicRecord, []clientv3.Op, error) {
		next, err := AddedPartitions(stored, t, parts)
		return next, s.partitionOps(parts), err
	})
}

func (s *etcdStore) partitionOps(parts []PartitionState) []clientv3.Op {
	ops := make([]clientv3.Op, len(parts))
	for i, p := range parts {
		ops[i] = clientv3.OpPut(s.keys.Partition(p.Topic, p.Partition), string(EncodePartition(p)))
	}
	return ops
}

func (s *etcdStore) DeleteTopic(ctx context.Context, name string, id [16]byte) error {
	for {
		stored, err := s.getTopic(ctx, name)
		if err != nil {
			return err
		}
		if stored.ID != id {
			return ErrNotFound
		}
		key := s.keys.Topic(name)
		resp, err := s.cli.Txn(ctx).If(clientv3.Compare(clientv3.ModRevision(key), "=", stored.Version)).
			Then(clientv3.OpDelete(key), clientv3.OpDelete(s.keys.Partitions(name), clientv3.WithPrefix())).Commit()
		if err != nil {
			return fmt.Errorf("clustermeta: deleting topic %s: %w", name, err)
		}
		if resp.Succeeded {
			return nil
		}
		// Changed meanwhile (configs): read again.
	}
}

// fenceCmp is the fence's comparison; none for the zero Fence.
func fenceCmp(f Fence) []clientv3.Cmp {
	if f.Key == "" {
		return nil
	}
	return []clientv3.Cmp{clientv3.Compare(clientv3.CreateRevision(f.Key), "=", f.CreateRev)}
}

// failed tells a fenced write from a conflicting one after a failed
// transaction whose Else read the fence's key.
func failed(f Fence, resp *clientv3.TxnResponse) error {
	if f.Key != "" {
		kvs := resp.Responses[0].GetResponseRange().Kvs
		if len(kvs) == 0 || kvs[0].CreateRevision != f.CreateRev {
			return ErrFenced
		}
	}
	return ErrConflict
}

func (s *etcdStore) CASPartitions(ctx context.Context, fence Fence, states []PartitionState) ([]PartitionState, error) {
	if len(states) == 0 {
		return nil, nil
	}
	if err := CheckCAS(states); err != nil {
		return nil, err
	}
	cmps := fenceCmp(fence)
	ops := make([]clientv3.Op, len(states))
	for i, p := range states {
		key := s.keys.Partition(p.Topic, p.Partition)
		cmps = append(cmps, clientv3.Compare(clientv3.ModRevision(key), "=", p.Version))
		ops[i] = clientv3.OpPut(key, string(EncodePartition(p)))
	}
	txn := s.cli.Txn(ctx).If(cmps...).Then(ops...)
	if fence.Key != "" {
		txn = txn.Else(clientv3.OpGet(fence.Key))
	}
	resp, err := txn.Commit()
	if err != nil {
		return nil, fmt.Errorf("clustermeta: writing partition states: %w", err)
	}
	if !resp.Succeeded {
		return nil, failed(fence, resp)
	}
	out := make([]PartitionState, len(states))
	for i, p := range states {
		p.Version = resp.Header.Revision
		out[i] = p
	}
	return out, nil
}

// AllocateProducerIDs moves the allocator's next id by n with a
// compare-and-swap on its version, again after losing a race.
func (s *etcdStore) AllocateProducerIDs(ctx context.Context, n int64) (int64, error) {
	if n <= 0 {
		return 0, fmt.Errorf("clustermeta: allocating %d producer ids", n)
	}
	key := s.keys.ProducerIDs()
	for {
		resp, err := s.cli.Get(ctx, key)
		if err != nil {
			return 0, fmt.Errorf("clustermeta: reading the producer-id allocator: %w", err)
		}
		var next, version int64
		if len(resp.Kvs) > 0 {
			if next, err = DecodeProducerIDs(key, resp.Kvs[0].Value); err != nil {
				return 0, err
			}
			version = resp.Kvs[0].ModRevision
		}
		if next > maxProducerID-n {
			return 0, fmt.Errorf("clustermeta: producer ids exhausted")
		}
		t, err := s.cli.Txn(ctx).If(clientv3.Compare(clientv3.ModRevision(key), "=", version)).
			Then(clientv3.OpPut(key, string(EncodeProducerIDs(next+n)))).Commit()
		if err != nil {
			return 0, fmt.Errorf("clustermeta: writing the producer-id allocator: %w", err)
		}
		if t.Succeeded {
			return next, nil
		}
	}
}

// maxProducerID bounds the allocator (Kafka's producer ids are int64,
// the largest kept free).
const maxProducerID = int64(1<<63 - 1)

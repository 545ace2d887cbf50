package broker

// The replication tests' cluster: in-process brokers in cluster mode over
// a small in-memory store (only what the leader writes: the ISR's
// compare-and-swap), roles applied by hand the way the reconciler applies
// them, and a test fetcher that replicates when the test says so (one
// fetch per followed partition per round), so every step is the test's.

import (
	"context"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/verbatim-kafka/verbatim/clustermeta"
	"github.com/verbatim-kafka/verbatim/kbatch"
)

// fakeStore keeps partition states and answers CASPartitions; the other
// methods are not used by the replication code.
type fakeStore struct {
	mu    sync.Mutex
	rev   int64
	parts map[TopicPartition]clustermeta.PartitionState
	// fenced makes every fenced write fail (a leader whose session ended).
	fenced atomic.Bool
	// onChange delivers a written state (the reconciler's part).
	onChange func(clustermeta.PartitionState)
}

var _ clustermeta.Store = (*fakeStore)(nil)

var errFakeStore = errors.New("fake store: not implemented")

func (f *fakeStore) ClusterID() string { return "fake-cluster" }
func (f *fakeStore) Snapshot(context.Context) (*clustermeta.Snapshot, error) {
	// What a restarted broker's Open reads: the partitions put so far.
	f.mu.Lock()
	defer f.mu.Unlock()
	snap := &clustermeta.Snapshot{ClusterID: f.ClusterID(), Controller: clustermeta.NoLeader, Revision: f.rev,
		Topics: map[string]clustermeta.TopicRecord{}, Partitions: map[string][]clustermeta.PartitionState{}}
	for tp, st := range f.parts {
		ps := snap.Partitions[tp.Topic]
		for int32(len(ps)) <= tp.Partition {
			ps = append(ps, clustermeta.PartitionState{})
		}
		ps[tp.Partition] = st
		snap.Partitions[tp.Topic] = ps
		snap.Topics[tp.Topic] = clustermeta.TopicRecord{Name: tp.Topic, ID: st.TopicID, Partitions: int32(len(ps))}
	}
	return snap, nil
}
func (f *fakeStore) Watch(context.Context) <-chan *clustermeta.Snapshot { return nil }
func (f *fakeStore) Register(context.Context, clustermeta.BrokerInfo, int64) (*clustermeta.Session, error) {
	return nil, errFakeStore
}
func (f *fakeStore) CreateTopic(context.Context, clustermeta.TopicRecord, []clustermeta.PartitionState) (clustermeta.TopicRecord, []clustermeta.PartitionState, error) {
	return clustermeta.TopicRecord{}, nil, errFakeStore
}
func (f *fakeStore) UpdateTopic(context.Context, clustermeta.TopicRecord) (clustermeta.TopicRecord, error) {
	return clustermeta.TopicRecord{}, errFakeStore
}
func (f *fakeStore) AddPartitions(context.Context, clustermeta.TopicRecord, []clustermeta.PartitionState) (clustermeta.TopicRecord, error) {
	return clustermeta.TopicRecord{}, errFakeStore
}
func (f *fakeStore) DeleteTopic(context.Context, string, [16]byte) error { return errFakeStore }
func (f *fakeStore) AllocateProducerIDs(context.Context, int64) (int64, error) {
	return 0, errFakeStore
}
func (f *fakeStore) Campaign(context.Context, int32, int64) (*clustermeta.Leadership, error) {
	return nil, errFakeStore
}
func (f *fakeStore) Close() error { return nil }

// put stores st unconditionally (the controller's decisions in the
// tests) and returns it with its version.
func (f *fakeStore) put(st clustermeta.PartitionState) clustermeta.PartitionState {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.rev++
	st.Version = f.rev
	f.parts[TopicPartition{st.Topic, st.Partition}] = st
	return st
}

func (f *fakeStore) get(topic string, p int32) clustermeta.PartitionState {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.parts[TopicPartition{topic, p}]
}

func (f *fakeStore) CASPartitions(_ context.Context, fence clustermeta.Fence, states []clustermeta.PartitionState) ([]clustermeta.PartitionState, error) {
	if f.fenced.Load() {
		return nil, clustermeta.ErrFenced
	}
	f.mu.Lock()
	for _, st := range states {
		if cur, ok := f.parts[TopicPartition{st.Topic, st.Partition}]; !ok || cur.Version != st.Version {
			f.mu.Unlock()
			return nil, clustermeta.ErrConflict
		}
	}
	out := make([]clustermeta.PartitionState, len(states))
	for i, st := range states {
		f.rev++
		st.Version = f.rev
		f.parts[TopicPartition{st.Topic, st.Partition}] = st
		out[i] = st
	}
	cb := f.onChange
	f.mu.Unlock()
	for _, st := range out {
		if cb != nil {
			cb(st)
		}
	}
	return out, nil
}

// replNode is one broker of the test cluster.
type replNode struct {
	id      int32
	b       *testBroker
	fetcher *testFetcher
}

func (n *replNode) srv() *Server { return n.b.srv }

// replCluster is the test cluster.
type replCluster struct {
	t       *testing.T
	store   *fakeStore
	nodes   map[int32]*replNode
	now     atomic.Int64 // the fake clock, unix nanoseconds
	applyMu sync.Mutex
}

// replicaLagForTests is replica.lag.time.max.ms in the tests: the periodic
// shrink check (every half of it) never runs during a test; the tests
// move the fake clock and run the check themselves.
const replicaLagForTests = time.Hour

func newReplCluster(t *testing.T, n int, mod func(*ClusterConfig)) *replCluster {
	t.Helper()
	c := &replCluster{t: t, store: &fakeStore{parts: make(map[TopicPartition]clustermeta.PartitionState)}, nodes: make(map[int32]*replNode)}
	c.now.Store(time.Unix(1_000_000, 0).UnixNano())
	clock := func() time.Time { return time.Unix(0, c.now.Load()) }
	for id := int32(1); id <= int32(n); id++ {
		node := &replNode{id: id}
		node.b = startBroker(t, t.TempDir(), func(cfg *Config) {
			cfg.NodeID = id
			cfg.Cluster = &ClusterConfig{Store: c.store, ReplicaLagTimeMax: replicaLagForTests}
			if mod != nil {
				mod(cfg.Cluster)
			}
		})
		c.setup(node, clock)
		c.nodes[id] = node
	}
	c.store.onChange = c.apply
	return c
}

// setup installs the fake clock, the unfenced ISR writes and the test
// fetcher on node's (new) server.
func (c *replCluster) setup(node *replNode, clock func() time.Time) {
	s := node.srv()
	s.repl.now.Store(&clock)
	s.repl.fence.Store(&clustermeta.Fence{})
	node.fetcher = &testFetcher{c: c, node: node, parts: make(map[TopicPartition]FollowedPartition)}
	s.SetFollowers(node.fetcher)
}

func (c *replCluster) advance(d time.Duration) { c.now.Add(int64(d)) }

// createTopic creates a topic with one partition on every broker, the
// same id everywhere, and applies its first state (leader replicas[0],
// every replica in sync, epoch 0).
func (c *replCluster) createTopic(name string, replicas []int32, configs map[string]string) clustermeta.PartitionState {
	c.t.Helper()
	id := [16]byte{1, 2, 3, byte(len(name))}
	copy(id[4:], name)
	for _, n := range c.nodes {
		c.hostTopic(n, name, id, configs)
	}
	st := c.store.put(clustermeta.PartitionState{Topic: name, TopicID: id, Partition: 0,
		Replicas: replicas, ISR: slices.Clone(replicas), Leader: replicas[0]})
	c.apply(st)
	return st
}

func (c *replCluster) hostTopic(n *replNode, name string, id [16]byte, configs map[string]string) {
	c.t.Helper()
	tc, err := newTopicConfig(configs)
	if err != nil {
		c.t.Fatal(err)
	}
	hostTopicForTest(c.t, n.srv(), name, id, 1, tc)
}

// elect writes a new leader (epoch +1) with the given ISR and applies it.
func (c *replCluster) elect(topic string, leader int32, isr []int32) clustermeta.PartitionState {
	st := c.store.get(topic, 0)
	st.Leader, st.ISR = leader, isr
	st.LeaderEpoch++
	st.PartitionEpoch++
	st = c.store.put(st)
	c.apply(st)
	return st
}

// apply is the reconciler: every broker hosting the topic takes st.
func (c *replCluster) apply(st clustermeta.PartitionState) {
	c.applyMu.Lock()
	defer c.applyMu.Unlock()
	for _, n := range c.nodes {
		if n.b.srv == nil {
			continue
		}
		if t := n.srv().cluster.topic(st.Topic); t != nil {
			n.srv().applyRole(t.Partition(st.Partition), st)
		}
	}
}

// replicate runs rounds of fetches on every follower.
func (c *replCluster) replicate(rounds int) {
	c.t.Helper()
	for i := 0; i < rounds; i++ {
		for id := int32(1); id <= int32(len(c.nodes)); id++ {
			c.nodes[id].fetcher.fetchOnce()
		}
	}
}

// handle is a node's log handle of the topic's partition 0.
func (c *replCluster) handle(id int32, topic string) *logHandle {
	c.t.Helper()
	h, err := partitionHandle(c.nodes[id].srv().cluster.topic(topic).Partition(0))
	if err != nil {
		c.t.Fatal(err)
	}
	return h
}

// logBytes is a node's whole log of partition 0 as stored.
func (c *replCluster) logBytes(id int32, topic string) []byte {
	c.t.Helper()
	l := c.handle(id, topic).log
	var out []byte
	for off := l.LogStartOffset(); off < l.LogEndOffset(); {
		sl, err := l.Read(off, 1<<20)
		if err != nil {
			c.t.Fatal(err)
		}
		b, err := sl.Bytes(nil)
		if err != nil || len(b) == 0 {
			c.t.Fatalf("read at %d: %v (%d bytes)", off, err, len(b))
		}
		out = append(out, b...)
		off = lastOffsetOf(b) + 1
	}
	return out
}

// testFetcher is a broker's Followers: it remembers what to follow and
// fetches when told.
type testFetcher struct {
	c     *replCluster
	node  *replNode
	mu    sync.Mutex
	parts map[TopicPartition]FollowedPartition
	// stopped: this follower does not fetch (a stuck broker).
	stopped atomic.Bool
}

func (f *testFetcher) Follow(parts []FollowedPartition) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, p := range parts {
		f.parts[p.TopicPartition] = p
	}
}

func (f *testFetcher) Unfollow(parts []TopicPartition) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, p := range parts {
		delete(f.parts, p)
	}
}

func (f *testFetcher) followed() []FollowedPartition {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []FollowedPartition
	for _, p := range f.parts {
		out = append(out, p)
	}
	return out
}

// fetchOnce sends one follower fetch per followed partition to its leader
// (Fetch v16: ReplicaState) and applies the answer: records appended
// verbatim, a diverging epoch truncated (KIP-320).
func (f *testFetcher) fetchOnce() {
	if f.stopped.Load() || f.node.b.srv == nil {
		return
	}
	t := f.c.t
	for _, fp := range f.followed() {
		leader := f.c.nodes[fp.Leader]
		if leader == nil || leader.b.srv == nil {
			continue
		}
		r, err := f.node.srv().FollowerReplica(fp.Topic, fp.Partition)
		if err != nil {
			continue
		}
		req := kmsg.NewPtrFetchRequest()
		req.Version = 16
		req.ReplicaID = -1
		req.ReplicaState.ID, req.ReplicaState.Epoch = f.node.id, -1
		req.MaxBytes, req.SessionEpoch = 10<<20, -1
		rt := kmsg.NewFetchRequestTopic()
		rt.Topic, rt.TopicID = fp.Topic, fp.TopicID
		rp := kmsg.NewFetchRequestTopicPartition()
		rp.Partition, rp.FetchOffset, rp.PartitionMaxBytes = fp.Partition, r.LogEndOffset(), 1<<20
		rp.CurrentLeaderEpoch, rp.LastFetchedEpoch, rp.LogStartOffset = fp.LeaderEpoch, r.LatestEpoch(), r.LogStartOffset()
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		resp, err := rawRoundTrip(leader.b.addr, req)
		if err != nil {
			t.Fatalf("follower %d fetch: %v", f.node.id, err)
		}
		pr := resp.(*kmsg.FetchResponse).Topics[0].Partitions[0]
		switch {
		case pr.ErrorCode != 0:
			continue // a leader change in progress: the next Follow fixes it
		case pr.DivergingEpoch.Epoch >= 0:
			_, end, err := r.EndOffsetForEpoch(pr.DivergingEpoch.Epoch)
			if err != nil {
				t.Fatal(err)
			}
			if err := r.Truncate(min(end, pr.DivergingEpoch.EndOffset)); err != nil {
				t.Fatalf("follower %d truncate: %v", f.node.id, err)
			}
		default:
			if err := r.Append(pr.RecordBatches, pr.HighWatermark, pr.LogStartOffset); err != nil {
				t.Fatalf("follower %d append: %v", f.node.id, err)
			}
		}
	}
}

// lastOffsetOf is the last offset of a record set's last batch.
func lastOffsetOf(set []byte) int64 {
	last := int64(-1)
	for it := kbatch.Batches(set); it.Next(); {
		b := it.Batch()
		last = kbatch.BaseOffset(b) + int64(kbatch.LastOffsetDelta(b))
	}
	return last
}

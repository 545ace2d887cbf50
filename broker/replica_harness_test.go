package broker

// The replication tests' cluster: in-process brokers in cluster mode over
// memstore, joined (registered, their roles applied by the reconciler from
// the store's snapshots), the controller's decisions written by the test,
// and a test fetcher that replicates when the test says so (one fetch per
// followed partition per round), so every step is the test's.

import (
	"errors"
	"net"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/verbatim-kafka/verbatim/clustermeta"
	"github.com/verbatim-kafka/verbatim/clustermeta/memstore"
	"github.com/verbatim-kafka/verbatim/kbatch"
)

// replNode is one broker of the test cluster.
type replNode struct {
	id      int32
	b       *testBroker
	fetcher *testFetcher
}

func (n *replNode) srv() *Server { return n.b.srv }

// replCluster is the test cluster.
type replCluster struct {
	t     *testing.T
	store *memstore.Store
	nodes map[int32]*replNode
	mod   func(*ClusterConfig)
	now   atomic.Int64 // the fake clock, unix nanoseconds
}

// replicaLagForTests is replica.lag.time.max.ms in the tests: the periodic
// shrink check (every half of it) never runs during a test; the tests
// move the fake clock and run the check themselves.
const replicaLagForTests = time.Hour

func newReplCluster(t *testing.T, n int, mod func(*ClusterConfig)) *replCluster {
	t.Helper()
	c := &replCluster{t: t, store: memstore.New(), nodes: make(map[int32]*replNode), mod: mod}
	t.Cleanup(func() { c.store.Close() })
	c.now.Store(time.Unix(1_000_000, 0).UnixNano())
	for id := int32(1); id <= int32(n); id++ {
		c.nodes[id] = &replNode{id: id}
		c.start(id, t.TempDir())
	}
	return c
}

// start opens node id's broker on dir, installs the fake clock and the
// test fetcher, and joins the cluster.
func (c *replCluster) start(id int32, dir string) {
	c.t.Helper()
	node := c.nodes[id]
	node.b = startBroker(c.t, dir, func(cfg *Config) {
		cfg.NodeID = id
		cfg.Cluster = &ClusterConfig{Store: c.store, ReplicaLagTimeMax: replicaLagForTests}
		if c.mod != nil {
			c.mod(cfg.Cluster)
		}
	})
	s := node.srv()
	clock := func() time.Time { return time.Unix(0, c.now.Load()) }
	s.repl.now.Store(&clock)
	node.fetcher = &testFetcher{c: c, node: node, parts: make(map[TopicPartition]FollowedPartition)}
	s.SetFollowers(node.fetcher)
	host, port, err := net.SplitHostPort(node.b.addr)
	if err != nil {
		c.t.Fatal(err)
	}
	pn, _ := strconv.Atoi(port)
	ep := clustermeta.Endpoint{Listener: "PLAINTEXT", SecurityProtocol: "PLAINTEXT", Host: host, Port: int32(pn)}
	if err := s.JoinCluster(ctxT(c.t), []clustermeta.Endpoint{ep}); err != nil {
		c.t.Fatal(err)
	}
}

func (c *replCluster) advance(d time.Duration) { c.now.Add(int64(d)) }

// createTopic creates a one-partition topic in the store (leader
// replicas[0], every replica in sync, epoch 0) and waits until every
// broker applied it.
func (c *replCluster) createTopic(name string, replicas []int32, configs map[string]string) clustermeta.PartitionState {
	c.t.Helper()
	id := [16]byte{1, 2, 3, byte(len(name))}
	copy(id[4:], name)
	_, parts, err := c.store.CreateTopic(ctxT(c.t), clustermeta.TopicRecord{Name: name, ID: id, Partitions: 1, Configs: configs},
		[]clustermeta.PartitionState{{Topic: name, TopicID: id, Partition: 0, Replicas: replicas, ISR: slices.Clone(replicas), Leader: replicas[0]}})
	if err != nil {
		c.t.Fatal(err)
	}
	c.sync(parts[0].Version)
	return parts[0]
}

// state is the partition's state in the store.
func (c *replCluster) state(topic string) clustermeta.PartitionState {
	c.t.Helper()
	snap, err := c.store.Snapshot(ctxT(c.t))
	if err != nil {
		c.t.Fatal(err)
	}
	st, ok := snap.Partition(topic, 0)
	if !ok {
		c.t.Fatalf("no partition %s-0 in the store", topic)
	}
	return st
}

// write is the controller's decision: st written unfenced, then applied
// by every broker.
func (c *replCluster) write(st clustermeta.PartitionState) clustermeta.PartitionState {
	c.t.Helper()
	st.PartitionEpoch++
	got, err := c.store.CASPartitions(ctxT(c.t), clustermeta.Fence{}, []clustermeta.PartitionState{st})
	if err != nil {
		c.t.Fatal(err)
	}
	c.sync(got[0].Version)
	return got[0]
}

// elect writes a new leader (epoch +1) with the given ISR.
func (c *replCluster) elect(topic string, leader int32, isr []int32) clustermeta.PartitionState {
	c.t.Helper()
	st := c.state(topic)
	st.Leader, st.ISR = leader, isr
	st.LeaderEpoch++
	return c.write(st)
}

func (c *replCluster) setISR(topic string, isr []int32) {
	c.t.Helper()
	st := c.state(topic)
	st.ISR = isr
	c.write(st)
}

// sync waits until every running broker applied the store's revision rev.
func (c *replCluster) sync(rev int64) {
	c.t.Helper()
	for _, n := range c.nodes {
		if n.b.srv == nil {
			continue
		}
		if !n.srv().cm.awaitRevision(ctxT(c.t), rev) {
			c.t.Fatalf("broker %d did not apply revision %d", n.id, rev)
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
		req.ReplicaState.ID, req.ReplicaState.Epoch = f.node.id, f.node.srv().BrokerEpoch()
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
			if err := r.Append(pr.RecordBatches, pr.HighWatermark, pr.LogStartOffset); errors.Is(err, kerr.NotLeaderForPartition) {
				continue // the role changed during the fetch (an epoch raise): the answer is dropped, as the fetcher drops it
			} else if err != nil {
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

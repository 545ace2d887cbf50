package link

import (
	"context"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/verbatim-kafka/verbatim/broker"
	"github.com/verbatim-kafka/verbatim/internal/testkit"
	"github.com/verbatim-kafka/verbatim/wireext"
)

// fakeCluster is what two link managers share when they stand for two
// brokers of a cluster over one real destination broker: the versioned
// link meta records, who leads which partition and who coordinates. The
// destination broker itself is a single node (it takes any partition's
// append), so the test sees exactly which manager copies what.
type fakeCluster struct {
	mu      sync.Mutex
	recs    map[string]fakeRec
	rev     int64
	leaders map[string]int32 // "topic/partition"; absent: node 1
	coord   int32
	applied chan struct{}
}

type fakeRec struct {
	data    []byte
	version int64
}

func newFakeCluster() *fakeCluster {
	return &fakeCluster{recs: map[string]fakeRec{}, leaders: map[string]int32{}, coord: 1, applied: make(chan struct{})}
}

// changed is a snapshot applied by every broker.
func (c *fakeCluster) changedLocked() {
	close(c.applied)
	c.applied = make(chan struct{})
}

func (c *fakeCluster) lead(topic string, partition, node int32) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.leaders[fmt.Sprintf("%s/%d", topic, partition)] = node
	c.changedLocked()
}

// clusterNode is one broker's view of the fake cluster.
type clusterNode struct {
	*broker.Server
	c    *fakeCluster
	node int32
}

func (n clusterNode) LinkClustered() bool { return true }
func (n clusterNode) LinkLeads(topic string, partition int32) bool {
	if _, ok := n.Server.LinkTopic(topic); !ok {
		return false
	}
	n.c.mu.Lock()
	defer n.c.mu.Unlock()
	l, ok := n.c.leaders[fmt.Sprintf("%s/%d", topic, partition)]
	return l == n.node || !ok && n.node == 1
}
func (n clusterNode) LinkCoordinator() bool {
	n.c.mu.Lock()
	defer n.c.mu.Unlock()
	return n.c.coord == n.node
}
func (n clusterNode) ClusterApplied() <-chan struct{} {
	n.c.mu.Lock()
	defer n.c.mu.Unlock()
	return n.c.applied
}
func (n clusterNode) ReadLinkMetaVersion(_ context.Context, name string, _ bool) ([]byte, int64, error) {
	n.c.mu.Lock()
	defer n.c.mu.Unlock()
	r, ok := n.c.recs[name]
	if !ok {
		return nil, 0, fs.ErrNotExist
	}
	return r.data, r.version, nil
}
func (n clusterNode) WriteLinkMetaIf(_ context.Context, name string, data []byte, version int64) (int64, error) {
	n.c.mu.Lock()
	defer n.c.mu.Unlock()
	if r := n.c.recs[name]; r.version != version {
		return 0, broker.ErrLinkMetaConflict
	}
	n.c.rev++
	n.c.recs[name] = fakeRec{append([]byte(nil), data...), n.c.rev}
	n.c.changedLocked()
	return n.c.rev, nil
}
func (n clusterNode) RemoveLinkMetaIf(_ context.Context, name string, version int64) error {
	n.c.mu.Lock()
	defer n.c.mu.Unlock()
	if r, ok := n.c.recs[name]; ok && version != 0 && r.version != version {
		return broker.ErrLinkMetaConflict
	}
	delete(n.c.recs, name)
	n.c.changedLocked()
	return nil
}
func (n clusterNode) ReadLinkMeta(name string) ([]byte, error) {
	b, _, err := n.ReadLinkMetaVersion(context.Background(), name, false)
	return b, err
}
func (n clusterNode) WriteLinkMeta(name string, data []byte) error {
	n.c.mu.Lock()
	defer n.c.mu.Unlock()
	n.c.rev++
	n.c.recs[name] = fakeRec{append([]byte(nil), data...), n.c.rev}
	n.c.changedLocked()
	return nil
}
func (n clusterNode) RemoveLinkMeta(name string) error {
	return n.RemoveLinkMetaIf(context.Background(), name, 0)
}

func openClusterManager(t *testing.T, h Host) *Manager {
	t.Helper()
	m, err := Open(Config{Host: h, Log: slog.New(slog.NewTextHandler(io.Discard, nil)), SyncInterval: 50 * time.Millisecond, RetryFor: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Close() })
	return m
}

// copying reports which partitions of topic m runs a copy for.
func copying(m *Manager, link, topic string) map[int32]bool {
	out := map[int32]bool{}
	r := m.link(link)
	if r == nil {
		return out
	}
	r.mu.Lock()
	ps := append([]*partRun(nil), r.parts[topic]...)
	r.mu.Unlock()
	for _, pr := range ps {
		if pr.running() {
			out[pr.partition] = true
		}
	}
	return out
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); !cond(); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("not within 30s: %s", what)
		}
	}
}

// Two brokers of a cluster run one link: a link created through one
// starts on the other, each copies only the partitions it leads, a copy
// moves with the leadership and continues the log exactly, a pause made
// through a broker that leads nothing ends the copies on the one that
// does, and a deletion through either stops the link on both. Only the
// coordinator creates the topics.
func TestLinkOnClusterFollowsLeadership(t *testing.T) {
	src := testkit.StartSource(t, kfake.SeedTopics(2, "t"))
	sa := src.ListenAddrs()[0]
	d := testkit.StartDest(t, t.TempDir())
	ctx := context.Background()
	pc := testkit.Client(t, sa, kgo.ProducerBatchCompression(kgo.Lz4Compression()), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	for p := int32(0); p < 2; p++ {
		produce(t, pc, "t", p, 100, "first")
	}
	fc := newFakeCluster()
	fc.lead("t", 1, 2)
	fc.coord = 2 // broker 2 creates the topics: broker 1 must wait for them
	ma := openClusterManager(t, clusterNode{d.Srv, fc, 1})
	mb := openClusterManager(t, clusterNode{d.Srv, fc, 2})

	cfg := wireext.LinkConfig{Name: "l", SourceBootstrap: sa, Topics: "t", SyncIntervalMs: 50}
	if err := ma.CreateLink(ctx, "User:admin", cfg, false); err != nil {
		t.Fatal(err)
	}
	if err := mb.CreateLink(ctx, "User:admin", cfg, false); err == nil {
		t.Fatal("the same link created through the other broker too")
	}
	waitFor(t, "the link running on broker 2", func() bool { return mb.link("l") != nil })
	waitFor(t, "each broker copying the partition it leads", func() bool {
		a, b := copying(ma, "l", "t"), copying(mb, "l", "t")
		return a[0] && !a[1] && b[1] && !b[0]
	})
	sameEventually := func(what string) {
		t.Helper()
		waitFor(t, what, func() bool {
			for p := int32(0); p < 2; p++ {
				s, dl := rawLog(t, sa, "t", p), rawLog(t, d.Addr, "t", p)
				if len(s) == 0 || string(s) != string(dl) {
					return false
				}
			}
			return true
		})
	}
	sameEventually("both partitions copied exactly")

	// Partition 0's leadership moves to broker 2: its copy moves too.
	fc.lead("t", 0, 2)
	waitFor(t, "partition 0's copy on broker 2 only", func() bool {
		a, b := copying(ma, "l", "t"), copying(mb, "l", "t")
		return !a[0] && b[0] && b[1]
	})
	for p := int32(0); p < 2; p++ {
		produce(t, pc, "t", p, 50, "second")
	}
	sameEventually("the moved copy continues the log exactly")
	for _, m := range []*Manager{ma, mb} {
		for k, st := range statuses(t, m, "l") {
			if st.State == wireext.StateFailed {
				t.Fatalf("%s FAILED after the leadership moved: %s", k, st.Reason)
			}
		}
	}

	// A pause through broker 1, which leads nothing, ends broker 2's
	// copies; the resume through broker 1 starts them again.
	if res, err := ma.PauseMirrorTopics(ctx, "User:admin", wireext.PauseMirrorTopicsRequest{Link: "l", Topics: []string{"t"}, Pause: true}); err != nil || res[0].ErrorCode != 0 {
		t.Fatalf("pause: %v %+v", err, res)
	}
	waitFor(t, "no copy on broker 2 after the pause", func() bool { return len(copying(mb, "l", "t")) == 0 })
	if res, err := ma.PauseMirrorTopics(ctx, "User:admin", wireext.PauseMirrorTopicsRequest{Link: "l", Topics: []string{"t"}, Pause: false}); err != nil || res[0].ErrorCode != 0 {
		t.Fatalf("resume: %v %+v", err, res)
	}
	produce(t, pc, "t", 1, 30, "third")
	sameEventually("the copies resumed on broker 2")
	if a := copying(ma, "l", "t"); len(a) != 0 {
		t.Fatalf("broker 1 copies %v while it leads nothing", a)
	}

	// Concurrent updates through both brokers are not lost.
	rb := mb.link("l")
	ra := ma.link("l")
	var wg sync.WaitGroup
	for i := int32(0); i < 10; i++ {
		wg.Add(2)
		go func() { defer wg.Done(); ra.fail("other", i, failure{Reason: "a", Divergence: -1}) }()
		go func() { defer wg.Done(); rb.fail("other", 100+i, failure{Reason: "b", Divergence: -1}) }()
	}
	wg.Wait()
	lm, err := ma.store.loadFresh("l", true)
	if err != nil {
		t.Fatal(err)
	}
	if n := len(lm.Topics["other"].Failed); n != 20 {
		t.Fatalf("%d of 20 concurrent failures persisted", n)
	}

	// Deleted through broker 2: gone on broker 1 too.
	if err := mb.DeleteLink(ctx, "User:admin", "l", true); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the link stopped on broker 1", func() bool { return ma.link("l") == nil })
	if names, err := ma.store.names(); err != nil || len(names) != 0 {
		t.Fatalf("index after the deletion: %v %v", names, err)
	}
}

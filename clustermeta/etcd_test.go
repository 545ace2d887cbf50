package clustermeta

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

const patience = 20 * time.Second

func tctx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), patience)
	t.Cleanup(cancel)
	return ctx
}

func testTopic(name string, n int32) (TopicRecord, []PartitionState) {
	t := TopicRecord{Name: name, Partitions: n}
	copy(t.ID[:], name)
	ps := make([]PartitionState, n)
	for i := range ps {
		ps[i] = PartitionState{Topic: name, TopicID: t.ID, Partition: int32(i), Replicas: []int32{1}, ISR: []int32{1}, Leader: 1}
	}
	return t, ps
}

func openPrefix(t *testing.T, endpoints []string, prefix string) *etcdStore {
	t.Helper()
	st, err := Open(tctx(t), Config{Endpoints: endpoints, Prefix: prefix, DialTimeout: patience})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st.(*etcdStore)
}

// The first opener creates the cluster id; every later and concurrent
// opener reads the same one.
func TestClusterIDFirstOpenerWins(t *testing.T) {
	ep := []string{SharedEndpoint(t)}
	prefix := fmt.Sprintf("/cid-%d/", time.Now().UnixNano())
	ids := make([]string, 4)
	var wg sync.WaitGroup
	for i := range ids {
		wg.Add(1)
		go func() {
			defer wg.Done()
			st, err := Open(context.Background(), Config{Endpoints: ep, Prefix: prefix})
			if err != nil {
				t.Error(err)
				return
			}
			ids[i] = st.ClusterID()
			st.Close()
		}()
	}
	wg.Wait()
	for _, id := range ids[1:] {
		if id != ids[0] || id == "" {
			t.Fatalf("cluster ids %v", ids)
		}
	}
	if again := openPrefix(t, ep, prefix).ClusterID(); again != ids[0] {
		t.Fatalf("reopened: %s, first %s", again, ids[0])
	}
}

// A broker that stops renewing its lease (its process died: no revoke)
// leaves every other broker's snapshot when the TTL runs out.
func TestRegistrationExpiresWithoutKeepAlive(t *testing.T) {
	ep := []string{SharedEndpoint(t)}
	prefix := fmt.Sprintf("/ttl-%d/", time.Now().UnixNano())
	dying := openPrefix(t, ep, prefix)
	watcher := openPrefix(t, ep, prefix)
	sess, err := dying.Register(tctx(t), BrokerInfo{NodeID: 7}, 1)
	if err != nil {
		t.Fatal(err)
	}
	w := watcher.Watch(tctx(t))
	for s := range w {
		if _, ok := s.Brokers[7]; ok {
			break
		}
	}
	dying.Close() // keep-alives stop, the lease is not revoked
	<-sess.Done()
	deadline := time.After(patience)
	for {
		select {
		case s := <-w:
			if _, ok := s.Brokers[7]; !ok {
				return
			}
		case <-deadline:
			t.Fatal("the registration outlived its lease")
		}
	}
}

// A watch that finds its revision compacted reloads the state and goes
// on from there.
func TestWatchReloadsAfterCompaction(t *testing.T) {
	ep := []string{SharedEndpoint(t)}
	st := openPrefix(t, ep, fmt.Sprintf("/compact-%d/", time.Now().UnixNano()))
	var compacted atomic.Int32
	st.beforeFollow = func(rev int64) {
		if compacted.Add(1) != 1 {
			return
		}
		// A change, then history compacted past it (a later write
		// outside the prefix): the watch from rev+1 cannot start.
		tr, ps := testTopic("missed", 1)
		if _, _, err := st.CreateTopic(context.Background(), tr, ps); err != nil {
			t.Error(err)
		}
		resp, err := st.cli.Put(context.Background(), st.keys.Prefix[:len(st.keys.Prefix)-1]+"-outside", "x")
		if err != nil {
			t.Error(err)
			return
		}
		if _, err := st.cli.Compact(context.Background(), resp.Header.Revision); err != nil {
			t.Error(err)
		}
	}
	w := st.Watch(tctx(t))
	first := <-w
	if _, ok := first.Topics["missed"]; ok {
		t.Fatal("the first snapshot has the later topic")
	}
	deadline := time.After(patience)
	for {
		select {
		case s := <-w:
			if _, ok := s.Topics["missed"]; ok {
				if compacted.Load() < 2 {
					t.Fatal("found the change without reloading")
				}
				return
			}
		case <-deadline:
			t.Fatal("the change made before the compaction never arrived")
		}
	}
}

// Three embedded members form a cluster; the store keeps serving writes
// and the watch keeps delivering after one member stops.
func TestEmbeddedThreeMembersSurviveOne(t *testing.T) {
	type member struct{ name, client, peer string }
	ms := make([]member, 3)
	urls := FreeURLs(t, 6)
	initial := ""
	for i := range ms {
		ms[i] = member{fmt.Sprintf("m%d", i), urls[2*i], urls[2*i+1]}
		if i > 0 {
			initial += ","
		}
		initial += ms[i].name + "=" + ms[i].peer
	}
	es := make([]*Embedded, 3)
	errs := make([]error, 3)
	cfgs := make([]EmbedConfig, 3)
	var wg sync.WaitGroup
	for i, m := range ms {
		cfgs[i] = EmbedConfig{
			Name: m.name, Dir: filepath.Join(t.TempDir(), "etcd"), ClientURL: m.client, PeerURL: m.peer,
			InitialCluster: initial, ClusterToken: "three",
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			es[i], errs[i] = StartEmbedded(tctx(t), cfgs[i])
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("member %d: %v", i, err)
		}
		t.Cleanup(es[i].Close)
	}
	st := openPrefix(t, []string{ms[0].client, ms[1].client, ms[2].client}, "")
	w := st.Watch(tctx(t))
	tr, ps := testTopic("before", 1)
	if _, _, err := st.CreateTopic(tctx(t), tr, ps); err != nil {
		t.Fatal(err)
	}
	es[0].Close()
	tr, ps = testTopic("after", 1)
	if _, _, err := st.CreateTopic(tctx(t), tr, ps); err != nil {
		t.Fatalf("write with a member down: %v", err)
	}
	if _, err := st.AllocateProducerIDs(tctx(t), 10); err != nil {
		t.Fatal(err)
	}
	waitTopics := func(w <-chan *Snapshot, what string) {
		t.Helper()
		deadline := time.After(patience)
		for {
			select {
			case s := <-w:
				if _, ok := s.Topics["after"]; ok {
					if _, ok := s.Topics["before"]; !ok {
						t.Fatal("lost the first topic")
					}
					return
				}
			case <-deadline:
				t.Fatal(what)
			}
		}
	}
	waitTopics(w, "the watch stopped with one member down")
	// The stopped member restarts from its data directory (the initial
	// cluster is ignored then) and catches up.
	again, err := StartEmbedded(tctx(t), cfgs[0])
	if err != nil {
		t.Fatalf("restart: %v", err)
	}
	t.Cleanup(again.Close)
	only0 := openPrefix(t, []string{ms[0].client}, "")
	waitTopics(only0.Watch(tctx(t)), "the restarted member did not catch up")
}

func TestStartEmbeddedBoundedByContext(t *testing.T) {
	// A member of a three-member cluster whose peers never start has no
	// quorum: StartEmbedded gives up when ctx ends.
	ctx, cancel := context.WithTimeout(context.Background(), 1500*time.Millisecond)
	defer cancel()
	urls := FreeURLs(t, 4)
	_, err := StartEmbedded(ctx, EmbedConfig{
		Name: "alone", Dir: filepath.Join(t.TempDir(), "etcd"), ClientURL: urls[0], PeerURL: urls[1],
		InitialCluster: "alone=" + urls[1] + ",b=" + urls[2] + ",c=" + urls[3],
	})
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("start without quorum: %v", err)
	}
}

func TestOpenUnreachableGivesUp(t *testing.T) {
	start := time.Now()
	_, err := Open(context.Background(), Config{Endpoints: FreeURLs(t, 1), DialTimeout: 500 * time.Millisecond})
	if err == nil {
		t.Fatal("opened a store on nothing")
	}
	if d := time.Since(start); d > patience {
		t.Fatalf("gave up after %v", d)
	}
}

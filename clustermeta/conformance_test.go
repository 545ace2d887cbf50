package clustermeta_test

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/verbatim-kafka/verbatim/clustermeta"
	"github.com/verbatim-kafka/verbatim/clustermeta/memstore"
)

// The conformance suite: every behaviour of the Store contract, run
// against the etcd store (over the embedded member) and memstore.

type harness struct {
	st clustermeta.Store
	// expire ends node's leases as if it stopped renewing them.
	expire func(node int32)
}

const ttl = 2 // seconds: lease loss is forced by hand, the TTL never decides

// patience bounds waits for asynchronous outcomes (a watch delivery, a
// revoked lease noticed): generous, about correctness.
const patience = 20 * time.Second

func stores(t *testing.T) map[string]func(t *testing.T) harness {
	return map[string]func(t *testing.T) harness{
		"etcd": func(t *testing.T) harness {
			st := clustermeta.OpenTestStore(t)
			return harness{st: st, expire: func(n int32) { clustermeta.ExpireNode(t, st, n) }}
		},
		"mem": func(t *testing.T) harness {
			st := memstore.New()
			t.Cleanup(func() { st.Close() })
			return harness{st: st, expire: st.Expire}
		},
	}
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), patience)
	t.Cleanup(cancel)
	return ctx
}

func newTopic(name string, n int32) (clustermeta.TopicRecord, []clustermeta.PartitionState) {
	t := clustermeta.TopicRecord{Name: name, Partitions: n, Configs: map[string]string{"cleanup.policy": "delete"}}
	copy(t.ID[:], name+"-0123456789abcdef")
	return t, newParts(t, 0, n)
}

func newParts(t clustermeta.TopicRecord, first, n int32) []clustermeta.PartitionState {
	var ps []clustermeta.PartitionState
	for i := first; i < first+n; i++ {
		ps = append(ps, clustermeta.PartitionState{
			Topic: t.Name, TopicID: t.ID, Partition: i,
			Replicas: []int32{1, 2, 3}, ISR: []int32{1, 2, 3}, Leader: 1 + i%3, LeaderEpoch: 0,
		})
	}
	return ps
}

func mustCreate(t *testing.T, st clustermeta.Store, name string, n int32) (clustermeta.TopicRecord, []clustermeta.PartitionState) {
	t.Helper()
	tr, ps := newTopic(name, n)
	tr, ps, err := st.CreateTopic(ctxT(t), tr, ps)
	if err != nil {
		t.Fatalf("CreateTopic %s: %v", name, err)
	}
	return tr, ps
}

func snap(t *testing.T, st clustermeta.Store) *clustermeta.Snapshot {
	t.Helper()
	s, err := st.Snapshot(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func broker(id int32) clustermeta.BrokerInfo {
	return clustermeta.BrokerInfo{
		NodeID: id, Rack: fmt.Sprintf("r%d", id%2), InterBrokerListener: "INTERNAL",
		Endpoints:   []clustermeta.Endpoint{{Listener: "INTERNAL", SecurityProtocol: "PLAINTEXT", Host: "127.0.0.1", Port: 9000 + id}},
		Incarnation: fmt.Sprintf("inc-%d", id),
	}
}

func mustRegister(t *testing.T, st clustermeta.Store, id int32) *clustermeta.Session {
	t.Helper()
	s, err := st.Register(ctxT(t), broker(id), ttl)
	if err != nil {
		t.Fatalf("Register %d: %v", id, err)
	}
	t.Cleanup(func() { s.Close(context.Background()) })
	return s
}

func waitClosed(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(patience):
		t.Fatalf("%s: not closed after %v", what, patience)
	}
}

// waitFor reads the watch until a snapshot satisfies ok.
func waitFor(t *testing.T, w <-chan *clustermeta.Snapshot, what string, ok func(*clustermeta.Snapshot) bool) *clustermeta.Snapshot {
	t.Helper()
	deadline := time.After(patience)
	for {
		select {
		case s, open := <-w:
			if !open {
				t.Fatalf("%s: watch closed", what)
			}
			if ok(s) {
				return s
			}
		case <-deadline:
			t.Fatalf("%s: no such snapshot within %v", what, patience)
		}
	}
}

// racers runs writers goroutines, each until rounds of its attempts
// succeeded: an attempt that returns ErrConflict (it lost a race) is made
// again, another error ends its goroutine as a test error.
func racers(t *testing.T, writers, rounds int, attempt func(g int) error) {
	var wg sync.WaitGroup
	for g := 0; g < writers; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for done := 0; done < rounds; {
				err := attempt(g)
				if errors.Is(err, clustermeta.ErrConflict) {
					continue
				}
				if err != nil {
					t.Error(err)
					return
				}
				done++
			}
		}()
	}
	wg.Wait()
}

func wantErr(t *testing.T, err, want error, what string) {
	t.Helper()
	if !errors.Is(err, want) {
		t.Fatalf("%s: error %v, want %v", what, err, want)
	}
}

var behaviours = []struct {
	name string
	run  func(t *testing.T, h harness)
}{
	{"cluster id is set and in snapshots", func(t *testing.T, h harness) {
		id := h.st.ClusterID()
		if len(id) != 22 {
			t.Fatalf("cluster id %q is not a Kafka Uuid", id)
		}
		if _, err := clustermeta.ParseUUID(id); err != nil {
			t.Fatal(err)
		}
		s := snap(t, h.st)
		if s.ClusterID != id || s.Controller != clustermeta.NoLeader || len(s.Topics)+len(s.Brokers) != 0 {
			t.Fatalf("empty snapshot %+v", s)
		}
	}},
	{"create topic: records with versions, once", func(t *testing.T, h harness) {
		tr, ps := mustCreate(t, h.st, "orders", 3)
		if tr.Version <= 0 || len(ps) != 3 || ps[2].Version != tr.Version {
			t.Fatalf("versions: topic %d, parts %+v", tr.Version, ps)
		}
		s := snap(t, h.st)
		if s.Revision < tr.Version {
			t.Fatalf("snapshot revision %d < write %d", s.Revision, tr.Version)
		}
		got := s.Topics["orders"]
		if got.ID != tr.ID || got.Partitions != 3 || got.Version != tr.Version || got.Configs["cleanup.policy"] != "delete" {
			t.Fatalf("stored topic %+v, wrote %+v", got, tr)
		}
		p, ok := s.Partition("orders", 2)
		if !ok || p.Leader != 3 || p.Version != tr.Version || len(p.ISR) != 3 || p.TopicID != tr.ID {
			t.Fatalf("partition 2: %+v %v", p, ok)
		}
		if _, ok := s.Partition("orders", 3); ok {
			t.Fatal("partition 3 exists")
		}
		again, aps := newTopic("orders", 1)
		_, _, err := h.st.CreateTopic(ctxT(t), again, aps)
		wantErr(t, err, clustermeta.ErrTopicExists, "second create")
	}},
	{"create topic refuses states that do not match", func(t *testing.T, h harness) {
		tr, ps := newTopic("bad", 2)
		if _, _, err := h.st.CreateTopic(ctxT(t), tr, ps[:1]); err == nil {
			t.Fatal("created with a missing state")
		}
		ps[1].Partition = 5
		if _, _, err := h.st.CreateTopic(ctxT(t), tr, ps); err == nil {
			t.Fatal("created with a misnumbered state")
		}
		tr.Name = "a/b"
		if _, _, err := h.st.CreateTopic(ctxT(t), tr, nil); err == nil {
			t.Fatal("created a topic whose name holds a slash")
		}
		if len(snap(t, h.st).Topics) != 0 {
			t.Fatal("a refused create wrote")
		}
	}},
	{"update topic compares the version", func(t *testing.T, h harness) {
		tr, _ := mustCreate(t, h.st, "cfg", 1)
		tr.Configs = map[string]string{"retention.ms": "1000"}
		tr.Partitions = 7 // not UpdateTopic's to change
		up, err := h.st.UpdateTopic(ctxT(t), tr)
		if err != nil {
			t.Fatal(err)
		}
		if up.Version <= tr.Version || up.Partitions != 1 {
			t.Fatalf("updated %+v", up)
		}
		_, err = h.st.UpdateTopic(ctxT(t), tr)
		wantErr(t, err, clustermeta.ErrConflict, "stale update")
		got := snap(t, h.st).Topics["cfg"]
		if got.Configs["retention.ms"] != "1000" || got.Partitions != 1 || got.Version != up.Version {
			t.Fatalf("stored %+v", got)
		}
		if err := h.st.DeleteTopic(ctxT(t), "cfg", tr.ID); err != nil {
			t.Fatal(err)
		}
		_, err = h.st.UpdateTopic(ctxT(t), up)
		wantErr(t, err, clustermeta.ErrNotFound, "update of a deleted topic")
	}},
	{"add partitions raises the count", func(t *testing.T, h harness) {
		tr, _ := mustCreate(t, h.st, "grow", 2)
		up, err := h.st.AddPartitions(ctxT(t), tr, newParts(tr, 2, 3))
		if err != nil {
			t.Fatal(err)
		}
		if up.Partitions != 5 || up.Version <= tr.Version {
			t.Fatalf("added: %+v", up)
		}
		s := snap(t, h.st)
		if len(s.Partitions["grow"]) != 5 || s.Partitions["grow"][4].Version != up.Version || s.Partitions["grow"][0].Version != tr.Version {
			t.Fatalf("partitions %+v", s.Partitions["grow"])
		}
		_, err = h.st.AddPartitions(ctxT(t), tr, newParts(tr, 5, 1))
		wantErr(t, err, clustermeta.ErrConflict, "stale add")
		if _, err := h.st.AddPartitions(ctxT(t), up, newParts(tr, 6, 1)); err == nil {
			t.Fatal("added partition 6 after 4")
		}
	}},
	{"delete topic by id, partitions with it", func(t *testing.T, h harness) {
		tr, _ := mustCreate(t, h.st, "gone", 2)
		wantErr(t, h.st.DeleteTopic(ctxT(t), "gone", [16]byte{9}), clustermeta.ErrNotFound, "delete with another id")
		wantErr(t, h.st.DeleteTopic(ctxT(t), "never", tr.ID), clustermeta.ErrNotFound, "delete of a missing topic")
		if err := h.st.DeleteTopic(ctxT(t), "gone", tr.ID); err != nil {
			t.Fatal(err)
		}
		s := snap(t, h.st)
		if _, ok := s.Topics["gone"]; ok || s.Partitions["gone"] != nil {
			t.Fatalf("left: %+v %+v", s.Topics, s.Partitions)
		}
		tr2, ps2 := mustCreate(t, h.st, "gone", 1)
		if tr2.Version <= tr.Version || ps2[0].Version != tr2.Version || len(snap(t, h.st).Partitions["gone"]) != 1 {
			t.Fatal("re-created topic")
		}
	}},
	{"cas partitions: all or none on versions", func(t *testing.T, h harness) {
		_, ps := mustCreate(t, h.st, "cas", 2)
		a, b := ps[0], ps[1]
		a.ISR, a.PartitionEpoch = []int32{1, 2}, 1
		out, err := h.st.CASPartitions(ctxT(t), clustermeta.Fence{}, []clustermeta.PartitionState{a})
		if err != nil {
			t.Fatal(err)
		}
		if out[0].Version <= ps[0].Version {
			t.Fatalf("new version %d after %d", out[0].Version, ps[0].Version)
		}
		// a is stale now: the pair must fail as a whole.
		b.Leader, b.LeaderEpoch, b.PartitionEpoch = 3, 1, 1
		_, err = h.st.CASPartitions(ctxT(t), clustermeta.Fence{}, []clustermeta.PartitionState{b, a})
		wantErr(t, err, clustermeta.ErrConflict, "stale pair")
		s := snap(t, h.st)
		if got := s.Partitions["cas"][1]; got.Leader != ps[1].Leader || got.Version != ps[1].Version {
			t.Fatalf("half of a failed CAS written: %+v", got)
		}
		if got := s.Partitions["cas"][0]; len(got.ISR) != 2 || got.PartitionEpoch != 1 || got.Version != out[0].Version {
			t.Fatalf("partition 0 %+v", got)
		}
		if _, err := h.st.CASPartitions(ctxT(t), clustermeta.Fence{}, []clustermeta.PartitionState{out[0], out[0]}); err == nil {
			t.Fatal("one partition twice in a CAS")
		}
	}},
	{"cas partitions fenced by a session", func(t *testing.T, h harness) {
		_, ps := mustCreate(t, h.st, "fenced", 1)
		sess := mustRegister(t, h.st, 1)
		p := ps[0]
		p.ISR = []int32{1}
		out, err := h.st.CASPartitions(ctxT(t), sess.Fence(), []clustermeta.PartitionState{p})
		if err != nil {
			t.Fatal(err)
		}
		h.expire(1)
		waitClosed(t, sess.Done(), "session Done after expiry")
		_, err = h.st.CASPartitions(ctxT(t), sess.Fence(), out)
		wantErr(t, err, clustermeta.ErrFenced, "write on an expired session")
		// Re-registered: the old session's fence still fails (new epoch).
		again := mustRegister(t, h.st, 1)
		if again.Info.Epoch <= sess.Info.Epoch {
			t.Fatalf("epoch %d after %d", again.Info.Epoch, sess.Info.Epoch)
		}
		_, err = h.st.CASPartitions(ctxT(t), sess.Fence(), out)
		wantErr(t, err, clustermeta.ErrFenced, "write on the old registration")
		// Fenced and stale: fenced wins.
		_, err = h.st.CASPartitions(ctxT(t), sess.Fence(), ps)
		wantErr(t, err, clustermeta.ErrFenced, "fenced stale write")
		// Live fence, stale version: a conflict.
		_, err = h.st.CASPartitions(ctxT(t), again.Fence(), ps)
		wantErr(t, err, clustermeta.ErrConflict, "stale write on a live fence")
		if _, err := h.st.CASPartitions(ctxT(t), again.Fence(), out); err != nil {
			t.Fatal(err)
		}
	}},
	{"register: one live session per node id", func(t *testing.T, h harness) {
		s1 := mustRegister(t, h.st, 1)
		_, err := h.st.Register(ctxT(t), broker(1), ttl)
		wantErr(t, err, clustermeta.ErrConflict, "duplicate node id")
		s2 := mustRegister(t, h.st, 2)
		snapshot := snap(t, h.st)
		got := snapshot.Brokers[1]
		if len(snapshot.Brokers) != 2 || got.Epoch != s1.Info.Epoch || got.Rack != "r1" || got.Endpoints[0].Port != 9001 || s2.Info.Epoch <= s1.Info.Epoch {
			t.Fatalf("brokers %+v", snapshot.Brokers)
		}
		info := broker(1)
		info.ShuttingDown = true
		if err := s1.Update(ctxT(t), info); err != nil {
			t.Fatal(err)
		}
		got = snap(t, h.st).Brokers[1]
		if !got.ShuttingDown || got.Epoch != s1.Info.Epoch || !s1.Info.ShuttingDown {
			t.Fatalf("updated registration %+v, session %+v", got, s1.Info)
		}
		if err := s1.Close(ctxT(t)); err != nil {
			t.Fatal(err)
		}
		waitClosed(t, s1.Done(), "Done after Close")
		if _, ok := snap(t, h.st).Brokers[1]; ok {
			t.Fatal("closed registration still listed")
		}
		wantErr(t, s1.Update(ctxT(t), info), clustermeta.ErrFenced, "update after close")
		s3 := mustRegister(t, h.st, 1)
		if s3.Info.Epoch <= s2.Info.Epoch {
			t.Fatalf("epoch %d is not above %d", s3.Info.Epoch, s2.Info.Epoch)
		}
	}},
	{"expired registration leaves the snapshot", func(t *testing.T, h harness) {
		sess := mustRegister(t, h.st, 3)
		w := h.st.Watch(ctxT(t))
		waitFor(t, w, "broker 3 registered", func(s *clustermeta.Snapshot) bool { _, ok := s.Brokers[3]; return ok })
		h.expire(3)
		waitClosed(t, sess.Done(), "Done after expiry")
		waitFor(t, w, "broker 3 gone", func(s *clustermeta.Snapshot) bool { _, ok := s.Brokers[3]; return !ok })
		wantErr(t, sess.Update(ctxT(t), broker(3)), clustermeta.ErrFenced, "update after expiry")
	}},
	{"campaign: one controller, the next after it ends", func(t *testing.T, h harness) {
		l1, err := h.st.Campaign(ctxT(t), 1, ttl)
		if err != nil {
			t.Fatal(err)
		}
		if c := snap(t, h.st).Controller; c != 1 {
			t.Fatalf("controller %d", c)
		}
		short, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		_, err = h.st.Campaign(short, 2, ttl)
		cancel()
		if err == nil {
			t.Fatal("a second controller while the first leads")
		}
		won := make(chan *clustermeta.Leadership, 1)
		go func() {
			l, err := h.st.Campaign(ctxT(t), 3, ttl)
			if err != nil {
				t.Error(err)
			}
			won <- l
		}()
		_, ps := mustCreate(t, h.st, "ctl", 1)
		out, err := h.st.CASPartitions(ctxT(t), l1.Fence(), ps)
		if err != nil {
			t.Fatal(err)
		}
		h.expire(1)
		waitClosed(t, l1.Done(), "leadership Done after expiry")
		var l3 *clustermeta.Leadership
		select {
		case l3 = <-won:
		case <-time.After(patience):
			t.Fatal("no new controller")
		}
		if l3 == nil || l3.NodeID != 3 {
			t.Fatalf("new leadership %+v", l3)
		}
		if c := snap(t, h.st).Controller; c != 3 {
			t.Fatalf("controller %d, want 3", c)
		}
		_, err = h.st.CASPartitions(ctxT(t), l1.Fence(), out)
		wantErr(t, err, clustermeta.ErrFenced, "deposed controller's write")
		if out, err = h.st.CASPartitions(ctxT(t), l3.Fence(), out); err != nil {
			t.Fatal(err)
		}
		if err := l3.Resign(ctxT(t)); err != nil {
			t.Fatal(err)
		}
		waitClosed(t, l3.Done(), "Done after Resign")
		_, err = h.st.CASPartitions(ctxT(t), l3.Fence(), out)
		wantErr(t, err, clustermeta.ErrFenced, "resigned controller's write")
		if c := snap(t, h.st).Controller; c != clustermeta.NoLeader {
			t.Fatalf("controller %d after resign", c)
		}
	}},
	{"watch: current first, every change, immutable snapshots", func(t *testing.T, h harness) {
		tr, ps := mustCreate(t, h.st, "w1", 2)
		ctx, cancel := context.WithCancel(context.Background())
		w := h.st.Watch(ctx)
		first := waitFor(t, w, "first", func(*clustermeta.Snapshot) bool { return true })
		if first.Topics["w1"].Version != tr.Version {
			t.Fatalf("first snapshot %+v", first.Topics)
		}
		p := ps[1]
		p.Leader, p.LeaderEpoch, p.PartitionEpoch = 2, 1, 1
		out, err := h.st.CASPartitions(ctxT(t), clustermeta.Fence{}, []clustermeta.PartitionState{p})
		if err != nil {
			t.Fatal(err)
		}
		second := waitFor(t, w, "leader change", func(s *clustermeta.Snapshot) bool {
			q, _ := s.Partition("w1", 1)
			return q.Version == out[0].Version
		})
		if second.Revision < out[0].Version || second.Partitions["w1"][1].Leader != 2 {
			t.Fatalf("second %+v", second.Partitions["w1"])
		}
		if first.Partitions["w1"][1].Leader != ps[1].Leader || first.Partitions["w1"][1].Version != tr.Version {
			t.Fatalf("the first snapshot changed: %+v", first.Partitions["w1"][1])
		}
		mustCreate(t, h.st, "w2", 1)
		third := waitFor(t, w, "w2", func(s *clustermeta.Snapshot) bool { _, ok := s.Topics["w2"]; return ok })
		if _, ok := second.Topics["w2"]; ok || third.Partitions["w1"][1].Leader != 2 {
			t.Fatal("snapshots share a changed map")
		}
		cancel()
		deadline := time.After(patience)
		for {
			select {
			case _, open := <-w:
				if !open {
					return
				}
			case <-deadline:
				t.Fatal("watch not closed after its context ended")
			}
		}
	}},
	{"watch coalesces for a slow reader", func(t *testing.T, h harness) {
		w := h.st.Watch(ctxT(t))
		const n = 30
		var last int64
		for i := 0; i < n; i++ {
			tr, _ := mustCreate(t, h.st, fmt.Sprintf("c%02d", i), 1)
			last = tr.Version
		}
		got := waitFor(t, w, "the last write", func(s *clustermeta.Snapshot) bool { return s.Revision >= last })
		if len(got.Topics) != n {
			t.Fatalf("%d topics in the latest snapshot", len(got.Topics))
		}
		if cap(w) > 1 {
			t.Fatalf("watch buffers %d snapshots", cap(w))
		}
	}},
	{"concurrent read-modify-write: no update lost", func(t *testing.T, h harness) {
		mustCreate(t, h.st, "race", 1)
		const writers, rounds = 4, 8
		var won sync.Map
		racers(t, writers, rounds, func(g int) error {
			s, err := h.st.Snapshot(context.Background())
			if err != nil {
				return err
			}
			p, _ := s.Partition("race", 0)
			p.PartitionEpoch++
			if _, err = h.st.CASPartitions(context.Background(), clustermeta.Fence{}, []clustermeta.PartitionState{p}); err != nil {
				return err
			}
			if _, dup := won.LoadOrStore(p.PartitionEpoch, g); dup {
				t.Errorf("partition epoch %d written twice", p.PartitionEpoch)
			}
			return nil
		})
		p, _ := snap(t, h.st).Partition("race", 0)
		if p.PartitionEpoch != writers*rounds {
			t.Fatalf("partition epoch %d after %d successful increments", p.PartitionEpoch, writers*rounds)
		}
	}},
	{"producer ids never repeat across concurrent callers", func(t *testing.T, h harness) {
		type block struct{ first, n int64 }
		var mu sync.Mutex
		var blocks []block
		var wg sync.WaitGroup
		for g := 0; g < 4; g++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := 0; i < 10; i++ {
					n := int64(1 + (g*7+i)%5)
					first, err := h.st.AllocateProducerIDs(context.Background(), n)
					if err != nil {
						t.Error(err)
						return
					}
					mu.Lock()
					blocks = append(blocks, block{first, n})
					mu.Unlock()
				}
			}()
		}
		wg.Wait()
		sort.Slice(blocks, func(i, j int) bool { return blocks[i].first < blocks[j].first })
		var next int64
		for _, b := range blocks {
			if b.first != next {
				t.Fatalf("block at %d, expected %d (overlap or gap): %v", b.first, next, blocks)
			}
			next = b.first + b.n
		}
		if len(blocks) != 40 {
			t.Fatalf("%d blocks", len(blocks))
		}
		if _, err := h.st.AllocateProducerIDs(ctxT(t), 0); err == nil {
			t.Fatal("allocated 0 ids")
		}
	}},
}

func TestConformance(t *testing.T) {
	for name, open := range stores(t) {
		t.Run(name, func(t *testing.T) {
			for _, b := range behaviours {
				t.Run(b.name, func(t *testing.T) { b.run(t, open(t)) })
			}
		})
	}
}

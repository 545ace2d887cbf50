package controller

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/verbatim-kafka/verbatim/clustermeta"
	"github.com/verbatim-kafka/verbatim/clustermeta/memstore"
	"github.com/verbatim-kafka/verbatim/internal/testkit/logbuf"
)

// The runner's tests: deadlines are generous bounds on correctness, never
// what decides a pass.
const waitLimit = 20 * time.Second

// textLogger is a candidate's logger, its lines collected in l.
func textLogger(l *logbuf.Buffer) *slog.Logger { return slog.New(slog.NewTextHandler(l, nil)) }

// registerBrokers registers brokers 1..n and creates topic "t" with n
// partitions of replication factor n, led by 1..n in turn.
func registerBrokers(t *testing.T, st clustermeta.Store, n int) map[int32]*clustermeta.Session {
	t.Helper()
	ctx := context.Background()
	sessions := map[int32]*clustermeta.Session{}
	var infos []clustermeta.BrokerInfo
	for id := int32(1); id <= int32(n); id++ {
		s, err := st.Register(ctx, clustermeta.BrokerInfo{NodeID: id, Incarnation: fmt.Sprint("i", id)}, 5)
		if err != nil {
			t.Fatal(err)
		}
		sessions[id] = s
		infos = append(infos, s.Info)
	}
	assignment, err := Assign(infos, 0, int32(n), int16(n), 0)
	if err != nil {
		t.Fatal(err)
	}
	topic := clustermeta.TopicRecord{Name: "t", ID: [16]byte{7}, Partitions: int32(n)}
	var parts []clustermeta.PartitionState
	for p, reps := range assignment {
		parts = append(parts, clustermeta.PartitionState{Topic: "t", TopicID: topic.ID, Partition: int32(p),
			Replicas: reps, ISR: append([]int32(nil), reps...), Leader: reps[0]})
	}
	if _, _, err := st.CreateTopic(ctx, topic, parts); err != nil {
		t.Fatal(err)
	}
	return sessions
}

// waitSnap waits for a snapshot for which ok holds.
func waitSnap(t *testing.T, st clustermeta.Store, what string, ok func(*clustermeta.Snapshot) bool) *clustermeta.Snapshot {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	var last *clustermeta.Snapshot
	for s := range st.Watch(ctx) {
		last = s
		if ok(s) {
			return s
		}
	}
	t.Fatalf("waiting for %s: last snapshot %+v", what, last)
	return nil
}

// ledBy: every partition of t is led by leader with ISR isr.
func ledBy(leader int32, isr ...int32) func(*clustermeta.Snapshot) bool {
	return func(s *clustermeta.Snapshot) bool {
		for _, p := range s.Partitions["t"] {
			if p.Leader != leader || fmt.Sprint(p.ISR) != fmt.Sprint(isr) {
				return false
			}
		}
		return len(s.Partitions["t"]) > 0
	}
}

// waitLog waits until every want is in the log: a decision's line is
// written after its write, which watchers may see first.
func waitLog(t *testing.T, l *logbuf.Buffer, who string, want ...string) {
	t.Helper()
	deadline := time.Now().Add(waitLimit)
	for {
		out := l.String()
		missing := ""
		for _, w := range want {
			if !strings.Contains(out, w) {
				missing = w
			}
		}
		if missing == "" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s's log lacks %q:\n%s", who, missing, out)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// brokerOut: no partition of t is led by id, every ISR has two members.
func brokerOut(id int32) func(*clustermeta.Snapshot) bool {
	return func(s *clustermeta.Snapshot) bool {
		for _, p := range s.Partitions["t"] {
			if p.Leader == id || len(p.ISR) != 2 {
				return false
			}
		}
		return len(s.Partitions["t"]) > 0
	}
}

func controllerIs(id int32) func(*clustermeta.Snapshot) bool {
	return func(s *clustermeta.Snapshot) bool { return s.Controller == id }
}

// candidate runs Run for node id on st, logging into the returned
// buffer; the returned function stops it and checks that Run returned nil.
func candidate(t *testing.T, st clustermeta.Store, id int32) (*logbuf.Buffer, func()) {
	log := &logbuf.Buffer{}
	c := Config{Store: st, NodeID: id, Log: textLogger(log), RetryBackoff: time.Millisecond}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Run(ctx, c) }()
	return log, func() {
		t.Helper()
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("Run of %d: %v", id, err)
			}
		case <-time.After(waitLimit):
			t.Errorf("Run of %d did not stop", id)
		}
	}
}

// memCluster is a memstore with brokers 1..3 registered and topic t.
func memCluster(t *testing.T) (*memstore.Store, map[int32]*clustermeta.Session) {
	mem := memstore.New()
	t.Cleanup(func() { mem.Close() })
	return mem, registerBrokers(t, mem, 3)
}

func TestRunFailoverAndHandover(t *testing.T) {
	st, sessions := memCluster(t)
	logA, stopA := candidate(t, st, 1)
	defer stopA()
	waitSnap(t, st, "controller 1", controllerIs(1))
	logB, stopB := candidate(t, st, 2)
	defer stopB()

	// Broker 3 dies: its partition moves, the others' ISRs shrink.
	st.Expire(3)
	s := waitSnap(t, st, "broker 3 out", brokerOut(3))
	for _, p := range s.Partitions["t"] {
		wantLeader, wantLE := p.Replicas[0], int32(0)
		if p.Replicas[0] == 3 {
			wantLeader, wantLE = p.Replicas[1], 1
		}
		if p.Leader != wantLeader || p.LeaderEpoch != wantLE || p.PartitionEpoch != 1 {
			t.Fatalf("after broker 3's loss: %+v, want leader %d epoch %d", p, wantLeader, wantLE)
		}
	}
	waitLog(t, logA, "controller 1", `reason="leader fenced"`, `reason="ISR member fenced"`)

	// Broker and candidate 1 expire together: candidate 2 takes over and
	// moves broker 1's leaderships.
	st.Expire(1)
	waitSnap(t, st, "controller 2", controllerIs(2))
	waitSnap(t, st, "everything on 2", ledBy(2, 2))
	waitLog(t, logB, "controller 2", "controller: elected", `leader="1 -> 2"`)

	// The last ISR member's registration ends (the candidate lives on):
	// no leader, the ISR kept; it registers again and is elected.
	if err := sessions[2].Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	gone := waitSnap(t, st, "no leader", ledBy(clustermeta.NoLeader, 2))
	if _, err := st.Register(context.Background(), clustermeta.BrokerInfo{NodeID: 2, Incarnation: "again"}, 5); err != nil {
		t.Fatal(err)
	}
	back := waitSnap(t, st, "2 leads again", ledBy(2, 2))
	for i, p := range back.Partitions["t"] {
		if g := gone.Partitions["t"][i]; p.LeaderEpoch != g.LeaderEpoch+1 || p.PartitionEpoch != g.PartitionEpoch+1 {
			t.Fatalf("re-election %+v after %+v", p, g)
		}
	}
}

// A deposed controller's write, on a snapshot whose versions are still
// current, fails with ErrFenced; the next controller decides instead.
func TestStaleControllerFenced(t *testing.T) {
	st, _ := memCluster(t)
	staleTermFenced(t, st, st, func(ctx context.Context, l *clustermeta.Leadership) { st.Expire(11) },
		func(id int32) { st.Expire(id) })
}

// staleTermFenced runs candidate 11's term on a and candidate 12's Run on
// b, ends 11's term with end, checks that its write on a stale snapshot
// is fenced and that 12 takes over the decisions (after kill(3)).
func staleTermFenced(t *testing.T, a, b clustermeta.Store, end func(context.Context, *clustermeta.Leadership), kill func(int32)) {
	t.Helper()
	ctx := context.Background()
	lead, err := a.Campaign(ctx, 11, 5)
	if err != nil {
		t.Fatal(err)
	}
	var logA logbuf.Buffer
	termA := &term{c: Config{Store: a, NodeID: 11, Log: textLogger(&logA)}.withDefaults(), lead: lead}
	ended := make(chan error, 1)
	go func() { ended <- termA.run(ctx) }()
	waitSnap(t, a, "controller 11", controllerIs(11))
	logB, stopB := candidate(t, b, 12)
	defer stopB()

	before, err := a.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	end(ctx, lead)
	select {
	case err := <-ended:
		if !errors.Is(err, errTermEnded) {
			t.Fatalf("term ended with %v", err)
		}
	case <-time.After(waitLimit):
		t.Fatal("the term did not end with its leadership")
	}
	waitSnap(t, b, "controller 12", controllerIs(12))

	// Candidate 11 decides on what it last saw, with broker 3 gone: the
	// versions still match, the fence does not.
	stale := *before
	stale.Brokers = map[int32]clustermeta.BrokerInfo{1: before.Brokers[1], 2: before.Brokers[2]}
	ds := Decide(&stale, Policy{})
	if len(ds) == 0 {
		t.Fatal("no decision on the stale snapshot")
	}
	if err := termA.act(ctx, ds); !errors.Is(err, clustermeta.ErrFenced) {
		t.Fatalf("stale controller's write: %v, want ErrFenced", err)
	}
	now, err := b.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for i, p := range now.Partitions["t"] {
		if p.Version != before.Partitions["t"][i].Version {
			t.Fatalf("partition %d written by the deposed controller: %+v", i, p)
		}
	}

	kill(3)
	waitSnap(t, b, "12 decides broker 3's loss", brokerOut(3))
	waitLog(t, logB, "controller 12", "controller: decision")
	if out := logA.String(); strings.Contains(out, "controller: decision") {
		t.Fatalf("the deposed controller logged a decision:\n%s", out)
	}
}

// conflictingStore lets a leader's ISR write land between the
// controller's snapshot and its first compare-and-swap.
type conflictingStore struct {
	clustermeta.Store
	mu    sync.Mutex
	calls int
}

func (c *conflictingStore) CASPartitions(ctx context.Context, f clustermeta.Fence, states []clustermeta.PartitionState) ([]clustermeta.PartitionState, error) {
	c.mu.Lock()
	c.calls++
	first := c.calls == 1
	c.mu.Unlock()
	if first {
		// The first state's leader writes it first (an ISR change:
		// the partition epoch raised).
		s, err := c.Store.Snapshot(ctx)
		if err != nil {
			return nil, err
		}
		cur, _ := s.Partition(states[0].Topic, states[0].Partition)
		cur.PartitionEpoch++
		if _, err := c.Store.CASPartitions(ctx, clustermeta.Fence{}, []clustermeta.PartitionState{cur}); err != nil {
			return nil, err
		}
	}
	return c.Store.CASPartitions(ctx, f, states)
}

func TestRunRereadsOnConflict(t *testing.T) {
	mem, _ := memCluster(t)
	st := &conflictingStore{Store: mem}
	_, stop := candidate(t, st, 9)
	defer stop()
	waitSnap(t, mem, "controller 9", controllerIs(9))
	mem.Expire(1)
	s := waitSnap(t, mem, "broker 1 out", brokerOut(1))
	st.mu.Lock()
	calls := st.calls
	st.mu.Unlock()
	if calls < 2 {
		t.Fatalf("%d writes: the conflict was not retried", calls)
	}
	// The partition the leader wrote meanwhile carries both changes.
	var epochs []int32
	for _, p := range s.Partitions["t"] {
		epochs = append(epochs, p.PartitionEpoch)
	}
	if fmt.Sprint(epochs) != "[2 1 1]" {
		t.Fatalf("partition epochs %v, want [2 1 1] (the first partition changed twice)", epochs)
	}
}

// closingWatchStore's first watch closes at once, as a store's watch
// does when it gives up.
type closingWatchStore struct {
	clustermeta.Store
	mu      sync.Mutex
	watches int
}

func (c *closingWatchStore) Watch(ctx context.Context) <-chan *clustermeta.Snapshot {
	c.mu.Lock()
	c.watches++
	first := c.watches == 1
	c.mu.Unlock()
	if first {
		ch := make(chan *clustermeta.Snapshot)
		close(ch)
		return ch
	}
	return c.Store.Watch(ctx)
}

// A term that ends with its leadership still held gives it up, so the
// candidate's next campaign wins instead of waiting behind itself.
func TestRunCampaignsAgainAfterAFailedTerm(t *testing.T) {
	mem, _ := memCluster(t)
	st := &closingWatchStore{Store: mem}
	log, stop := candidate(t, st, 9)
	defer stop()
	waitLog(t, log, "controller 9", "controller: term ended")
	mem.Expire(1)
	waitSnap(t, mem, "broker 1 out", func(s *clustermeta.Snapshot) bool { return s.Controller == 9 && brokerOut(1)(s) })
}

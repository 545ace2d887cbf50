package replica

// The Manager with scripted leaders (no network): leader moves between
// fetchers and what Unfollow promises about answers in flight.

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/verbatim-kafka/verbatim/broker"
	"github.com/verbatim-kafka/verbatim/client"
)

// gateLeader answers every fetch with one batch at the fetch offset, but
// only once the test releases it; it reports each fetch it holds.
type gateLeader struct {
	t       *testing.T
	id      int32
	holding chan []client.SessionPartition
	release chan struct{}
	// ignoreCtx: a held fetch waits for the release only.
	ignoreCtx bool
}

func (g *gateLeader) Close() {}

func (g *gateLeader) EpochEnds(_ context.Context, qs []epochQuery) ([]epochAnswer, error) {
	var out []epochAnswer
	for _, q := range qs {
		out = append(out, epochAnswer{TopicPartition: q.TopicPartition, End: client.EpochEnd{LeaderEpoch: q.Epoch, EndOffset: 1 << 40}})
	}
	return out, nil
}

func (g *gateLeader) Offsets(context.Context, []offsetQuery) ([]offsetAnswer, error) {
	panic("not asked")
}

func (g *gateLeader) Fetch(ctx context.Context, want []client.SessionPartition) ([]client.SessionAnswer, error) {
	select {
	case g.holding <- want:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	done := ctx.Done()
	if g.ignoreCtx {
		done = nil
	}
	select {
	case <-g.release:
	case <-done:
		return nil, ctx.Err()
	}
	var out []client.SessionAnswer
	for _, w := range want {
		out = append(out, client.SessionAnswer{TopicPartition: w.TopicPartition, FetchResult: client.FetchResult{
			Records: batchAt(g.t, w.Offset, w.CurrentEpoch, 1), HighWatermark: w.Offset + 1, DivergingEpoch: noDiv,
		}})
	}
	return out, nil
}

// blockingReplica is a memReplica whose Append waits for the test.
type blockingReplica struct {
	*memReplica
	entered chan struct{}
	proceed chan struct{}
}

func (r *blockingReplica) Append(set []byte, hw, ls int64) error {
	r.entered <- struct{}{}
	<-r.proceed
	return r.memReplica.Append(set, hw, ls)
}

type scriptedHost struct {
	*memHost
	mu   sync.Mutex
	reps map[client.TopicPartition]Replica
}

func (h *scriptedHost) Replica(topic string, partition int32) (Replica, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if r, ok := h.reps[clientTP(topic, partition)]; ok {
		return r, nil
	}
	return h.memHost.Replica(topic, partition)
}

func scriptedManager(t *testing.T, host Host, leaders map[int32]*gateLeader) *Manager {
	m := NewManager(Config{Host: host, Log: quietLog()})
	m.fcfg.dialFunc = func(_ context.Context, id int32) (leader, error) { return leaders[id], nil }
	t.Cleanup(func() {
		for _, g := range leaders {
			close(g.release) // fetches still held end
		}
		m.Close()
	})
	return m
}

func newGate(t *testing.T, id int32) *gateLeader {
	return &gateLeader{t: t, id: id, holding: make(chan []client.SessionPartition, 16), release: make(chan struct{}, 16)}
}

func follow(tp client.TopicPartition, leader, epoch int32) broker.FollowedPartition {
	return broker.FollowedPartition{TopicPartition: broker.TopicPartition{Topic: tp.Topic, Partition: tp.Partition}, TopicID: [16]byte{1}, Leader: leader, LeaderEpoch: epoch}
}

// TestUnfollowDropsAnswersInFlight: an answer that arrives after Unfollow
// returned does not reach the replica (the fetcher goes on with the
// other partition it fetched in the same request).
func TestUnfollowDropsAnswersInFlight(t *testing.T) {
	tp, other := clientTP("t", 0), clientTP("t", 1)
	g := newGate(t, 1)
	g.ignoreCtx = true
	host := newMemHost(3)
	m := scriptedManager(t, host, map[int32]*gateLeader{1: g})
	m.Follow([]broker.FollowedPartition{follow(tp, 1, 4), follow(other, 1, 4)})
	if w := <-g.holding; len(w) != 2 { // a fetch of both is in flight
		t.Fatalf("fetching %d partitions", len(w))
	}
	m.Unfollow([]broker.TopicPartition{{Topic: "t", Partition: 0}})
	g.release <- struct{}{} // its answer arrives now
	<-g.holding             // the next fetch: the answer was applied
	if r := host.replica(other); r.LogEndOffset() != 1 {
		t.Fatalf("the partition still followed: log end %d", r.LogEndOffset())
	}
	if r := host.replica(tp); r.LogEndOffset() != 0 || r.counts().appends != 0 {
		t.Fatalf("the answer after Unfollow was appended: log end %d", r.LogEndOffset())
	}
}

// TestUnfollowWaitsForAppend: Unfollow returns only after an append under
// way has ended.
func TestUnfollowWaitsForAppend(t *testing.T) {
	tp := clientTP("t", 0)
	g := newGate(t, 1)
	br := &blockingReplica{memReplica: &memReplica{}, entered: make(chan struct{}), proceed: make(chan struct{})}
	host := &scriptedHost{memHost: newMemHost(3), reps: map[client.TopicPartition]Replica{tp: br}}
	m := scriptedManager(t, host, map[int32]*gateLeader{1: g})
	m.Follow([]broker.FollowedPartition{follow(tp, 1, 4)})
	<-g.holding
	g.release <- struct{}{}
	<-br.entered // the append is under way
	done := make(chan struct{})
	go func() {
		m.Unfollow([]broker.TopicPartition{{Topic: "t", Partition: 0}})
		close(done)
	}()
	select {
	case <-done:
		t.Fatal("Unfollow returned while an append was under way")
	case <-time.After(50 * time.Millisecond):
	}
	close(br.proceed)
	<-done
	if br.LogEndOffset() != 1 {
		t.Fatalf("log end %d after the append", br.LogEndOffset())
	}
}

// TestFollowMovesLeader: a new leader moves the partition to that
// leader's fetcher; the old one, left with nothing, stops; the new one
// fetches at the new epoch.
func TestFollowMovesLeader(t *testing.T) {
	tp, other := clientTP("t", 0), clientTP("t", 1)
	g1, g2 := newGate(t, 1), newGate(t, 2)
	m := scriptedManager(t, newMemHost(3), map[int32]*gateLeader{1: g1, 2: g2})
	m.Follow([]broker.FollowedPartition{follow(tp, 1, 4), follow(other, 1, 4)})
	<-g1.holding
	if m.Connections() != 1 {
		t.Fatalf("%d fetchers for one leader", m.Connections())
	}
	m.Follow([]broker.FollowedPartition{follow(tp, 2, 5)})
	if w := <-g2.holding; len(w) != 1 || w[0].TopicPartition != tp || w[0].CurrentEpoch != 5 {
		t.Fatalf("leader 2 asked for %+v", w)
	}
	if m.Connections() != 2 {
		t.Fatalf("%d fetchers for two leaders", m.Connections())
	}
	m.Follow([]broker.FollowedPartition{follow(other, 2, 5)})
	if m.Connections() != 1 {
		t.Fatalf("%d fetchers after leader 1 lost its last partition", m.Connections())
	}
	// The same assignment again changes nothing.
	m.Follow([]broker.FollowedPartition{follow(tp, 2, 5)})
	if p := m.fetchers[fetcherKey{2, 0}].get(tp); p == nil || p.epoch != 5 {
		t.Fatal("the partition is gone from leader 2's fetcher")
	}
}

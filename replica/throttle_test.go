package replica

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// throttledHost is a memHost that implements Throttler: the partitions in
// held are over the throttle; fetched counts what was reported.
type throttledHost struct {
	*memHost
	mu      sync.Mutex
	held    map[int32]bool
	fetched map[int32]int
	asked   atomic.Int32
}

func (h *throttledHost) FollowerThrottled(topic string, p int32) bool {
	h.asked.Add(1)
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.held[p]
}

func (h *throttledHost) FollowerFetched(topic string, p int32, n int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.fetched[p] += n
}

// TestManagerFollowerThrottle: a partition the host says is over the
// follower throttle is not fetched while the others are; once released it
// catches up, and every byte fetched was reported to the host.
func TestManagerFollowerThrottle(t *testing.T) {
	fx := newLeaderFixture(t, 2)
	fx.produce(20, "t")
	h := &throttledHost{memHost: fx.host, held: map[int32]bool{0: true}, fetched: map[int32]int{}}
	m := NewManager(Config{Host: h, MaxWaitMs: 20, Log: quietLog()})
	defer m.Close()
	m.Follow(fx.parts)
	fx.waitCopied(1)
	// Partition 1 is copied and partition 0 was looked at again and
	// again: still nothing of it fetched.
	for deadline := time.Now().Add(10 * time.Second); h.asked.Load() < 3; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the throttle was not consulted")
		}
	}
	if n := len(fx.replicaBytes(0)); n != 0 {
		t.Fatalf("a throttled partition fetched %d bytes", n)
	}
	h.mu.Lock()
	h.held[0] = false
	h.mu.Unlock()
	fx.waitCopied(0, 1)
	h.mu.Lock()
	defer h.mu.Unlock()
	for p := int32(0); p < 2; p++ {
		if got, want := h.fetched[p], len(fx.replicaBytes(p)); got != want {
			t.Errorf("partition %d: %d bytes reported, %d fetched", p, got, want)
		}
	}
}

package broker

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
)

func TestRateMeter(t *testing.T) {
	var m rateMeter
	t0 := time.Unix(1000, 0)
	if r := m.rate(t0); r != 0 {
		t.Fatalf("empty meter: %v", r)
	}
	// A first burst is spread over the window but one sample (10 s).
	m.record(t0, 1000)
	if r := m.rate(t0); r != 100 {
		t.Fatalf("first burst: %v bytes/s, want 100", r)
	}
	// 11 s later the burst has left the window.
	for i := 1; i <= 20; i++ {
		m.record(t0.Add(time.Duration(i)*time.Second), 50)
	}
	now := t0.Add(20 * time.Second)
	// 11 samples over the 10 s from the oldest one's start.
	if r := m.rate(now); r != 55 {
		t.Fatalf("steady 50 bytes/s measured as %v", r)
	}
}

// A leader sends a throttled follower outside the ISR nothing while the
// throttled bytes it sent are above leader.replication.throttled.rate; an
// in-sync follower is never throttled; deleting the rate lifts it. The
// follower side's check answers likewise.
func TestReplicationLeaderThrottle(t *testing.T) {
	c := newReplCluster(t, 4, nil)
	c.createTopic("thr", []int32{1, 2, 3}, nil)
	for range 5 {
		if pr := c.produce(1, "thr", 1, "0123456789012345678901234567890123456789"); pr.ErrorCode != 0 {
			t.Fatal(kerr.ErrorForCode(pr.ErrorCode))
		}
	}
	c.replicate(2)
	adm := c.nodes[1].b.admin()
	ctx := ctxT(t)
	rs, err := adm.AlterBrokerConfigs(ctx, []kadm.AlterConfig{{Op: kadm.SetConfig, Name: cfgLeaderThrottleRate, Value: sp("1")}, {Op: kadm.SetConfig, Name: cfgFollowerThrottleRate, Value: sp("1")}})
	if err != nil || rs[0].Err != nil {
		t.Fatalf("set: %v %+v", err, rs)
	}
	ars, err := adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Op: kadm.SetConfig, Name: "leader.replication.throttled.replicas", Value: sp("0:1,0:2,0:3")},
		{Op: kadm.SetConfig, Name: "follower.replication.throttled.replicas", Value: sp("0:4")}}, "thr")
	if err != nil || ars[0].Err != nil {
		t.Fatalf("topic throttles: %v %+v", err, ars)
	}
	if code := reassignCode(alterReassignment(t, c.nodes[1].b.addr, "thr", []int32{1, 2, 4})); code != 0 {
		t.Fatal(kerr.ErrorForCode(code))
	}
	c.sync(mustSnapshot(t, c).Revision)
	// The follower side: node 4, outside the ISR, throttled, nothing
	// fetched yet: not over its rate.
	s4 := c.nodes[4].srv()
	if s4.FollowerThrottled("thr", 0) {
		t.Fatal("follower throttled before fetching anything")
	}
	// The first fetch goes through (nothing sent yet) and puts the
	// leader over 1 byte/s; the next ones carry nothing.
	c.nodes[4].fetcher.fetchOnce()
	got := c.handle(4, "thr").log.LogEndOffset()
	if got == 0 {
		t.Fatal("the first throttled fetch carried nothing")
	}
	s4.FollowerFetched("thr", 0, 500)
	if !s4.FollowerThrottled("thr", 0) {
		t.Fatal("follower not throttled after 500 bytes at 1 byte/s")
	}
	// (The in-sync followers move the high watermark first: a follower
	// that reaches it joins the ISR, and is no longer throttled.)
	for range 3 {
		c.produce(1, "thr", 1, "more")
		for range 2 {
			c.nodes[2].fetcher.fetchOnce()
			c.nodes[3].fetcher.fetchOnce()
		}
		c.nodes[4].fetcher.fetchOnce()
	}
	if end := c.handle(4, "thr").log.LogEndOffset(); end != got {
		t.Fatalf("throttled follower went from %d to %d", got, end)
	}
	// In-sync followers are not throttled.
	if a, b := c.handle(2, "thr").log.LogEndOffset(), c.handle(1, "thr").log.LogEndOffset(); a != b {
		t.Fatalf("in-sync follower at %d, leader at %d", a, b)
	}
	// After the window the rate has fallen under a generous quota.
	rs, err = adm.AlterBrokerConfigs(ctx, []kadm.AlterConfig{{Op: kadm.SetConfig, Name: cfgLeaderThrottleRate, Value: sp("1000000")}})
	if err != nil || rs[0].Err != nil {
		t.Fatalf("raise: %v %+v", err, rs)
	}
	c.sync(mustSnapshot(t, c).Revision)
	c.advance(time.Minute)
	c.replicate(2)
	if a, b := c.handle(4, "thr").log.LogEndOffset(), c.handle(1, "thr").log.LogEndOffset(); a != b {
		t.Fatalf("after the throttle was raised: follower at %d, leader at %d", a, b)
	}
}

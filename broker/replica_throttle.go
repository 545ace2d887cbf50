package broker

// The replication throttles (owner: the reassignment work), as Kafka's
// ReplicationQuotaManager applies them: a leader sends no records of a
// throttled partition to a follower outside the ISR while the throttled
// bytes it sent are above leader.replication.throttled.rate, and a
// follower outside the ISR leaves a throttled partition out of its fetches
// while the throttled bytes it fetched are above
// follower.replication.throttled.rate. A partition is throttled on a
// broker when its topic's leader.replication.throttled.replicas (the
// leader side) or follower.replication.throttled.replicas (the follower
// side) lists "<partition>:<this broker>", or is "*". The rate is measured
// over 11 windows of one second (Kafka's replication.quota.window.num and
// replication.quota.window.size.seconds).

import (
	"strconv"
	"strings"
	"sync"
	"time"
)

// Kafka's replication quota window: 11 samples of one second.
const (
	quotaSamples = 11
	quotaWindow  = time.Second
)

// rateMeter is the bytes per second over the quota window.
type rateMeter struct {
	mu      sync.Mutex
	samples [quotaSamples]struct {
		start time.Time
		bytes int64
	}
	cur int
}

// record counts n bytes at now.
func (m *rateMeter) record(now time.Time, n int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	s := &m.samples[m.cur]
	if s.start.IsZero() || now.Sub(s.start) >= quotaWindow {
		m.cur = (m.cur + 1) % quotaSamples
		s = &m.samples[m.cur]
		s.start, s.bytes = now, 0
	}
	s.bytes += int64(n)
}

// rate is the bytes per second at now: the samples of the window summed
// over the time they cover, at least the window's full length but one
// sample (as Kafka's Rate counts it, so a first burst is not taken for a
// high rate).
func (m *rateMeter) rate(now time.Time) float64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	var sum int64
	oldest := now
	for _, s := range m.samples {
		if s.start.IsZero() || now.Sub(s.start) >= quotaSamples*quotaWindow {
			continue
		}
		sum += s.bytes
		if s.start.Before(oldest) {
			oldest = s.start
		}
	}
	elapsed := max(now.Sub(oldest), (quotaSamples-1)*quotaWindow)
	return float64(sum) / elapsed.Seconds()
}

// throttles is the server's replication throttle state (Server.throttle).
type throttles struct {
	leader, follower rateMeter
}

// exceeded reports whether the meter is above the named rate's quota.
func (s *Server) throttleExceeded(m *rateMeter, rateConfig string) bool {
	q := s.throttleRate(rateConfig)
	return q != unthrottled && m.rate(s.repl.clock()) > float64(q)
}

// throttledOn reports whether the topic config list (Kafka's
// "[partition]:[broker],..." or "*") names p's replica on this broker.
func (s *Server) throttledOn(p *Partition, listConfig string) bool {
	v := strings.TrimSpace(p.Topic.Config().Overrides()[listConfig])
	if v == "" {
		return false
	}
	if v == "*" {
		return true
	}
	want := strconv.Itoa(int(p.Index)) + ":" + strconv.Itoa(int(s.cfg.NodeID))
	for _, item := range strings.Split(v, ",") {
		if strings.TrimSpace(item) == want {
			return true
		}
	}
	return false
}

// leaderThrottled is the leader's check before answering a follower's
// fetch of p: true when no records are to be sent now.
func (s *Server) leaderThrottled(ls *leaderState, p *Partition, follower int32) bool {
	if s.throttleRate(cfgLeaderThrottleRate) == unthrottled || !s.throttledOn(p, "leader.replication.throttled.replicas") {
		return false
	}
	if inISR(ls.isr(), follower) {
		return false
	}
	return s.throttleExceeded(&s.throttle.leader, cfgLeaderThrottleRate)
}

// leaderSent counts the bytes a leader sent a follower of p.
func (s *Server) leaderSent(p *Partition, n int) {
	if n > 0 && s.throttleRate(cfgLeaderThrottleRate) != unthrottled && s.throttledOn(p, "leader.replication.throttled.replicas") {
		s.throttle.leader.record(s.repl.clock(), n)
	}
}

// followerPartition is p when this broker follows it outside the ISR and
// it is throttled on the follower side.
func (s *Server) followerThrottledPartition(topic string, partition int32) *Partition {
	if s.throttleRate(cfgFollowerThrottleRate) == unthrottled {
		return nil
	}
	t := s.cluster.topic(topic)
	if t == nil {
		return nil
	}
	p := t.Partition(partition)
	if p == nil || !s.throttledOn(p, "follower.replication.throttled.replicas") {
		return nil
	}
	if st := p.cstate.Load(); st != nil && inISR(st.ISR, s.cfg.NodeID) {
		return nil
	}
	return p
}

// FollowerThrottled is the follower throttle of the replica fetchers
// (replica.Throttler).
func (s *Server) FollowerThrottled(topic string, partition int32) bool {
	return s.followerThrottledPartition(topic, partition) != nil && s.throttleExceeded(&s.throttle.follower, cfgFollowerThrottleRate)
}

// FollowerFetched counts bytes the replica fetchers fetched
// (replica.Throttler).
func (s *Server) FollowerFetched(topic string, partition int32, n int) {
	if s.followerThrottledPartition(topic, partition) != nil {
		s.throttle.follower.record(s.repl.clock(), n)
	}
}

func inISR(isr []int32, id int32) bool {
	for _, x := range isr {
		if x == id {
			return true
		}
	}
	return false
}

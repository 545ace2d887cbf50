package link

// The fake source cluster's answers (simsource_test.go has its world): a
// Kafka leader's ListOffsets, OffsetForLeaderEpoch and fetch answers, the
// metadata any live broker gives, and the fetch sessions (long polls,
// lost answers, dead and slow brokers), as a sourceCluster.

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/verbatim-kafka/verbatim/client"
	"github.com/verbatim-kafka/verbatim/internal/testkit"
	"github.com/verbatim-kafka/verbatim/kbatch"
)

// simLongPoll is how long a fetch with nothing to answer waits for the
// world to change before it answers empty (the broker's max wait; wall
// time, which only paces the copies' polling).
const simLongPoll = 20 * time.Millisecond

// errRefused is a dead broker's connection (transient, like any I/O
// error).
var errRefused = errors.New("simulated: connection refused")

// errLost is an answer lost with its connection.
var errLost = errors.New("simulated: connection reset, the answer is lost")

// endForEpoch answers OffsetForLeaderEpoch from the epoch cache.
func (sp *simPart) endForEpoch(e int32) client.EpochEnd {
	return testkit.EndForEpoch(sp.cache, sp.next, e)
}

// leaderCheck is the error of a request for tp to broker b, nil when b
// leads it. REQUIRES: c.mu.
func (c *simCluster) leaderCheck(b int32, tp client.TopicPartition, what string) (*simPart, error) {
	sp := c.part(tp)
	if b < 0 || c.brokers[b].dead {
		return nil, errRefused
	}
	switch {
	case sp == nil:
		return nil, fmt.Errorf("%s %s on %s: %w", what, tp, simAddr(b), kerr.UnknownTopicOrPartition)
	case sp.leader != b:
		return nil, fmt.Errorf("%s %s on %s: %w", what, tp, simAddr(b), kerr.NotLeaderForPartition)
	}
	return sp, nil
}

// records serves whole batches ending at or after offset within maxBytes
// (the first one whole whatever its size, as Kafka does), and, when one
// does not fit, a cut prefix of it for some offsets (a partial trailing
// batch the copy drops).
func (sp *simPart) records(offset int64, maxBytes int32) (out []byte, end int64) {
	end = -1
	for _, b := range sp.log {
		if b.last < offset {
			continue
		}
		if len(out) > 0 && len(out)+len(b.raw) > int(maxBytes) {
			if room := int(maxBytes) - len(out); room > 0 && b.base%2 == 1 {
				out = append(out, b.raw[:min(room, len(b.raw)-1)]...)
			}
			return out, end
		}
		out = append(out, b.raw...)
		end = b.last + 1
	}
	return out, end
}

// answer is one partition's fetch answer from broker b; news reports
// whether it says anything a long poll would not wait out (records, an
// error, a divergence). commit charges the budget. REQUIRES: c.mu.
func (c *simCluster) answer(b int32, w client.SessionPartition, commit bool) (a client.SessionAnswer, news bool) {
	a.TopicPartition = w.TopicPartition
	a.DivergingEpoch = client.EpochEnd{LeaderEpoch: -1, EndOffset: -1}
	sp := c.part(w.TopicPartition)
	switch {
	case sp == nil:
		a.Err = kerr.UnknownTopicOrPartition
	case sp.leader != b:
		a.Err = kerr.NotLeaderForPartition
	case w.CurrentEpoch >= 0 && w.CurrentEpoch < sp.epoch:
		a.Err = kerr.FencedLeaderEpoch
	case w.CurrentEpoch > sp.epoch:
		a.Err = kerr.UnknownLeaderEpoch
	case w.Offset < 0 || w.Offset > sp.next:
		a.Err = kerr.OffsetOutOfRange
	}
	if a.Err != nil {
		return a, true
	}
	a.HighWatermark, a.LastStable, a.LogStart = sp.next, sp.next, 0
	if sp.open >= 0 {
		a.LastStable = sp.open
	}
	if w.LastFetchedEpoch >= 0 {
		ee := sp.endForEpoch(w.LastFetchedEpoch)
		if ee.LeaderEpoch < 0 {
			a.Err = kerr.OffsetOutOfRange
			return a, true
		}
		if ee.LeaderEpoch < w.LastFetchedEpoch || ee.EndOffset < w.Offset {
			a.DivergingEpoch = ee
			return a, true
		}
	}
	if sp.budget == 0 {
		return a, false
	}
	recs, end := sp.records(w.Offset, w.MaxBytes)
	if len(recs) == 0 {
		return a, false
	}
	a.Records = recs
	if commit && end > 0 {
		if sp.budget > 0 {
			sp.budget--
		}
		sp.delivered = end
	}
	return a, true
}

// openTxn is where pid's transaction open at the end of log starts (-1:
// none).
func openTxn(log []simBatch, pid int64) int64 {
	open := int64(-1)
	for _, b := range log {
		h, err := kbatch.ParseHeader(b.raw)
		if err != nil || h.ProducerID != pid || !h.IsTransactional() {
			continue
		}
		switch {
		case h.IsControl():
			open = -1
		case open < 0:
			open = b.base
		}
	}
	return open
}

// simSource is one link runner's view of the fake cluster.
type simSource struct{ c *simCluster }

func (s simSource) Metadata(ctx context.Context, topics []string) (map[string]*client.TopicMeta, error) {
	c := s.c
	c.mu.Lock()
	defer c.mu.Unlock()
	alive := false
	for _, b := range c.brokers {
		alive = alive || !b.dead
	}
	if topics == nil {
		topics = sortedKeys(c.topics)
	}
	if !alive {
		return nil, errRefused
	}
	out := map[string]*client.TopicMeta{}
	for _, name := range topics {
		st := c.topics[name]
		if st == nil {
			out[name] = &client.TopicMeta{Name: name, Err: fmt.Errorf("%w: %s on %s", client.ErrTopicMissing, name, simAddr(0))}
			continue
		}
		tm := &client.TopicMeta{Name: name, ID: st.id}
		for _, sp := range st.parts {
			tm.Partitions = append(tm.Partitions, client.PartitionMeta{Leader: sp.leader, LeaderEpoch: sp.epoch})
		}
		out[name] = tm
	}
	return out, nil
}

func (s simSource) ClusterID() string { return "sim-source" }
func (s simSource) Seed() string      { return simAddr(0) }
func (s simSource) Close()            {}

func (s simSource) Client() *client.Cluster { return nil }

func (s simSource) BrokerAddr(id int32) (string, bool) {
	if id < 0 || int(id) >= len(s.c.brokers) {
		return "", false
	}
	return simAddr(id), true
}

func (s simSource) ListOffset(ctx context.Context, addr string, tp client.TopicPartition, ts int64) (client.OffsetAnswer, error) {
	c := s.c
	c.mu.Lock()
	defer c.mu.Unlock()
	sp, err := c.leaderCheck(c.brokerAt(addr), tp, "ListOffsets")
	switch {
	case err != nil:
		return client.OffsetAnswer{}, err
	case ts == client.Earliest:
		return client.OffsetAnswer{Offset: 0, Timestamp: -1, LeaderEpoch: sp.cache[0].Epoch}, nil
	case ts == client.Latest:
		return client.OffsetAnswer{Offset: sp.next, Timestamp: -1, LeaderEpoch: sp.epoch}, nil
	}
	return client.OffsetAnswer{}, fmt.Errorf("ListOffsets %s at %d: not simulated", tp, ts)
}

func (s simSource) OffsetForLeaderEpoch(ctx context.Context, addr string, tp client.TopicPartition, epoch int32) (client.EpochEnd, error) {
	c := s.c
	c.mu.Lock()
	defer c.mu.Unlock()
	sp, err := c.leaderCheck(c.brokerAt(addr), tp, "OffsetForLeaderEpoch")
	if err != nil {
		return client.EpochEnd{}, err
	}
	return sp.endForEpoch(epoch), nil
}

func (s simSource) DialSession(ctx context.Context, addr string) (fetchSession, error) {
	c := s.c
	c.mu.Lock()
	defer c.mu.Unlock()
	b := c.brokerAt(addr)
	if b < 0 || c.brokers[b].dead {
		c.seen["dial_refused"]++
		return nil, errRefused
	}
	if c.faults.Intn(100) < c.pct {
		c.seen["dial_failed"]++
		return nil, errRefused
	}
	return &simSession{c: c, b: b}, nil
}

func (s simSource) TopicConfigs(ctx context.Context, topic string) (map[string]string, error) {
	// No retention: the batches' timestamps are old, and a stopped
	// topic's retention would delete them at once.
	return map[string]string{"cleanup.policy": "delete", "retention.ms": "-1", "retention.bytes": "-1"}, nil
}

func (s simSource) TopicsConfigs(ctx context.Context, topics []string) (map[string]map[string]string, map[string]error, error) {
	out := map[string]map[string]string{}
	for _, t := range topics {
		out[t], _ = s.TopicConfigs(ctx, t)
	}
	return out, map[string]error{}, nil
}

func (s simSource) ListGroups(ctx context.Context, re *regexp.Regexp) ([]string, error) {
	return nil, nil
}

func (s simSource) FetchGroupOffsets(ctx context.Context, group string, topics []string) ([]client.GroupOffset, error) {
	return nil, nil
}

// simSession is a fetch session with one broker of the fake cluster.
type simSession struct {
	c      *simCluster
	b      int32
	mu     sync.Mutex
	broken bool
}

func (s *simSession) Broken() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.broken
}

func (s *simSession) Close() {
	s.mu.Lock()
	s.broken = true
	s.mu.Unlock()
}

// Fetch answers every partition wanted once one of them has news, or
// after simLongPoll with nothing; a lost answer breaks the session.
func (s *simSession) Fetch(ctx context.Context, want []client.SessionPartition, o client.SessionOptions) (client.SessionResponse, error) {
	c := s.c
	waited := false
	for {
		if s.Broken() {
			return client.SessionResponse{}, errors.New("simulated: fetch on a closed session")
		}
		c.mu.Lock()
		if c.brokers[s.b].dead {
			c.mu.Unlock()
			s.Close()
			return client.SessionResponse{}, errRefused
		}
		news := false
		for _, w := range want {
			if _, n := c.answer(s.b, w, false); n {
				news = true
			}
		}
		if (news || waited) && c.faults.Intn(100) < c.pct {
			c.seen["lost_answer"]++
			c.mu.Unlock()
			s.Close()
			return client.SessionResponse{}, errLost
		}
		var resp client.SessionResponse
		if news || waited {
			for _, w := range want {
				a, _ := c.answer(s.b, w, true)
				if sp := c.part(w.TopicPartition); sp != nil && a.Err == nil && a.DivergingEpoch.LeaderEpoch < 0 {
					sp.answered++
				}
				resp.Answers = append(resp.Answers, a)
			}
		}
		slow, ch := c.brokers[s.b].slow, c.changed
		c.mu.Unlock()
		if news || waited {
			if slow {
				c.count("slow_answer")
				resp.Throttle = 5 * time.Millisecond // the broker's quota throttle
				time.Sleep(2 * time.Millisecond)
			}
			return resp, nil
		}
		select {
		case <-ch:
		case <-time.After(simLongPoll):
			waited = true
		case <-ctx.Done():
			return client.SessionResponse{}, ctx.Err()
		}
	}
}

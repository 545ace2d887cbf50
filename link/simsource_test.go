package link

// The link simulation's fake source cluster (a sourceCluster and its
// fetch sessions): brokers that are alive, dead (every connection
// refused; metadata, answered by the live ones, still names them leaders)
// or slow (late answers with a quota throttle), topics whose partitions
// have a leader and a leader epoch that move, a Kafka leader's epoch cache
// and DivergingEpoch, unclean truncations, and per partition a budget of
// answers with records for the current step, so that the destination
// crashes in the middle of a copy at a point the seed fixes.
//
// The world changes only when the test changes it (between the link's
// steps, never while an answer is computed); what the copies are answered
// is a function of the world and of their requests alone. Lost answers and
// refused dials are drawn at random under the lock: how many happen depends
// on the goroutines' schedule, but they only delay the copies, never
// change what they end up with.

import (
	"context"
	"errors"
	"fmt"
	"math/rand"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/verbatim-kafka/verbatim/client"
	"github.com/verbatim-kafka/verbatim/kbatch"
)

// simLongPoll is how long a fetch with nothing to answer waits for the
// world to change before it answers empty (the broker's max wait; wall
// time, which only paces the copies' polling).
const simLongPoll = 20 * time.Millisecond

type simBatch struct {
	base, last int64
	epoch      int32
	raw        []byte
}

type simEpoch struct {
	epoch int32
	start int64
}

type simPart struct {
	leader int32
	epoch  int32
	log    []simBatch // the leader's log: the current lineage
	cache  []simEpoch // its leader epoch cache
	next   int64      // log end (= high watermark: every replica in sync)
	// budget is how many answers with records the partition still gets
	// in this step (-1: unbounded); delivered the end of the last whole
	// batch it was answered (-1: none this step).
	budget    int
	delivered int64
	// refused counts the requests for it a dead leader refused since
	// the last change of the brokers' health; answered the answers
	// without an error since the last faultsOff.
	refused, answered int
	// idem and txn are the partition's idempotent and transactional
	// producers; open is where the transactional one's open transaction
	// starts (-1: none), the last stable offset.
	idem, txn simProducer
	open      int64
}

type simProducer struct {
	pid   int64
	epoch int16
	seq   int32
}

type simTopic struct {
	id    [16]byte
	parts []*simPart
}

type simBroker struct{ dead, slow bool }

// simCluster is the fake source cluster.
type simCluster struct {
	mu      sync.Mutex
	rng     *rand.Rand // the world's events (drawn by the test only)
	faults  *rand.Rand // lost answers and refused dials
	pct     int        // their chance in percent
	brokers []simBroker
	topics  map[string]*simTopic
	// changed is closed (and replaced) whenever the world changes:
	// waiting fetches answer again.
	changed chan struct{}
	seen    map[string]int
}

func newSimCluster(seed int64, brokers int, topics map[string]int) *simCluster {
	c := &simCluster{rng: rand.New(rand.NewSource(seed)), faults: rand.New(rand.NewSource(seed + 1)), brokers: make([]simBroker, brokers),
		topics: map[string]*simTopic{}, changed: make(chan struct{}), seen: map[string]int{}}
	for _, name := range sortedKeys(topics) {
		st := &simTopic{}
		c.rng.Read(st.id[:])
		for p := 0; p < topics[name]; p++ {
			pid := int64(1000 + 10*len(c.topics) + 2*p)
			st.parts = append(st.parts, &simPart{leader: int32(p % brokers), cache: []simEpoch{{0, 0}}, budget: -1, delivered: -1,
				idem: simProducer{pid: pid}, txn: simProducer{pid: pid + 1}, open: -1})
		}
		c.topics[name] = st
	}
	return c
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func simAddr(id int32) string { return fmt.Sprintf("b%d:9092", id) }

// brokerAt is the id of the broker at addr (-1: none).
func (c *simCluster) brokerAt(addr string) int32 {
	id, err := strconv.Atoi(strings.TrimSuffix(strings.TrimPrefix(addr, "b"), ":9092"))
	if err != nil || id < 0 || id >= len(c.brokers) {
		return -1
	}
	return int32(id)
}

// errRefused is a dead broker's connection (transient, like any I/O
// error).
var errRefused = errors.New("simulated: connection refused")

// errLost is an answer lost with its connection.
var errLost = errors.New("simulated: connection reset, the answer is lost")

// wake lets waiting fetches see a change. REQUIRES: c.mu.
func (c *simCluster) wakeLocked() {
	close(c.changed)
	c.changed = make(chan struct{})
}

// part is tp, nil when absent. REQUIRES: c.mu.
func (c *simCluster) part(tp client.TopicPartition) *simPart {
	st := c.topics[tp.Topic]
	if st == nil || int(tp.Partition) >= len(st.parts) {
		return nil
	}
	return st.parts[tp.Partition]
}

// The world's events, driven by the test.

// appendBatches appends n batches to tp's leader at its epoch.
func (c *simCluster) appendBatches(tp client.TopicPartition, n int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.appendLocked(c.part(tp), n)
	c.wakeLocked()
}

// appendLocked appends n batches: plain, idempotent or transactional
// data in any codec, and now and then the end (commit or abort) of the
// open transaction.
func (c *simCluster) appendLocked(sp *simPart, n int) {
	for i := 0; i < n; i++ {
		if c.rng.Intn(10) == 0 {
			sp.next += int64(1 + c.rng.Intn(3)) // a gap (compaction-like), kept by the copy
		}
		kind := c.rng.Intn(10)
		if kind == 9 && sp.open >= 0 {
			c.endTxnLocked(sp, c.rng.Intn(2) == 0)
			continue
		}
		var recs []kbatch.Record
		for j := 0; j < 1+c.rng.Intn(4); j++ {
			v := make([]byte, 10+c.rng.Intn(200))
			c.rng.Read(v)
			recs = append(recs, kbatch.Record{OffsetDelta: int32(j), Key: []byte{byte('k'), byte(j)}, Value: v})
		}
		b := kbatch.NewBatch(1_700_000_000_000+sp.next, recs...)
		b.Attributes = int16([]kbatch.Codec{kbatch.CodecNone, kbatch.CodecGzip, kbatch.CodecSnappy, kbatch.CodecLZ4, kbatch.CodecZstd}[c.rng.Intn(5)])
		var pr *simProducer
		switch {
		case kind >= 6:
			pr = &sp.txn
			b.Attributes |= kbatch.TransactionalBit
			if sp.open < 0 {
				sp.open = sp.next
			}
		case kind >= 4:
			pr = &sp.idem
		}
		if pr != nil {
			b.ProducerID, b.ProducerEpoch, b.BaseSequence = pr.pid, pr.epoch, pr.seq
			pr.seq += int32(len(recs))
		}
		c.addLocked(sp, b)
	}
}

// endTxnLocked writes the marker that ends the open transaction.
func (c *simCluster) endTxnLocked(sp *simPart, commit bool) {
	typ := int16(0) // ABORT
	if commit {
		typ = 1
	}
	b := kbatch.NewBatch(1_700_000_000_000+sp.next, kbatch.Record{Key: kbatch.ControlKey(typ), Value: kbatch.EndTxnMarkerValue(0)})
	b.Attributes = kbatch.ControlBit | kbatch.TransactionalBit
	b.ProducerID, b.ProducerEpoch = sp.txn.pid, sp.txn.epoch
	c.addLocked(sp, b)
	sp.open = -1
}

// addLocked appends b at the log end in the leader's epoch.
func (c *simCluster) addLocked(sp *simPart, b kbatch.Batch) {
	b.BaseOffset, b.LeaderEpoch = sp.next, sp.epoch
	raw, err := kbatch.Encode(b)
	if err != nil {
		panic(err)
	}
	sb := simBatch{base: sp.next, last: sp.next + int64(kbatch.LastOffsetDelta(raw)), epoch: sp.epoch, raw: raw}
	sp.log = append(sp.log, sb)
	sp.next = sb.last + 1
}

// moveLeader elects another broker (a live one when there is one) leader
// of tp with a new epoch: a clean election.
func (c *simCluster) moveLeader(tp client.TopicPartition) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.electLocked(c.part(tp))
	c.seen["leader_move"]++
	c.wakeLocked()
}

func (c *simCluster) electLocked(sp *simPart) {
	n := int32(len(c.brokers))
	next := (sp.leader + 1 + int32(c.rng.Intn(int(n-1)))) % n
	for i := int32(0); i < n && c.brokers[next].dead; i++ {
		next = (next + 1) % n
	}
	if next == sp.leader {
		next = (next + 1) % n
	}
	sp.leader = next
	sp.epoch++
	sp.cache = append(sp.cache, simEpoch{sp.epoch, sp.next})
}

// truncate is an unclean election: the new leader's log ends at the base
// of one of the old leader's batches, a new epoch starts there and takes
// 1-3 new batches. It returns the lineage replaced.
func (c *simCluster) truncate(tp client.TopicPartition) (old []simBatch, cut int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	sp := c.part(tp)
	old = append([]simBatch(nil), sp.log...)
	if len(sp.log) == 0 {
		return old, -1
	}
	k := c.rng.Intn(len(sp.log))
	cut = sp.log[k].base
	sp.log = sp.log[:k]
	for len(sp.cache) > 1 && sp.cache[len(sp.cache)-1].start >= cut {
		sp.cache = sp.cache[:len(sp.cache)-1]
	}
	sp.next = cut
	c.electLocked(sp)
	// The new leader's producers: each fenced to a new epoch (their
	// sequences lost with the tail), a transaction the cut left open
	// aborted by its coordinator.
	sp.open = openTxn(sp.log, sp.txn.pid)
	sp.idem.epoch, sp.idem.seq = sp.idem.epoch+1, 0
	sp.txn.epoch, sp.txn.seq = sp.txn.epoch+1, 0
	if sp.open >= 0 {
		c.endTxnLocked(sp, false)
	}
	c.appendLocked(sp, 1+c.rng.Intn(3))
	c.seen["truncation"]++
	c.wakeLocked()
	return old, cut
}

// setBroker makes broker id dead or alive, slow or not.
func (c *simCluster) setBroker(id int32, dead, slow bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.brokers[id] = simBroker{dead: dead, slow: slow}
	c.resetRefusedLocked()
	c.wakeLocked()
}

func (c *simCluster) allDead() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, b := range c.brokers {
		if !b.dead {
			return false
		}
	}
	return true
}

func (c *simCluster) dead(id int32) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.brokers[id].dead
}

func (c *simCluster) resetRefusedLocked() {
	for _, st := range c.topics {
		for _, sp := range st.parts {
			sp.refused = 0
		}
	}
}

// newStep sets the answers' budgets of a step (by partition, -1
// unbounded) and the chance of faults.
func (c *simCluster) newStep(budgets map[client.TopicPartition]int, pct int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, name := range sortedKeys(c.topics) {
		for p, sp := range c.topics[name].parts {
			b, ok := budgets[client.TopicPartition{Topic: name, Partition: int32(p)}]
			if !ok {
				b = -1
			}
			sp.budget, sp.delivered = b, -1
		}
	}
	c.pct = pct
	c.resetRefusedLocked()
	c.wakeLocked()
}

// faultsOff stops the faults and starts counting the answers each
// partition is given.
func (c *simCluster) faultsOff() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.pct = 0
	for _, st := range c.topics {
		for _, sp := range st.parts {
			sp.answered = 0
		}
	}
}

// simView is what the test reads of a source partition.
type simView struct {
	log []simBatch
	hw  int64
	// alive: its leader is; refused counts the requests the dead one
	// refused.
	alive     bool
	refused   int
	answered  int
	budget    int
	delivered int64
}

func (c *simCluster) view(tp client.TopicPartition) simView {
	c.mu.Lock()
	defer c.mu.Unlock()
	sp := c.part(tp)
	return simView{log: append([]simBatch(nil), sp.log...), hw: sp.next, alive: !c.brokers[sp.leader].dead, refused: sp.refused, answered: sp.answered, budget: sp.budget, delivered: sp.delivered}
}

func (c *simCluster) count(what string) {
	c.mu.Lock()
	c.seen[what]++
	c.mu.Unlock()
}

// The Kafka leader's answers.

// endForEpoch answers OffsetForLeaderEpoch from the epoch cache.
func (sp *simPart) endForEpoch(e int32) client.EpochEnd {
	for i := len(sp.cache) - 1; i >= 0; i-- {
		if sp.cache[i].epoch <= e {
			if i+1 < len(sp.cache) {
				return client.EpochEnd{LeaderEpoch: sp.cache[i].epoch, EndOffset: sp.cache[i+1].start}
			}
			return client.EpochEnd{LeaderEpoch: sp.cache[i].epoch, EndOffset: sp.next}
		}
	}
	return client.EpochEnd{LeaderEpoch: -1, EndOffset: -1}
}

// leaderCheck is the error of a request for tp to broker b, nil when b
// leads it. REQUIRES: c.mu.
func (c *simCluster) leaderCheck(b int32, tp client.TopicPartition, what string) (*simPart, error) {
	sp := c.part(tp)
	if b < 0 || c.brokers[b].dead {
		if sp != nil {
			sp.refused++
		}
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
		for _, name := range topics {
			if st := c.topics[name]; st != nil {
				for _, sp := range st.parts {
					sp.refused++
				}
			}
		}
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
		return client.OffsetAnswer{Offset: 0, Timestamp: -1, LeaderEpoch: sp.cache[0].epoch}, nil
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
			for _, w := range want {
				if sp := c.part(w.TopicPartition); sp != nil {
					sp.refused++
				}
			}
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

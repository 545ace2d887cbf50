package link

// The link simulation's fake source cluster, its world (its answers, as a
// sourceCluster and fetch sessions, are simanswer_test.go's): brokers that
// are alive, dead (every connection refused; metadata, answered by the
// live ones, still names them leaders) or slow (late answers with a quota
// throttle), topics whose partitions have a leader and a leader epoch that
// move, a Kafka leader's epoch cache, unclean truncations, idempotent and
// transactional producers writing in every codec, and per partition a
// budget of answers with records for the current step, so that the
// destination crashes in the middle of a copy at a point the seed fixes.
//
// The world changes only when the test changes it (between the link's
// steps, never while an answer is computed); what the copies are answered
// is a function of the world and of their requests alone. Lost answers and
// refused dials are drawn at random under the lock: how many happen depends
// on the goroutines' schedule, but they only delay the copies, never
// change what they end up with.

import (
	"fmt"
	"math/rand"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/verbatim-kafka/verbatim/client"
	"github.com/verbatim-kafka/verbatim/internal/testkit"
	"github.com/verbatim-kafka/verbatim/kbatch"
)

type simBatch struct {
	base, last int64
	epoch      int32
	raw        []byte
}

type simPart struct {
	leader int32
	epoch  int32
	log    []simBatch           // the leader's log: the current lineage
	cache  []testkit.EpochStart // its leader epoch cache
	next   int64                // log end (= high watermark: every replica in sync)
	// budget is how many answers with records the partition still gets
	// in this step (-1: unbounded); delivered the end of the last whole
	// batch it was answered (-1: none this step).
	budget    int
	delivered int64
	// answered counts the answers without an error since the last
	// faultsOff.
	answered int
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
	// logf logs the world's events (the test's t.Logf: shown when it
	// fails).
	logf func(format string, args ...any)
}

func newSimCluster(seed int64, brokers int, topics map[string]int) *simCluster {
	c := &simCluster{rng: rand.New(rand.NewSource(seed)), faults: rand.New(rand.NewSource(seed + 1)), brokers: make([]simBroker, brokers),
		topics: map[string]*simTopic{}, changed: make(chan struct{}), seen: map[string]int{}, logf: func(string, ...any) {}}
	for _, name := range sortedKeys(topics) {
		st := &simTopic{}
		c.rng.Read(st.id[:])
		for p := 0; p < topics[name]; p++ {
			pid := int64(1000 + 10*len(c.topics) + 2*p)
			st.parts = append(st.parts, &simPart{leader: int32(p % brokers), cache: []testkit.EpochStart{{Epoch: 0, Start: 0}}, budget: -1, delivered: -1,
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
	sp := c.part(tp)
	c.electLocked(sp)
	c.logf("%s: leader %d, epoch %d, at %d", tp, sp.leader, sp.epoch, sp.next)
	c.seen["leader_move"]++
	c.wakeLocked()
}

func (c *simCluster) electLocked(sp *simPart) {
	n := int32(len(c.brokers))
	// Another live broker when there is one, else the live leader again
	// (a new epoch), else another, dead, one.
	var live []int32
	for i := int32(1); i < n; i++ {
		if b := (sp.leader + i) % n; !c.brokers[b].dead {
			live = append(live, b)
		}
	}
	switch {
	case len(live) > 0:
		sp.leader = live[c.rng.Intn(len(live))]
	case c.brokers[sp.leader].dead:
		sp.leader = (sp.leader + 1 + int32(c.rng.Intn(int(n-1)))) % n
	}
	sp.epoch++
	sp.cache = append(sp.cache, testkit.EpochStart{Epoch: sp.epoch, Start: sp.next})
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
	for len(sp.cache) > 1 && sp.cache[len(sp.cache)-1].Start >= cut {
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
	c.logf("%s: truncated to %d uncleanly, leader %d, epoch %d, log end %d", tp, cut, sp.leader, sp.epoch, sp.next)
	c.seen["truncation"]++
	c.wakeLocked()
	return old, cut
}

// setBroker makes broker id dead or alive, slow or not.
func (c *simCluster) setBroker(id int32, dead, slow bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.brokers[id] = simBroker{dead: dead, slow: slow}
	c.logf("broker %d: dead %v, slow %v", id, dead, slow)
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
	log       []simBatch
	hw        int64
	alive     bool // its leader is
	answered  int
	budget    int
	delivered int64
}

func (c *simCluster) view(tp client.TopicPartition) simView {
	c.mu.Lock()
	defer c.mu.Unlock()
	sp := c.part(tp)
	return simView{log: append([]simBatch(nil), sp.log...), hw: sp.next, alive: !c.brokers[sp.leader].dead, answered: sp.answered, budget: sp.budget, delivered: sp.delivered}
}

func (c *simCluster) count(what string) {
	c.mu.Lock()
	c.seen[what]++
	c.mu.Unlock()
}

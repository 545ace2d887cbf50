package replica

// The fetcher's state machine driven step by step, with seeds, by a
// simulated leader: leader changes with diverging logs (two other replicas
// that lead in turn and copy from each other), truncation below our end,
// DeleteRecords moving the leader's log start (inside batches too), lost
// and stale answers, partition errors, cut trailing batches, a follower
// told of a new epoch late. After every step the follower's replica must
// be a prefix of the leader's log once it fetches at the leader's epoch,
// and at the end equal to it.

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/verbatim-kafka/verbatim/client"
	"github.com/verbatim-kafka/verbatim/internal/testkit"
	"github.com/verbatim-kafka/verbatim/kbatch"
)

// simPart is one partition of the simulated cluster: two replicas besides
// ours, one of them leading at epoch.
type simPart struct {
	tp        client.TopicPartition
	logs      [2]*memLog
	leader    int
	epoch     int32
	electedAt int64 // the leader's log end when elected (its epoch's start)
	hw        int64
	told      int32 // the epoch our follower was last given
	// onFetch: the assignment truncates on fetch (DivergingEpoch), so
	// the replica is known to be a prefix only once it appended after
	// the assignment (appendsAtTell: its appends before).
	onFetch       bool
	appendsAtTell int
}

func (sp *simPart) lead() *memLog { return sp.logs[sp.leader] }

func (sp *simPart) leaderEntries() []epochEntry {
	return sp.lead().entries(&epochEntry{sp.epoch, sp.electedAt})
}

// fence is the leader's CurrentLeaderEpoch check.
func (sp *simPart) fence(current int32) error {
	switch {
	case current < sp.epoch:
		return kerr.FencedLeaderEpoch
	case current > sp.epoch:
		return kerr.UnknownLeaderEpoch
	}
	return nil
}

// sim is the simulated leader (one leader interface for all partitions:
// the state machine does not care which broker leads).
type sim struct {
	t     *testing.T
	rng   *rand.Rand
	parts map[client.TopicPartition]*simPart
	order []client.TopicPartition
	f     *fetcher
	host  *memHost
	clk   *testkit.SleepClock
	// faults on: answers are lost, cut, erroneous or stale.
	faults bool
	// hook runs inside a request, after its answer was computed (a
	// leader change while the request is in flight).
	hook func()

	stats map[string]int
}

var errLost = errors.New("connection reset (answer lost)")

func (s *sim) chance(p float64) bool { return s.faults && s.rng.Float64() < p }

// inFlight runs a stale-answer hook when one is set.
func (s *sim) inFlight() {
	if h := s.hook; h != nil {
		s.hook = nil
		h()
	}
}

func (s *sim) Close() {}

// lost reports (and counts) a request whose answer is lost.
func (s *sim) lost(p float64) bool {
	if s.chance(p) {
		s.stats["lost"]++
		return true
	}
	return false
}

func (s *sim) EpochEnds(_ context.Context, qs []epochQuery) ([]epochAnswer, error) {
	if s.lost(0.1) {
		return nil, errLost
	}
	var out []epochAnswer
	for _, q := range qs {
		sp := s.parts[q.TopicPartition]
		a := epochAnswer{TopicPartition: q.TopicPartition, End: client.EpochEnd{LeaderEpoch: -1, EndOffset: -1}}
		if err := sp.fence(q.Current); err != nil {
			a.Err = err
		} else {
			a.End.LeaderEpoch, a.End.EndOffset = endOffsetFor(sp.leaderEntries(), q.Epoch, sp.lead().end)
			if a.End.EndOffset >= 0 && a.End.EndOffset < s.host.replica(q.TopicPartition).LogEndOffset() {
				s.stats["truncated below our end"]++
			}
		}
		out = append(out, a)
	}
	s.rng.Shuffle(len(out), func(i, j int) { out[i], out[j] = out[j], out[i] })
	s.inFlight()
	return out, nil
}

func (s *sim) Offsets(_ context.Context, qs []offsetQuery) ([]offsetAnswer, error) {
	if s.lost(0.1) {
		return nil, errLost
	}
	var out []offsetAnswer
	for _, q := range qs {
		sp := s.parts[q.TopicPartition]
		a := offsetAnswer{TopicPartition: q.TopicPartition, Err: sp.fence(q.Current)}
		if a.Err == nil {
			s.stats["offsets"]++
		}
		a.Start, a.End = sp.lead().start, sp.lead().end
		out = append(out, a)
	}
	s.inFlight()
	return out, nil
}

// Fetch answers as a Kafka leader does (Partition.fetchRecords): fencing,
// the diverging-epoch check, the range check, then batches from the one
// holding the offset up to the partition's max bytes (the first whole).
func (s *sim) Fetch(_ context.Context, want []client.SessionPartition) ([]client.SessionAnswer, error) {
	if s.lost(0.08) {
		return nil, errLost
	}
	var out []client.SessionAnswer
	for _, w := range want {
		sp := s.parts[w.TopicPartition]
		l := sp.lead()
		a := client.SessionAnswer{TopicPartition: w.TopicPartition}
		a.HighWatermark, a.LogStart, a.DivergingEpoch = sp.hw, l.start, client.EpochEnd{LeaderEpoch: -1, EndOffset: -1}
		out = append(out, a)
		r := &out[len(out)-1].FetchResult
		if r.Err = sp.fence(w.CurrentEpoch); r.Err != nil {
			s.stats["fenced"]++
			continue
		}
		if s.chance(0.04) {
			r.Err = []error{kerr.NotLeaderForPartition, kerr.UnknownLeaderEpoch, kerr.UnknownTopicOrPartition}[s.rng.IntN(3)]
			s.stats["partition error"]++
			continue
		}
		if w.LastFetchedEpoch >= 0 {
			e, end := endOffsetFor(sp.leaderEntries(), w.LastFetchedEpoch, l.end)
			if e < 0 || end < 0 || w.Offset < l.start {
				r.Err = kerr.OffsetOutOfRange
				continue
			}
			if e < w.LastFetchedEpoch || end < w.Offset {
				r.DivergingEpoch = client.EpochEnd{LeaderEpoch: e, EndOffset: end}
				s.stats["diverging"]++
				continue
			}
		}
		if w.Offset < l.start || w.Offset > l.end {
			r.Err = kerr.OffsetOutOfRange
			s.stats["out of range"]++
			continue
		}
		var recs []byte
		for _, b := range l.batches {
			if batchEnd(b) <= w.Offset {
				continue
			}
			if len(recs) > 0 && len(recs)+len(b) > int(w.MaxBytes) {
				if s.chance(0.3) {
					recs = append(recs, b[:s.rng.IntN(len(b))]...) // cut, as Kafka's leader sends it
					s.stats["cut"]++
				}
				break
			}
			recs = append(recs, b...)
		}
		r.Records = recs
	}
	s.inFlight()
	return out, nil
}

// produce appends a batch of 1-4 records at the leader's epoch.
func (s *sim) produce(sp *simPart) {
	l := sp.lead()
	n := 1 + s.rng.IntN(4)
	recs := make([]kbatch.Record, n)
	for i := range recs {
		recs[i] = kbatch.Record{OffsetDelta: int32(i), Value: fmt.Appendf(nil, "%s e%d o%d %d", sp.tp, sp.epoch, l.end+int64(i), s.rng.Uint32())}
	}
	b := kbatch.NewBatch(1000, recs...)
	b.BaseOffset, b.LeaderEpoch = l.end, sp.epoch
	raw, err := kbatch.Encode(b)
	if err != nil {
		s.t.Fatal(err)
	}
	l.batches = append(l.batches, raw)
	l.end = batchEnd(raw)
	s.stats["produced"]++
}

// replicate makes the other replica copy from the leader as a correct
// follower would: truncate to the longest common prefix, then copy some.
func (s *sim) replicate(sp *simPart) {
	o, l := sp.logs[1-sp.leader], sp.lead()
	common := 0
	for common < len(o.batches) && common < len(l.batches) && string(o.batches[common]) == string(l.batches[common]) {
		common++
	}
	if o.start != l.start {
		*o = memLog{start: l.start, end: l.start}
		common = 0
	}
	o.batches = o.batches[:common:common]
	n := common + s.rng.IntN(len(l.batches)-common+1)
	o.batches = append(o.batches, l.batches[common:n]...)
	o.end = o.start
	if n > 0 {
		o.end = batchEnd(o.batches[n-1])
	}
	sp.hw = max(sp.hw, min(o.end, l.end))
}

// elect makes the other replica (or, rarely, the same) leader at the
// next epoch; told now or later.
func (s *sim) elect(sp *simPart) {
	if s.rng.IntN(5) > 0 {
		sp.leader = 1 - sp.leader
	}
	sp.epoch++
	sp.electedAt = sp.lead().end
	sp.hw = min(sp.hw, sp.lead().end)
	s.stats["elections"]++
	if s.rng.IntN(3) > 0 {
		s.tell(sp)
	}
}

// tell gives the follower the partition's current epoch (Follow).
// Half the assignments skip OffsetForLeaderEpoch and fetch at once with
// LastFetchedEpoch, as Kafka's truncation on fetch (KIP-595's
// DivergingEpoch) does: the leader's DivergingEpoch answers then drive
// the truncation through the same code.
func (s *sim) tell(sp *simPart) {
	sp.told = sp.epoch
	p := newPartition(sp.tp, [16]byte{1}, sp.epoch)
	sp.onFetch = s.rng.IntN(2) == 0
	if sp.onFetch {
		p.phase = fetching
	}
	sp.appendsAtTell = s.host.replica(sp.tp).appends
	s.f.add(p)
}

// deleteRecords moves the leader's log start up to the high watermark,
// at a batch boundary or inside a batch.
func (s *sim) deleteRecords(sp *simPart) {
	l := sp.lead()
	if sp.hw <= l.start {
		return
	}
	to := l.start + 1 + s.rng.Int64N(sp.hw-l.start)
	l.advanceStart(to)
	s.stats["delete records"]++
}

// check asserts the invariants after a step.
func (s *sim) check(step int, what string) {
	s.t.Helper()
	for _, tp := range s.order {
		sp, rep := s.parts[tp], s.host.replica(tp)
		if rep.bad != "" {
			s.t.Fatalf("step %d (%s): %s: %s", step, what, tp, rep.bad)
		}
		p := s.f.get(tp)
		p.mu.Lock()
		following := p.phase == fetching && p.epoch == sp.epoch && p.rep != nil
		p.mu.Unlock()
		if sp.onFetch && rep.appends == sp.appendsAtTell {
			following = false // not yet checked against this leader
		}
		if !following {
			continue
		}
		got := rep.snapshot()
		if why := got.isPrefixOf(sp.lead()); why != "" {
			s.t.Fatalf("step %d (%s): %s fetching at epoch %d is not a prefix of the leader's log: %s\nreplica %s\nleader  %s", step, what, tp, sp.epoch, why, describe(&got), describe(sp.lead()))
		}
	}
}

func describe(l *memLog) string {
	s := fmt.Sprintf("[%d,%d)", l.start, l.end)
	for _, b := range l.batches {
		s += fmt.Sprintf(" %d-%d@e%d", kbatch.BaseOffset(b), batchEnd(b)-1, kbatch.LeaderEpoch(b))
	}
	return s
}

func newSim(t *testing.T, seed uint64, nparts int) *sim {
	s := &sim{
		t: t, rng: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)),
		parts: map[client.TopicPartition]*simPart{},
		host:  newMemHost(3), clk: testkit.NewSleepClock(time.Unix(1e9, 0)),
		stats: map[string]int{},
	}
	cfg := &fetcherConfig{host: s.host, clock: s.clk, partMax: 300, backoff: time.Second, log: quietLog()}
	s.f = newFetcher(cfg, 1, 0)
	for i := 0; i < nparts; i++ {
		tp := client.TopicPartition{Topic: "t", Partition: int32(i)}
		sp := &simPart{tp: tp, logs: [2]*memLog{{}, {}}, epoch: 1}
		s.parts[tp] = sp
		s.order = append(s.order, tp)
		if s.rng.IntN(3) == 0 {
			s.host.missing[tp] = 1 + s.rng.IntN(2)
		}
		s.tell(sp)
	}
	return s
}

// run plays steps random steps, then heals (faults off, every epoch
// told) and runs rounds until the follower holds the leader's log.
func (s *sim) run(steps int) {
	ctx := context.Background()
	round := func(step int) {
		r, err := s.f.round(ctx, s)
		switch {
		case err != nil:
			_ = s.clk.Sleep(ctx, 100*time.Millisecond) // the fetcher's reconnect backoff
		case r.idle && !r.until.IsZero():
			_ = s.clk.Sleep(ctx, r.until.Sub(s.clk.Now()))
		}
		s.check(step, "round")
	}
	s.faults = true
	for step := 0; step < steps; step++ {
		sp := s.parts[s.order[s.rng.IntN(len(s.order))]]
		switch x := s.rng.IntN(100); {
		case x < 30:
			s.produce(sp)
		case x < 42:
			s.replicate(sp)
		case x < 46:
			s.elect(sp)
		case x < 48:
			s.deleteRecords(sp)
		case x < 52:
			if sp.told != sp.epoch {
				s.tell(sp)
			}
		case x < 55:
			// A leader change while a request is in flight: its answer
			// is for the partition as it was and must be dropped.
			rep := s.host.replica(sp.tp)
			var at memLog
			s.hook = func() {
				s.elect(sp)
				s.tell(sp)
				at = rep.snapshot()
			}
			round(step)
			if s.hook == nil {
				if now := rep.snapshot(); now.end != at.end || now.start != at.start || len(now.batches) != len(at.batches) {
					s.t.Fatalf("step %d: an answer for a replaced assignment of %s changed the replica: %s -> %s", step, sp.tp, describe(&at), describe(&now))
				}
				s.stats["stale answers"]++
			}
			s.hook = nil
		case x < 60:
			_ = s.clk.Sleep(ctx, time.Duration(s.rng.IntN(1500))*time.Millisecond)
		default:
			round(step)
		}
		s.check(step, "step")
	}
	// Heal: every epoch told, no faults; the follower converges.
	s.faults = false
	for _, tp := range s.order {
		if sp := s.parts[tp]; sp.told != sp.epoch {
			s.tell(sp)
		}
	}
	for i := 0; ; i++ {
		if i > 200 {
			for _, tp := range s.order {
				sp, rep := s.parts[tp], s.host.replica(tp)
				got := rep.snapshot()
				p := s.f.get(tp)
				s.t.Logf("%s: phase %s epoch %d (leader %d) delay %v hw %d/%d\nreplica %s\nleader  %s", tp, p.phase, p.epoch, sp.epoch, p.delay.Sub(s.clk.Now()), rep.hw, sp.hw, describe(&got), describe(sp.lead()))
			}
			s.t.Fatalf("no convergence after %d rounds", i)
		}
		round(steps + i)
		if s.converged() {
			return
		}
		_ = s.clk.Sleep(ctx, 100*time.Millisecond) // delayed partitions come back

	}
}

func (s *sim) converged() bool {
	for _, tp := range s.order {
		sp, rep := s.parts[tp], s.host.replica(tp)
		got, l := rep.snapshot(), sp.lead()
		if got.end != l.end || got.isPrefixOf(l) != "" || rep.hw != min(sp.hw, l.end) {
			return false
		}
		p := s.f.get(tp)
		if p.phase != fetching {
			return false
		}
	}
	return true
}

// TestFetcherSim runs the simulation over many seeds.
func TestFetcherSim(t *testing.T) {
	seeds := 200
	if testing.Short() {
		seeds = 60
	}
	total := map[string]int{}
	for seed := uint64(1); seed <= uint64(seeds); seed++ {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			s := newSim(t, seed, 1+int(seed%3))
			s.run(400)
			for k, v := range s.stats {
				total[k] += v
			}
		})
	}
	t.Logf("over %d seeds: %v", seeds, total)
	// The simulation must have exercised what it claims to.
	for _, k := range []string{"lost", "cut", "diverging", "fenced", "out of range", "offsets", "truncated below our end", "elections", "delete records", "stale answers", "partition error"} {
		if total[k] == 0 {
			t.Errorf("no %s in any seed", k)
		}
	}
}

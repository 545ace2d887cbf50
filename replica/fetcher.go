package replica

// One fetcher: one connection to a leader broker, the partitions hashed to
// it, and the rounds that move them on (Kafka's ReplicaFetcherThread). A
// round asks OffsetForLeaderEpoch for the partitions that truncate and
// ListOffsets for those out of range, or else one multi-partition Fetch
// for the rest; the answers go through partition.go.

import (
	"cmp"
	"context"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/verbatim-kafka/verbatim/client"
)

// requestTimeout bounds one request beyond its long poll
// (replica.socket.timeout.ms, Kafka's 30 s).
const requestTimeout = 30 * time.Second

// fetcherConfig is what a fetcher needs, the Manager's Config resolved.
// throttleRecheck is how soon a partition left out by the follower
// throttle is looked at again.
const throttleRecheck = 100 * time.Millisecond

type fetcherConfig struct {
	host     Host
	clock    client.Clock
	opts     client.SessionOptions // without the replica identity
	partMax  int32
	backoff  time.Duration // replica.fetch.backoff.ms
	log      *slog.Logger
	dialFunc func(ctx context.Context, leaderID int32) (leader, error)
}

type fetcher struct {
	cfg      *fetcherConfig
	leaderID int32
	log      *slog.Logger

	mu    sync.Mutex
	parts map[client.TopicPartition]*partition
	wake  chan struct{}

	cancel context.CancelFunc
	done   chan struct{}
}

func newFetcher(cfg *fetcherConfig, leaderID int32, index int) *fetcher {
	return &fetcher{
		cfg: cfg, leaderID: leaderID,
		log:   cfg.log.With("leader", leaderID, "fetcher", index),
		parts: map[client.TopicPartition]*partition{},
		wake:  make(chan struct{}, 1),
		done:  make(chan struct{}),
	}
}

// start runs the fetcher until stop.
func (f *fetcher) start() {
	ctx, cancel := context.WithCancel(context.Background())
	f.cancel = cancel
	go func() {
		defer close(f.done)
		f.run(ctx)
	}()
}

// stop ends the fetcher's loop (wait on done for it to have ended).
func (f *fetcher) stop() { f.cancel() }

// add follows p, replacing an earlier assignment of its partition.
func (f *fetcher) add(p *partition) {
	f.mu.Lock()
	old := f.parts[p.tp]
	f.parts[p.tp] = p
	f.mu.Unlock()
	if old != nil {
		old.leave()
	}
	f.poke()
}

// get is the partition followed as tp, nil when none.
func (f *fetcher) get(tp client.TopicPartition) *partition {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.parts[tp]
}

// remove stops following tp; it returns once no answer will change its
// replica any more.
func (f *fetcher) remove(tp client.TopicPartition) {
	f.mu.Lock()
	p := f.parts[tp]
	delete(f.parts, tp)
	f.mu.Unlock()
	if p != nil {
		p.leave()
	}
}

// size is how many partitions the fetcher follows.
func (f *fetcher) size() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.parts)
}

// poke wakes an idle fetcher.
func (f *fetcher) poke() {
	select {
	case f.wake <- struct{}{}:
	default:
	}
}

func (f *fetcher) snapshot() []*partition {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := slices.Collect(maps.Values(f.parts))
	// In partition order: rounds are reproducible (and tests with them).
	slices.SortFunc(out, func(a, b *partition) int {
		return cmp.Or(cmp.Compare(a.tp.Topic, b.tp.Topic), cmp.Compare(a.tp.Partition, b.tp.Partition))
	})
	return out
}

// run dials the leader and runs rounds until ctx ends; a broken
// connection or a failed request closes the connection and backs off
// (client.Backoff: 100 ms doubling to 2 s, reset by a round that worked).
func (f *fetcher) run(ctx context.Context) {
	bo := client.NewBackoff(f.cfg.clock, 0)
	var ld leader
	unreachable := false
	defer func() {
		if ld != nil {
			ld.Close()
		}
	}()
	for ctx.Err() == nil {
		if ld == nil {
			var err error
			if ld, err = f.cfg.dialFunc(ctx, f.leaderID); err != nil {
				ld = nil
				if ctx.Err() == nil {
					// Once per outage (a dead leader is dialled until
					// its partitions move away).
					lvl := slog.LevelWarn
					if unreachable {
						lvl = slog.LevelDebug
					}
					f.log.Log(ctx, lvl, "replica fetcher: cannot reach the leader", "err", err)
				}
				unreachable = true
				_ = bo.Wait(ctx)
				continue
			}
			unreachable = false
		}
		r, err := f.round(ctx, ld)
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			f.log.Info("replica fetcher: request failed, reconnecting", "err", err)
			ld.Close()
			ld = nil
			_ = bo.Wait(ctx)
			continue
		}
		bo.Reset()
		if r.idle {
			f.idle(ctx, r.until)
		}
	}
}

// roundResult says whether a round found nothing to ask, and until when
// (zero: until woken).
type roundResult struct {
	idle  bool
	until time.Time
}

// round is one step of the state machine: the requests its partitions'
// phases call for, and their answers applied.
func (f *fetcher) round(ctx context.Context, ld leader) (roundResult, error) {
	now := f.cfg.clock.Now()
	var (
		res      roundResult
		pl       plan
		delayed  bool
		earliest time.Time
	)
	pl.asked = map[client.TopicPartition]*partition{}
	thr, _ := f.cfg.host.(Throttler)
	for _, p := range f.snapshot() {
		p.mu.Lock()
		if !p.gone && p.phase != fenced {
			if now.Before(p.delay) || !f.resolve(p, now) {
				if !delayed || p.delay.Before(earliest) {
					earliest = p.delay
				}
				delayed = true
			} else if thr != nil && fetches(p) && thr.FollowerThrottled(p.tp.Topic, p.tp.Partition) {
				// Over the follower throttle: asked again shortly.
				if at := now.Add(throttleRecheck); !delayed || at.Before(earliest) {
					earliest = at
				}
				delayed = true
			} else {
				pl.add(p, f.cfg.partMax)
			}
		}
		p.mu.Unlock()
	}
	rctx, cancel := context.WithTimeout(ctx, requestTimeout+time.Duration(f.cfg.opts.MaxWaitMs)*time.Millisecond)
	defer cancel()
	if len(pl.epochQs) > 0 || len(pl.offsetQs) > 0 {
		// Truncation first (its partitions fetch in the next round).
		if len(pl.epochQs) > 0 {
			as, err := ld.EpochEnds(rctx, pl.epochQs)
			if err != nil {
				return res, err
			}
			for _, a := range as {
				f.apply(pl.asked[a.TopicPartition], func(p *partition) (outcome, error) { return p.onEpochEnd(a) })
			}
		}
		if len(pl.offsetQs) > 0 {
			as, err := ld.Offsets(rctx, pl.offsetQs)
			if err != nil {
				return res, err
			}
			for _, a := range as {
				f.apply(pl.asked[a.TopicPartition], func(p *partition) (outcome, error) { return p.onOffsets(a) })
			}
		}
		return res, nil
	}
	if len(pl.want) == 0 {
		return roundResult{idle: true, until: earliest}, nil
	}
	as, err := ld.Fetch(rctx, pl.want)
	if err != nil {
		return res, err
	}
	byTP := make(map[client.TopicPartition]int, len(pl.want))
	for i, w := range pl.want {
		byTP[w.TopicPartition] = i
	}
	for _, a := range as {
		i, named := byTP[a.TopicPartition]
		if !named {
			continue
		}
		delete(byTP, a.TopicPartition) // the first answer only
		if thr != nil && len(a.Records) > 0 {
			thr.FollowerFetched(a.Topic, a.Partition, len(a.Records))
		}
		off := pl.want[i].Offset
		f.apply(pl.fetchable[i], func(p *partition) (outcome, error) { return p.onFetch(a.FetchResult, off) })
	}
	return res, nil
}

// plan is what one round asks.
type plan struct {
	epochQs   []epochQuery
	offsetQs  []offsetQuery
	asked     map[client.TopicPartition]*partition // of the two above
	want      []client.SessionPartition
	fetchable []*partition // want's, in its order
}

// fetches reports whether p (held, with its replica) asks for records
// this round (plan.add).
func fetches(p *partition) bool {
	return p.phase == fetching || p.phase == truncating && p.rep.LatestEpoch() < 0
}

// add puts p (held, with its replica) in the plan by its phase.
func (pl *plan) add(p *partition, partMax int32) {
	if p.phase == truncating && p.rep.LatestEpoch() < 0 {
		// Nothing stored carries an epoch: nothing to truncate.
		p.phase = fetching
	}
	switch p.phase {
	case fetching:
		pl.fetchable = append(pl.fetchable, p)
		pl.want = append(pl.want, client.SessionPartition{
			TopicPartition: p.tp, TopicID: p.id,
			Offset: p.rep.LogEndOffset(), MaxBytes: partMax,
			CurrentEpoch: p.epoch, LastFetchedEpoch: p.rep.LatestEpoch(),
			// Our log start: the leader counts it for DeleteRecords'
			// low watermark (Kafka's follower sends it from Fetch v5).
			LogStart: p.rep.LogStartOffset(),
		})
	case truncating:
		pl.epochQs = append(pl.epochQs, epochQuery{TopicPartition: p.tp, Current: p.epoch, Epoch: p.rep.LatestEpoch()})
		pl.asked[p.tp] = p
	case outOfRange:
		pl.offsetQs = append(pl.offsetQs, offsetQuery{TopicPartition: p.tp, Current: p.epoch})
		pl.asked[p.tp] = p
	}
}

// resolve gets p's replica from the host when it has none yet; false (and
// a delay) when the host has none to give.
func (f *fetcher) resolve(p *partition, now time.Time) bool {
	if p.rep != nil {
		return true
	}
	r, err := f.cfg.host.Replica(p.tp.Topic, p.tp.Partition)
	if err != nil {
		f.log.Debug("replica fetcher: no local replica yet", "topic", p.tp.Topic, "partition", p.tp.Partition, "err", err)
		p.backOff(now, f.cfg.backoff)
		return false
	}
	p.rep = r
	return true
}

// apply runs fn on p (nil: an answer for a partition not asked) unless it
// left or changed phase meanwhile; backOff delays p.
func (f *fetcher) apply(p *partition, fn func(*partition) (outcome, error)) {
	if p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.gone {
		return
	}
	before := p.phase
	o, err := fn(p)
	if o == goOn && err == nil {
		p.wait = 0 // progress: the next error waits the shortest again
	}
	switch {
	case o == backOff:
		p.backOff(f.cfg.clock.Now(), f.cfg.backoff)
		f.log.Debug("replica fetcher: partition backs off", "topic", p.tp.Topic, "partition", p.tp.Partition, "phase", p.phase, "err", err)
	case p.phase == fenced:
		f.log.Info("replica fetcher: fenced by a newer leader epoch; waiting for it", "topic", p.tp.Topic, "partition", p.tp.Partition, "leader_epoch", p.epoch, "err", err)
	case p.phase != before:
		f.log.Debug("replica fetcher: partition moves on", "topic", p.tp.Topic, "partition", p.tp.Partition, "from", before, "to", p.phase)
	}
}

// idle waits until until (zero: no deadline), a poke or ctx's end.
func (f *fetcher) idle(ctx context.Context, until time.Time) {
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		select {
		case <-f.wake:
			cancel()
		case <-stop:
		}
	}()
	d := time.Hour
	if !until.IsZero() {
		d = until.Sub(f.cfg.clock.Now())
	}
	if d > 0 {
		_ = f.cfg.clock.Sleep(wctx, d)
	}
}

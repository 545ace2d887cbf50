package link

// One fetch session of a link with one source broker: the partitions
// whose copies wait in Fetch are the next request's; answers go to the
// waiting copies; a failed connection fails them all and is re-dialled
// with back-off.

import (
	"cmp"
	"context"
	"errors"
	"slices"
	"sync"
	"time"

	"github.com/verbatim-kafka/verbatim/client"
)

// errSuperseded answers a fetch that another of the same partition
// replaced.
var errSuperseded = errors.New("fetch superseded by a newer one of the same partition")

// ask is one copy's waiting Fetch.
type ask struct {
	p       client.SessionPartition
	maxWait int32
	seq     uint64  // arrival order: the order of a full request
	led     *ledger // charged with what is delivered (nil: not counted)
	done    chan askResult
}

type askResult struct {
	res client.FetchResult
	err error
}

// sessionLoop runs one fetch session (one connection) with a broker.
type sessionLoop struct {
	f    *sourceFetchers
	addr string

	mu   sync.Mutex
	asks map[client.TopicPartition]*ask
	seq  uint64
	wake chan struct{}

	// Owned by run.
	sess       fetchSession
	backoff    *client.Backoff
	answered   map[client.TopicPartition]struct{} // answered by the last response
	quotaUntil time.Time                          // the broker's quota throttle
}

func newSessionLoop(f *sourceFetchers, addr string) *sessionLoop {
	return &sessionLoop{f: f, addr: addr, asks: map[client.TopicPartition]*ask{}, wake: make(chan struct{}, 1),
		backoff: client.NewBackoff(f.cfg.Clock, time.Hour), answered: map[client.TopicPartition]struct{}{}}
}

// put queues a copy's fetch for the next request.
func (l *sessionLoop) put(k *ask) {
	l.mu.Lock()
	l.seq++
	k.seq = l.seq
	if old := l.asks[k.p.TopicPartition]; old != nil {
		// One fetcher per partition: an older ask was abandoned.
		old.done <- askResult{err: errSuperseded}
	}
	l.asks[k.p.TopicPartition] = k
	l.mu.Unlock()
	select {
	case l.wake <- struct{}{}:
	default:
	}
}

// drop withdraws an abandoned ask; the next request forgets the
// partition.
func (l *sessionLoop) drop(k *ask) {
	l.mu.Lock()
	if l.asks[k.p.TopicPartition] == k {
		delete(l.asks, k.p.TopicPartition)
	}
	l.mu.Unlock()
}

// take removes and returns the ask for tp if it is still k.
func (l *sessionLoop) take(tp client.TopicPartition, k *ask) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.asks[tp] != k {
		return false
	}
	delete(l.asks, tp)
	return true
}

// snapshot returns the waiting asks in arrival order.
func (l *sessionLoop) snapshot() []*ask {
	l.mu.Lock()
	ks := make([]*ask, 0, len(l.asks))
	for _, k := range l.asks {
		ks = append(ks, k)
	}
	l.mu.Unlock()
	slices.SortFunc(ks, func(a, b *ask) int { return cmp.Compare(a.seq, b.seq) })
	return ks
}

// failAll fails the given asks (still waiting) with err.
func (l *sessionLoop) failAll(ks []*ask, err error) {
	for _, k := range ks {
		if l.take(k.p.TopicPartition, k) {
			k.done <- askResult{err: err}
		}
	}
}

func (l *sessionLoop) closeConn() {
	if l.sess != nil {
		l.sess.Close()
		l.sess = nil
	}
}

func (l *sessionLoop) run() {
	defer l.f.wg.Done()
	defer func() {
		l.closeConn()
		l.failAll(l.snapshot(), errFetchersClosed)
	}()
	ctx := l.f.ctx
	for ctx.Err() == nil {
		if len(l.snapshot()) == 0 {
			select {
			case <-l.wake:
			case <-ctx.Done():
			}
			continue
		}
		l.linger(ctx)
		if err := l.pace(ctx); err != nil {
			return
		}
		if l.sess != nil && l.sess.Broken() {
			l.closeConn() // dropped while idle (the broker's idle timeout): redial quietly
		}
		if l.sess == nil {
			if !l.dial(ctx) {
				continue
			}
		}
		l.round(ctx, l.snapshot())
	}
}

// lingerFor bounds how long the next request waits for the partitions
// the last response answered to ask again.
const lingerFor = 2 * time.Millisecond

// linger waits, briefly, until every partition the last response
// answered asks again: a copy hands what it got to its writer and asks at
// once unless its writer is behind, so waiting for it keeps requests
// whole instead of sending one for the first few that are back.
func (l *sessionLoop) linger(ctx context.Context) {
	if len(l.answered) == 0 {
		return
	}
	var timer *time.Timer
	for {
		back := true
		l.mu.Lock()
		for tp := range l.answered {
			if _, ok := l.asks[tp]; !ok {
				back = false
				break
			}
		}
		l.mu.Unlock()
		if back {
			break
		}
		if timer == nil {
			timer = time.NewTimer(lingerFor)
			defer timer.Stop()
		}
		select {
		case <-l.wake:
		case <-timer.C:
			return
		case <-ctx.Done():
			return
		}
	}
	clear(l.answered)
}

// pace waits for the link's throttle and the broker's quota throttle.
func (l *sessionLoop) pace(ctx context.Context) error {
	if err := l.f.thr.wait(ctx); err != nil {
		return err
	}
	if d := l.quotaUntil.Sub(l.f.cfg.Clock.Now()); d > 0 {
		return l.f.cfg.Clock.Sleep(ctx, d)
	}
	return nil
}

// dial connects the session; a failure fails the waiting fetches and
// backs off (a source broker restarting).
func (l *sessionLoop) dial(ctx context.Context) bool {
	dctx, cancel := context.WithTimeout(ctx, requestTimeout)
	sess, err := l.f.cfg.source.DialSession(dctx, l.addr)
	cancel()
	if err != nil {
		if ctx.Err() != nil {
			return false
		}
		l.f.cfg.Log.Debug("link fetch session: dial failed", "broker", l.addr, "err", err)
		l.failAll(l.snapshot(), err)
		_ = l.backoff.Wait(ctx)
		return false
	}
	l.sess = sess
	return true
}

// round sends one request for ks and delivers its answers.
func (l *sessionLoop) round(ctx context.Context, ks []*ask) {
	want := make([]client.SessionPartition, len(ks))
	wait := int32(-1)
	back := false // a partition answered last time has not asked again yet
	for i, k := range ks {
		want[i] = k.p
		if wait < 0 || k.maxWait < wait {
			wait = k.maxWait
		}
	}
	for tp := range l.answered {
		if _, ok := l.asksHas(tp); !ok {
			back = true
			break
		}
	}
	clear(l.answered)
	if back {
		// Answer at once, so that a copy writing what it was just
		// given is in the next request rather than waiting out a
		// long poll of partitions that have nothing.
		wait = 0
	}
	// The answer must fit in the fetch buffer (budget.go): wait for
	// room, and ask for no more than there is.
	room, err := l.f.budget.room(ctx)
	if err != nil {
		return
	}
	// A broker that does not answer within the wait and the request
	// timeout is given up on, as Kafka's replica fetcher does.
	rctx, cancel := context.WithTimeout(ctx, requestTimeout+time.Duration(max(wait, 0))*time.Millisecond)
	resp, err := l.sess.Fetch(rctx, want, client.SessionOptions{MaxWaitMs: max(wait, 0), MinBytes: 1, MaxBytes: int32(min(int64(l.f.cfg.MaxBytes), room)), Isolation: client.ReadUncommitted})
	cancel()
	if err != nil {
		if ctx.Err() != nil {
			return
		}
		l.f.cfg.Log.Debug("link fetch session failed", "broker", l.addr, "partitions", len(ks), "err", err)
		l.closeConn()
		l.failAll(ks, err)
		_ = l.backoff.Wait(ctx)
		return
	}
	l.backoff.Reset()
	if resp.Throttle > 0 {
		l.quotaUntil = l.f.cfg.Clock.Now().Add(resp.Throttle)
	}
	byTP := make(map[client.TopicPartition]*ask, len(ks))
	for _, k := range ks {
		byTP[k.p.TopicPartition] = k
	}
	var n int
	for _, a := range resp.Answers {
		k := byTP[a.TopicPartition]
		if k == nil {
			continue
		}
		delete(byTP, a.TopicPartition) // the first answer only
		n += len(a.Records)
		if l.take(a.TopicPartition, k) {
			l.answered[a.TopicPartition] = struct{}{}
			if a.Err == nil {
				k.led.delivered(k.p.Offset, a.Records)
			}
			k.done <- askResult{res: a.FetchResult}
		}
	}
	l.f.thr.take(n)
}

func (l *sessionLoop) asksHas(tp client.TopicPartition) (*ask, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	k, ok := l.asks[tp]
	return k, ok
}

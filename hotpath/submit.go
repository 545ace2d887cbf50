package hotpath

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"

	"github.com/verbatim-kafka/verbatim/storage"
)

// The submission queue: every partition has one owner goroutine that takes
// appends from a bounded queue, so appends from any number of connections
// are ordered by one writer without a lock on the hot path. Whatever is
// queued when the owner wakes is coalesced: written back to back, and all
// the appends that asked for durability are handed to the log's group
// commit with a single registration. Completions wake the waiting requests through their Group.

// Log is what the queue needs from a partition log; *storage.Log has it.
type Log interface {
	AppendLeader(set []byte, leaderEpoch int32, nowMs int64) (storage.AppendResult, error)
	AppendVerbatimAt(set []byte, nowMs int64) (storage.AppendResult, error)
	// OnDurable calls fn once every offset below upTo is durable, or with
	// the error that prevents it. Callbacks fire in registration order,
	// must not block and must not call back into the log.
	OnDurable(upTo int64, fn func(error))
	LogEndOffset() int64
}

// Append is one partition's share of a produce request. The caller fills
// the inputs, submits it, and reads Result/Err after its Group completes.
type Append struct {
	Set         []byte
	Verbatim    bool
	LeaderEpoch int32 // normal mode: the partition's current leader epoch
	NowMs       int64 // append time: the segment roll's clock, and normal mode's LogAppendTime
	// Durable makes completion wait for the log's group commit (acks=-1
	// under --flush always); otherwise the append completes once written.
	// Only set it under FlushAlways: under the other policies storage makes
	// data durable only on rolls, intervals, Flush or Close, so the wait
	// could last until then.
	Durable bool
	// Guard, when not nil, admits the append at the moment it is written
	// (see Guard).
	Guard Guard

	Result storage.AppendResult
	Err    error

	group *Group
	upTo  int64
}

// Guard admits an append at the moment it is written, for the checks that
// must see the log as the append will find it (a mirror writer's fencing,
// its expected log end, policies judging the log end and open
// transactions). It is an interface so that a caller's pooled state can
// serve without a per-append closure.
//
// Whoever writes the append (the partition's owner goroutine or a
// submitter writing inline) calls Begin immediately before the write, in
// queue order, and, when Begin returned nil, End right after it with the
// write's outcome. An error from Begin fails the append unwritten with
// that error. Begin may take a lock that End releases: nothing else is
// written to the log between them. Neither may submit to the same
// partition.
type Guard interface {
	Begin() error
	End(res *storage.AppendResult, err error)
}

// Group counts the outstanding appends of one request. The zero value is
// not usable; get one from NewGroup and reuse it after Wait returns.
type Group struct {
	pending atomic.Int32
	done    chan struct{}
}

// NewGroup returns an empty group.
func NewGroup() *Group { return &Group{done: make(chan struct{}, 1)} }

// Reset makes g empty for reuse, as NewGroup would, keeping its channel.
// Only call it when no append of g is outstanding.
func (g *Group) Reset() {
	g.pending.Store(0)
	if g.done == nil {
		g.done = make(chan struct{}, 1)
		return
	}
	select {
	case <-g.done:
	default:
	}
}

// Add announces n more appends (call before submitting them).
func (g *Group) Add(n int) { g.pending.Add(int32(n)) }

func (g *Group) complete() {
	if g.pending.Add(-1) == 0 {
		g.done <- struct{}{}
	}
}

// Wait blocks until every announced append has completed.
func (g *Group) Wait() { <-g.done }

// Done returns a channel that receives once every announced append has
// completed (for select); receive from it exactly once per round.
func (g *Group) Done() <-chan struct{} { return g.done }

func (a *Append) finish(err error) {
	if err != nil && a.Err == nil {
		a.Err = err
	}
	g := a.group
	a.group = nil
	g.complete()
}

// ErrPartitionClosed is the error of appends submitted to, or still queued
// in, a closed partition queue.
var ErrPartitionClosed = errors.New("hotpath: partition queue closed")

// QueueConfig bounds a partition queue.
type QueueConfig struct {
	// Depth is the number of appends that may wait in the queue; Submit
	// blocks beyond it (back-pressure to the connections).
	Depth int
	// MaxCoalesce bounds the appends written per owner wake-up.
	MaxCoalesce int
}

// DefaultQueueConfig is used for zero fields.
var DefaultQueueConfig = QueueConfig{Depth: 256, MaxCoalesce: 64}

// Partition is the owner of one partition log's appends.
type Partition struct {
	log    Log
	cfg    QueueConfig
	queue  chan *Append
	closed chan struct{}
	exited chan struct{}
	once   sync.Once

	// submitMu makes Close wait for Submits that are mid-send, so nothing
	// enters the queue after the owner's final drain.
	submitMu    sync.RWMutex
	stopAccepts bool

	// writer is held by whoever writes to the log: the owner goroutine, or
	// a submitter that found the partition idle and writes its own append
	// inline (no goroutine hand-off, the common case for a lone producer).
	// queued counts appends submitted through the queue and not yet
	// written; inline writing is allowed only when it is zero, so an append
	// never overtakes one submitted before it.
	writer sync.Mutex
	queued atomic.Int64

	// Owner-goroutine state.
	batch []*Append

	// Appends waiting for durability, in registration order, and the
	// number of appends each OnDurable registration covers. The flusher
	// pops from the front (under mu) when a registration fires.
	mu        sync.Mutex
	waiting   []*Append
	regs      []int
	onDurable func(error) // bound once: registering does not allocate
}

// NewPartition starts the owner goroutine of log's queue.
func NewPartition(log Log, cfg QueueConfig) *Partition {
	if cfg.Depth <= 0 {
		cfg.Depth = DefaultQueueConfig.Depth
	}
	if cfg.MaxCoalesce <= 0 {
		cfg.MaxCoalesce = DefaultQueueConfig.MaxCoalesce
	}
	p := &Partition{log: log, cfg: cfg, queue: make(chan *Append, cfg.Depth),
		closed: make(chan struct{}), exited: make(chan struct{})}
	p.onDurable = p.durableFired
	go p.run()
	return p
}

// Submit queues a, which must belong to g (g.Add called for it). It blocks
// while the queue is full; if ctx ends first the append is not queued and
// the error is returned (g still counts it: the caller must not Wait for
// it, or must finish the group by other means).
func (p *Partition) Submit(ctx context.Context, g *Group, a *Append) error {
	a.group, a.Err, a.Result = g, nil, storage.AppendResult{}
	p.submitMu.RLock()
	defer p.submitMu.RUnlock()
	if p.stopAccepts {
		return ErrPartitionClosed
	}
	if p.queued.Load() == 0 && p.writer.TryLock() {
		if p.queued.Load() == 0 {
			p.batch = append(p.batch[:0], a)
			p.write()
			p.writer.Unlock()
			return nil
		}
		p.writer.Unlock()
	}
	p.queued.Add(1)
	select {
	case p.queue <- a:
		return nil
	case <-ctx.Done():
		p.queued.Add(-1)
		return ctx.Err()
	}
}

// Queued returns the number of appends submitted through the queue and
// not yet written (appends written inline by their submitter are never
// counted). For tests and metrics.
func (p *Partition) Queued() int { return int(p.queued.Load()) }

// Close stops the owner after it has written what is queued; later Submits
// fail with ErrPartitionClosed. Appends waiting for durability complete when
// the log makes them durable or is closed.
func (p *Partition) Close() {
	p.submitMu.Lock()
	p.stopAccepts = true
	p.submitMu.Unlock()
	p.once.Do(func() { close(p.closed) })
	<-p.exited
}

func (p *Partition) run() {
	defer close(p.exited)
	for {
		var a *Append
		select {
		case a = <-p.queue:
		case <-p.closed:
			// Drain what made it into the queue before the close.
			for {
				select {
				case a = <-p.queue:
					p.writer.Lock()
					p.batch = append(p.batch[:0], a)
					p.write()
					p.queued.Add(-1)
					p.writer.Unlock()
				default:
					return
				}
			}
		}
		p.writer.Lock()
		p.batch = append(p.batch[:0], a)
	drain:
		for len(p.batch) < p.cfg.MaxCoalesce {
			select {
			case a = <-p.queue:
				p.batch = append(p.batch, a)
			default:
				break drain
			}
		}
		n := len(p.batch)
		p.write()
		p.queued.Add(int64(-n))
		p.writer.Unlock()
	}
}

// write appends the coalesced batch in queue order and completes or parks
// each append. REQUIRES: p.writer.
func (p *Partition) write() {
	upTo := int64(-1)
	parked := 0
	for _, a := range p.batch {
		p.appendOne(a)
		if a.Err == nil && a.Durable {
			a.upTo = a.Result.LastOffset + 1
			upTo = max(upTo, a.upTo)
			p.park(a)
			parked++
			continue
		}
		a.finish(nil)
	}
	if parked > 0 {
		p.mu.Lock()
		p.regs = append(p.regs, parked)
		p.mu.Unlock()
		p.log.OnDurable(upTo, p.onDurable)
	}
	clear(p.batch)
	p.batch = p.batch[:0]
}

func (p *Partition) park(a *Append) {
	p.mu.Lock()
	p.waiting = append(p.waiting, a)
	p.mu.Unlock()
}

// appendOne appends a with the log's leader or verbatim append, inside
// its guard's Begin and End.
func (p *Partition) appendOne(a *Append) {
	if a.Guard != nil {
		if err := a.Guard.Begin(); err != nil {
			a.Err = err
			return
		}
	}
	if a.Verbatim {
		a.Result, a.Err = p.log.AppendVerbatimAt(a.Set, a.NowMs)
	} else {
		a.Result, a.Err = p.log.AppendLeader(a.Set, a.LeaderEpoch, a.NowMs)
	}
	if a.Guard != nil {
		a.Guard.End(&a.Result, a.Err)
	}
}

// durableFired runs on the log's flusher (under the log's lock) for one
// registration: it completes the appends of the oldest registration.
func (p *Partition) durableFired(err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.regs) == 0 {
		return // a log firing more callbacks than registered: nothing waits
	}
	n := p.regs[0]
	m := copy(p.regs, p.regs[1:])
	p.regs = p.regs[:m]
	for _, a := range p.waiting[:n] {
		a.finish(err) // never blocks: see Group
	}
	// Shift the rest down so the backing array is reused (no allocation).
	m = copy(p.waiting, p.waiting[n:])
	clear(p.waiting[m:])
	p.waiting = p.waiting[:m]
}

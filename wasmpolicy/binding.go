package wasmpolicy

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/verbatim-kafka/verbatim/kbatch"
	"github.com/verbatim-kafka/verbatim/policies/abi"
)

// PartitionContext is what a policy learns about the partition besides
// the batches (docs/policies.md).
type PartitionContext = abi.Context

// Mirror modes and states of a PartitionContext.
const (
	ModeNone       = abi.ModeNone
	ModePush       = abi.ModePush
	StateNone      = abi.StateNone
	StateMirroring = abi.StateMirroring
	StateStopping  = abi.StateStopping
)

// Rejection is one batch refused by one policy.
type Rejection struct {
	// Batch is the batch's index in the judged record set.
	Batch      int
	BaseOffset int64
	Policy     string
	// Code is a non-retriable Kafka error code.
	Code   int16
	Reason string
}

// Verdicts are the outcome of a judge call. Rejected is nil when every
// batch was accepted; otherwise it is ordered by batch, then by policy
// order.
type Verdicts struct {
	Rejected []Rejection
	// Elapsed is how long the policies took, from the first module's
	// call to the last one's end (what a latency metric observes, so
	// the caller need not read the clock around Judge).
	Elapsed time.Duration
}

// Accepted reports whether no batch was rejected.
func (v *Verdicts) Accepted() bool { return len(v.Rejected) == 0 }

// Err is nil when every batch was accepted, else a *RejectedError for the
// first rejection: Kafka appends a partition's record set whole or not at
// all, so one rejected batch refuses the set.
func (v *Verdicts) Err() error {
	if len(v.Rejected) == 0 {
		return nil
	}
	return &RejectedError{v.Rejected[0]}
}

// RejectedError carries a rejection's Kafka error code and message.
type RejectedError struct{ Rejection }

func (e *RejectedError) Error() string {
	return fmt.Sprintf("mirror policy %s rejected the batch at offset %d: %s", e.Policy, e.BaseOffset, e.Reason)
}

// KafkaCode is the error code for the produce response.
func (e *RejectedError) KafkaCode() int16 { return e.Code }

// sanitizeCode keeps a guest's code if Kafka defines it as non-retriable;
// anything else becomes POLICY_VIOLATION, so that no policy can make a
// producer retry forever.
func sanitizeCode(code int16) (int16, bool) {
	if code > 0 {
		if ke, ok := kerr.ErrorForCode(code).(*kerr.Error); ok && ke.Code == code && !ke.Retriable {
			return code, true
		}
	}
	return kerr.PolicyViolation.Code, false
}

// Binding is a topic's policies, each with its own pool of instances.
type Binding struct {
	host   *Host
	topic  string
	cfg    map[string]string
	mods   []*boundModule
	closed atomic.Bool
}

type boundModule struct {
	name string
	pool atomic.Pointer[pool]
}

// Bind loads names (built-ins or --policy-dir modules) for topic, with the
// topic's configs (each module receives only those it declared). A module
// that breaks the ABI is refused here; its first instance for the topic is
// created by the first call.
func (h *Host) Bind(topic string, names []string, cfg map[string]string) (*Binding, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	b := &Binding{host: h, topic: topic, cfg: make(map[string]string, len(cfg))}
	for k, v := range cfg {
		b.cfg[k] = v
	}
	for _, n := range names {
		m, err := h.moduleLocked(n)
		if err == nil {
			var p *pool
			if p, err = h.newPool(m, topic, b.cfg); err == nil {
				bm := &boundModule{name: n}
				bm.pool.Store(p)
				b.mods = append(b.mods, bm)
				continue
			}
		}
		for _, bm := range b.mods {
			bm.pool.Load().close()
		}
		return nil, err
	}
	h.bindings[b] = struct{}{}
	return b, nil
}

// Policies lists the bound policy names in judging order.
func (b *Binding) Policies() []string {
	out := make([]string, len(b.mods))
	for i, bm := range b.mods {
		out[i] = bm.name
	}
	return out
}

// Close releases the binding's instances. Calls in flight finish.
func (b *Binding) Close() {
	if b.closed.Swap(true) {
		return
	}
	h := b.host
	h.mu.Lock()
	delete(h.bindings, b)
	h.mu.Unlock()
	for _, bm := range b.mods {
		bm.pool.Load().close()
	}
}

// Judge runs every bound policy over batches (raw v2 batches back to
// back, as a produce request carries them for one partition): one call per
// policy, not per batch or record. A policy that traps, exits, overruns
// the deadline, or answers garbage rejects every batch of the call with
// POLICY_VIOLATION and its instance is replaced. The error is for the
// host's own failures: a closed binding, a cancelled ctx, a record set
// that does not split into batches.
func (b *Binding) Judge(ctx context.Context, pc PartitionContext, batches []byte) (Verdicts, error) {
	var v Verdicts
	if b.closed.Load() {
		return v, ErrClosed
	}
	if err := ctx.Err(); err != nil {
		return v, err
	}
	// One clock read per module boundary: a module's end is the next
	// one's start (its watchdog's, its latency's and its instance's
	// last use), since the clock is a measurable share of a small
	// request's cost.
	first := time.Now()
	start := first
	for _, bm := range b.mods {
		p := bm.pool.Load()
		err := p.judge(ctx, &pc, batches, &v, start)
		end := time.Now()
		if p.observe != nil {
			p.observe(end.Sub(start))
		}
		start = end
		if err != nil {
			return Verdicts{}, err
		}
	}
	v.Elapsed = start.Sub(first)
	if len(b.mods) > 1 && len(v.Rejected) > 1 {
		sort.SliceStable(v.Rejected, func(i, j int) bool { return v.Rejected[i].Batch < v.Rejected[j].Batch })
	}
	return v, nil
}

// pool holds the instances of one module for one topic.
type pool struct {
	h        *Host
	m        *module
	topic    string
	cfgTable []byte
	ncfg     int
	sem      chan struct{}
	// observe receives each judge call's duration (Options.ModuleTimer;
	// nil: not timed).
	observe func(time.Duration)

	mu struct {
		sync.Mutex
		free   []*instance
		closed bool
	}
}

// newPool creates an empty pool: instances are created by the first calls
// (the module itself was validated, with a probe instance, when it was
// compiled), so binding many topics at start-up costs no instantiation.
func (h *Host) newPool(m *module, topic string, cfg map[string]string) (*pool, error) {
	p := &pool{h: h, m: m, topic: topic, sem: make(chan struct{}, h.opts.MaxInstances)}
	if h.opts.ModuleTimer != nil {
		p.observe = h.opts.ModuleTimer(m.desc.Name)
	}
	p.cfgTable, p.ncfg = abi.EncodeConfigs(m.desc.Configs, cfg)
	return p, nil
}

// get takes a free instance or makes one; slow reports that it waited
// for a slot or instantiated (so the caller's clock reading is stale).
func (p *pool) get(ctx context.Context) (in *instance, slow bool, err error) {
	select {
	case p.sem <- struct{}{}:
	default:
		slow = true
		select {
		case p.sem <- struct{}{}:
		case <-ctx.Done():
			return nil, slow, ctx.Err()
		}
	}
	p.mu.Lock()
	if p.mu.closed {
		p.mu.Unlock()
		<-p.sem
		return nil, slow, ErrClosed
	}
	if n := len(p.mu.free); n > 0 {
		in := p.mu.free[n-1]
		p.mu.free = p.mu.free[:n-1]
		p.mu.Unlock()
		return in, slow, nil
	}
	p.mu.Unlock()
	in, err = p.h.newInstance(p.m)
	if err != nil {
		<-p.sem
		return nil, true, err
	}
	return in, true, nil
}

// put returns an instance used by a call that began at used; a failed
// one (or any, once the pool closed) is closed instead.
func (p *pool) put(in *instance, failed bool, used time.Time) {
	p.mu.Lock()
	keep := !failed && !p.mu.closed
	if keep {
		in.lastUsed = used
		p.mu.free = append(p.mu.free, in)
	}
	p.mu.Unlock()
	if !keep {
		in.close()
	}
	<-p.sem
}

// closeIdle closes the free instances last used before cutoff. Free
// instances are pushed and popped at the end, so the idle ones are first.
func (p *pool) closeIdle(cutoff time.Time) {
	p.mu.Lock()
	n := 0
	for n < len(p.mu.free) && p.mu.free[n].lastUsed.Before(cutoff) {
		n++
	}
	idle := append([]*instance(nil), p.mu.free[:n]...)
	p.mu.free = append(p.mu.free[:0], p.mu.free[n:]...)
	p.mu.Unlock()
	for _, in := range idle {
		in.close()
	}
}

func (p *pool) close() {
	p.mu.Lock()
	p.mu.closed = true
	free := p.mu.free
	p.mu.free = nil
	p.mu.Unlock()
	for _, in := range free {
		in.close()
	}
}

// judge runs one module over the batches, appending its rejections to v.
func (p *pool) judge(ctx context.Context, pc *PartitionContext, set []byte, v *Verdicts, now time.Time) error {
	d := &p.m.desc
	size, nb, err := abi.InputSize(pc, p.topic, p.cfgTable, set, d.Needs)
	if err != nil {
		return err
	}
	in, slow, err := p.get(ctx)
	if slow {
		// The watchdog times the guest's call, not the wait for an
		// instance before it.
		now = time.Now()
	}
	if err != nil {
		if err == ErrClosed || ctx.Err() != nil {
			return err
		}
		// No instance could be created (e.g. the module now fails to
		// initialise): the batches cannot be judged, so they are refused.
		p.rejectAll(v, set, nb, fmt.Sprintf("policy %s unavailable: %v", d.Name, err))
		return nil
	}
	mark := len(v.Rejected)
	err = in.run(now, size, func(dst []byte) {
		abi.EncodeInput(dst, pc, p.topic, p.cfgTable, p.ncfg, set, nb, d.Needs)
	}, nb, func(i int, code int16, reason []byte) {
		c, _ := sanitizeCode(code)
		v.Rejected = append(v.Rejected, Rejection{Batch: i, Code: c, Policy: d.Name, Reason: string(reason)})
	})
	if err != nil {
		v.Rejected = v.Rejected[:mark]
		p.h.opts.Logger.Warn("mirror policy instance failed; replacing it", "policy", d.Name, "topic", p.topic, "partition", pc.Partition, "err", err)
		p.put(in, true, now)
		p.rejectAll(v, set, nb, fmt.Sprintf("policy %s failed, instance replaced: %v", d.Name, err))
		return nil
	}
	// A watchdog that fired just as the call returned leaves the
	// instance's context done: its next call would fail, so drop it.
	p.put(in, in.cc.fired.Load(), now)
	if len(v.Rejected) > mark {
		fillOffsets(v.Rejected[mark:], set)
	}
	return nil
}

func (p *pool) rejectAll(v *Verdicts, set []byte, nb int, reason string) {
	start := len(v.Rejected)
	for i := 0; i < nb; i++ {
		v.Rejected = append(v.Rejected, Rejection{Batch: i, Policy: p.m.desc.Name, Code: kerr.PolicyViolation.Code, Reason: reason})
	}
	fillOffsets(v.Rejected[start:], set)
}

// fillOffsets sets BaseOffset from the batch index.
func fillOffsets(rs []Rejection, set []byte) {
	var offs []int64
	for it := kbatch.Batches(set); it.Next(); {
		offs = append(offs, kbatch.BaseOffset(it.Batch()))
	}
	for i := range rs {
		if rs[i].Batch < len(offs) {
			rs[i].BaseOffset = offs[rs[i].Batch]
		}
	}
}

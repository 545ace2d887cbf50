package controller

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/verbatim-kafka/verbatim/clustermeta"
)

// Config configures a controller candidate.
type Config struct {
	Store  clustermeta.Store
	NodeID int32
	// SessionTTL is the election lease's TTL in seconds.
	SessionTTL int64
	// UncleanLeaderElection is the broker default of
	// unclean.leader.election.enable (topics override it).
	UncleanLeaderElection bool
	Log                   *slog.Logger
	// Now is the clock (nil: time.Now); it times the terms in the log.
	Now func() time.Time
	// RetryBackoff and RetryBackoffMax pace the retries after a failed
	// campaign or write (Kafka's retry.backoff.ms and
	// retry.backoff.max.ms; defaults 50 ms and 1 s): the wait doubles
	// from the first to the second and resets after a success.
	RetryBackoff, RetryBackoffMax time.Duration
	// Rebalance is the automatic preferred-leader rebalance
	// (auto.leader.rebalance.enable and its settings; rebalance.go).
	Rebalance RebalanceConfig
}

// maxStatesPerWrite bounds one compare-and-swap (an etcd transaction
// holds at most --max-txn-ops comparisons, 128 by default; each state
// is one, the fence another).
const maxStatesPerWrite = 50

// errTermEnded ends a term: the leadership is gone.
var errTermEnded = errors.New("controller: the leadership ended")

// Run campaigns for the controllership and, while elected, carries out
// the controller's decisions, until ctx ends; it campaigns again after
// losing a term. Each term watches the store's snapshots and writes what
// Decide returns with CASPartitions under the leadership's fence: a
// conflict (a leader changed its ISR meanwhile) re-reads the state and
// decides again, a fenced write (the term is over, another controller
// may be deciding) ends the term. It returns nil when ctx ends (after
// resigning, so another candidate takes over at once), an error only
// for a configuration it cannot run with.
func Run(ctx context.Context, c Config) error {
	if c.Store == nil {
		return errors.New("controller: no store")
	}
	c = c.withDefaults()
	backoff := pacer{min: c.RetryBackoff, max: c.RetryBackoffMax}
	for ctx.Err() == nil {
		lead, err := c.Store.Campaign(ctx, c.NodeID, c.SessionTTL)
		if err != nil {
			if ctx.Err() != nil {
				break
			}
			c.Log.Warn("controller: campaign failed", "node", c.NodeID, "err", err)
			backoff.wait(ctx)
			continue
		}
		backoff.reset()
		began := c.Now()
		c.Log.Info("controller: elected", "node", c.NodeID)
		err = (&term{c: c, lead: lead}).run(ctx)
		// Give up what is left of the leadership (a stop, a fenced write,
		// a closed watch): a candidate campaigning again would otherwise
		// queue behind its own election key until its lease lapsed.
		resign(ctx, c, lead)
		if ctx.Err() != nil {
			break
		}
		c.Log.Info("controller: term ended", "node", c.NodeID, "after", c.Now().Sub(began), "err", err)
		backoff.wait(ctx)
	}
	c.Log.Info("controller: stopped", "node", c.NodeID)
	return nil
}

// resign ends the leadership unless it has ended.
func resign(ctx context.Context, c Config, lead *clustermeta.Leadership) {
	select {
	case <-lead.Done():
		return
	default:
	}
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
	defer cancel()
	if err := lead.Resign(rctx); err != nil {
		c.Log.Warn("controller: resign failed", "node", c.NodeID, "err", err)
	}
}

func (c Config) withDefaults() Config {
	if c.Log == nil {
		c.Log = slog.Default()
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.SessionTTL <= 0 {
		// broker.session.timeout.ms's default, as the registrations'.
		c.SessionTTL = 9
	}
	if c.Rebalance.Interval <= 0 {
		c.Rebalance.Interval = DefaultLeaderImbalanceInterval
	}
	if c.Rebalance.PerBrokerPercentage < 0 {
		c.Rebalance.PerBrokerPercentage = DefaultLeaderImbalancePercentage
	}
	if c.RetryBackoff <= 0 {
		c.RetryBackoff = 50 * time.Millisecond
	}
	if c.RetryBackoffMax < c.RetryBackoff {
		c.RetryBackoffMax = max(c.RetryBackoff, time.Second)
	}
	return c
}

// term is one controllership.
type term struct {
	c    Config
	lead *clustermeta.Leadership
	// written is the revision of this term's last write: older
	// snapshots (the watch lagging behind it) are not acted on.
	written int64
}

func (t *term) run(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		select {
		case <-t.lead.Done():
			cancel()
		case <-ctx.Done():
		}
	}()
	watch := t.c.Store.Watch(ctx)
	backoff := pacer{min: t.c.RetryBackoff, max: t.c.RetryBackoffMax}
	var retry <-chan time.Time
	var rebalance <-chan time.Time
	if t.c.Rebalance.Enable {
		tick := time.NewTicker(t.c.Rebalance.Interval)
		defer tick.Stop()
		rebalance = tick.C
	}
	var latest *clustermeta.Snapshot
	for {
		var snap *clustermeta.Snapshot
		balance := false
		select {
		case <-ctx.Done():
			return errTermEnded
		case s, ok := <-watch:
			if !ok {
				if ctx.Err() != nil {
					return errTermEnded
				}
				return errors.New("controller: the store's watch closed")
			}
			snap = s
		case <-rebalance:
			if latest == nil {
				continue
			}
			snap, balance = latest, true
		case <-retry:
			retry = nil
			s, err := t.c.Store.Snapshot(ctx)
			if err != nil {
				if ctx.Err() != nil {
					return errTermEnded
				}
				t.c.Log.Warn("controller: snapshot failed", "err", err)
				retry = time.After(backoff.next())
				continue
			}
			snap = s
		}
		if snap.Revision < t.written {
			continue
		}
		latest = snap
		ds := DecideAll(snap, Policy{UncleanLeaderElection: t.c.UncleanLeaderElection})
		if balance && len(ds) == 0 {
			// Failures first: the next look rebalances what is left.
			ds = Rebalance(snap, t.c.Rebalance.PerBrokerPercentage)
		}
		switch err := t.act(ctx, ds); {
		case err == nil:
			backoff.reset()
		case errors.Is(err, clustermeta.ErrFenced):
			return errTermEnded
		case ctx.Err() != nil:
			return errTermEnded
		default:
			// A conflict (the state changed since the snapshot) or a
			// failed write: read again, paced.
			if !errors.Is(err, clustermeta.ErrConflict) {
				t.c.Log.Warn("controller: write failed", "err", err)
			}
			if retry == nil {
				retry = time.After(backoff.next())
			}
		}
	}
}

// act writes the decisions, in batches.
func (t *term) act(ctx context.Context, ds []Decision) error {
	for len(ds) > 0 {
		batch := ds[:min(len(ds), maxStatesPerWrite)]
		ds = ds[len(batch):]
		states := make([]clustermeta.PartitionState, len(batch))
		for i, d := range batch {
			states[i] = d.New
		}
		written, err := t.c.Store.CASPartitions(ctx, t.lead.Fence(), states)
		if err != nil {
			return err
		}
		for _, w := range written {
			t.written = max(t.written, w.Version)
		}
		for _, d := range batch {
			t.c.Log.Info("controller: decision",
				"topic", d.New.Topic, "partition", d.New.Partition,
				"leader", fmt.Sprintf("%d -> %d", d.Old.Leader, d.New.Leader),
				"leader_epoch", d.New.LeaderEpoch,
				"isr", fmt.Sprintf("%v -> %v", d.Old.ISR, d.New.ISR),
				"replicas", fmt.Sprintf("%v -> %v", d.Old.Replicas, d.New.Replicas),
				"reason", string(d.Reason))
		}
	}
	return nil
}

// pacer is the doubling wait between retries.
type pacer struct{ min, max, cur time.Duration }

func (p *pacer) next() time.Duration {
	if p.cur == 0 {
		p.cur = p.min
	} else {
		p.cur = min(2*p.cur, p.max)
	}
	return p.cur
}

func (p *pacer) reset() { p.cur = 0 }

func (p *pacer) wait(ctx context.Context) {
	tm := time.NewTimer(p.next())
	defer tm.Stop()
	select {
	case <-tm.C:
	case <-ctx.Done():
	}
}

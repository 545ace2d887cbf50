package txncoord

// Ending transactions: Prepare* records, markers, Complete* records; the
// timers; recovery.
//
// Markers (COMMIT/ABORT control batches carrying the coordinator epoch) are
// written to every partition of the transaction before EndTxn is
// answered; a partition whose marker cannot be written keeps the
// transaction in Prepare*, retried by Tick, as Kafka's marker channel
// retries. On start, Prepare* transactions are completed (markers written
// again where needed; a second marker for a producer without an open
// transaction changes nothing) and Ongoing ones are aborted once their
// timeout has passed since their start.

import (
	"errors"
	"math"
	"time"

	"github.com/verbatim-kafka/verbatim/coordlog"
)

// end moves m to PrepareCommit or PrepareAbort (bump: with Kafka's epoch
// fence first, for timeouts and new instances), persists it, writes the
// markers and completes the transaction. Called with m claimed and c.mu
// not held; 0 or COORDINATOR_NOT_AVAILABLE.
func (c *Coordinator) end(m *txnMeta, commit, bump bool, now time.Time) int16 {
	c.mu.Lock()
	t := m.snapshot()
	c.mu.Unlock()
	if bump && t.epoch < math.MaxInt16-1 {
		t.epoch++
	}
	t.state = txnPrepareAbort
	if commit {
		t.state = txnPrepareCommit
	}
	if err := c.persist(t, now); err != nil {
		return c.persistFailed(t.id, err)
	}
	c.mu.Lock()
	m.apply(t, now)
	c.mu.Unlock()
	c.writeMarkers(m, now)
	return 0
}

// writeMarkers writes m's markers to every partition still needing one
// and completes m once none is left. Called with m claimed and c.mu not
// held.
func (c *Coordinator) writeMarkers(m *txnMeta, now time.Time) {
	c.mu.Lock()
	t := m.snapshot()
	c.mu.Unlock()
	commit := t.state == txnPrepareCommit
	cepoch := c.host.CoordinatorEpoch(c.PartitionFor(t.id))
	for _, tp := range sortedTPs(t.parts) {
		err := c.host.WriteMarker(tp, t.pid, t.epoch, commit, cepoch, now)
		switch {
		case err == nil:
		case errors.Is(err, coordlog.ErrPartitionGone):
			// The partition was deleted: Kafka drops its marker.
		case errors.Is(err, coordlog.ErrFenced):
			// The partition has seen a newer epoch or coordinator:
			// the marker is obsolete, as Kafka treats it.
			c.lg.Warn("transaction marker refused as stale", "transactional_id", t.id, "topic", tp.Topic, "partition", tp.Partition, "err", err)
		default:
			c.lg.Warn("writing transaction marker; will retry", "transactional_id", t.id, "topic", tp.Topic, "partition", tp.Partition, "err", err)
			continue
		}
		delete(t.parts, tp)
	}
	if len(t.parts) > 0 {
		c.mu.Lock()
		m.parts = t.parts
		c.mu.Unlock()
		return
	}
	t.state = txnCompleteAbort
	if commit {
		t.state = txnCompleteCommit
	}
	t.startTs = time.Time{}
	err := c.persist(t, now)
	c.mu.Lock()
	defer c.mu.Unlock()
	if err != nil {
		// Still complete in memory: markers are written. The record is
		// rewritten by the next transition; a restart redoes markers.
		c.persistFailed(t.id, err)
		m.txnData = t
		return
	}
	m.apply(t, now)
}

// PIDScanInterval is how often the allocator is moved above producer ids
// that appeared in the logs since the last scan (mirrored batches).
const PIDScanInterval = 30 * time.Second

// due reports whether Tick acts on m at now.
func (m *txnMeta) due(now time.Time) bool {
	switch m.state {
	case txnOngoing:
		return !now.Before(m.startTs.Add(m.timeout))
	case txnPrepareCommit, txnPrepareAbort, txnPrepareEpochFence:
		return true
	}
	return false
}

// Tick aborts timed-out transactions, retries pending markers and keeps
// the producer id allocator above the ids found in the logs. Local ids
// start above every producer id seen in any partition, best effort: the
// MIRROR_PID_RESET barrier is what guarantees no collision. It returns
// once every due transition, its own or one already in flight, is done.
func (c *Coordinator) Tick(now time.Time) {
	c.mu.Lock()
	if c.owned.Closed() {
		c.mu.Unlock()
		return
	}
	scan := now.Sub(c.lastPidScan) >= PIDScanInterval
	if scan {
		c.lastPidScan = now
	}
	var aborts, markers []*txnMeta
	var inFlight []chan struct{}
	for _, m := range c.txns {
		if !m.due(now) {
			continue
		}
		if m.busy != nil {
			inFlight = append(inFlight, m.busy)
			continue
		}
		switch m.state {
		case txnOngoing:
			if m.offsetWrites > 0 {
				continue // next tick
			}
			c.lg.Info("aborting timed-out transaction", "transactional_id", m.id, "producer_id", m.pid, "timeout", m.timeout)
			aborts = append(aborts, m)
		case txnPrepareEpochFence:
			m.state = txnPrepareAbort
			markers = append(markers, m)
		default:
			markers = append(markers, m)
		}
		c.claim(m)
	}
	c.mu.Unlock()
	if scan {
		if err := c.host.EnsureProducerIDsAbove(c.host.MaxLoggedProducerID()); err != nil {
			c.lg.Warn("moving the producer id allocator above logged ids", "err", err)
		}
	}
	for _, m := range aborts {
		c.end(m, false, true, now)
		c.releaseLocking(m)
	}
	for _, m := range markers {
		c.writeMarkers(m, now)
		c.releaseLocking(m)
	}
	for _, ch := range inFlight {
		<-ch
	}
}

// Load replays __transaction_state, then completes what a restart
// interrupted (Prepare* -> markers). It runs before the coordinator
// serves requests, on a single node only (with Config.PerPartition,
// LoadPartition loads each partition it leads).
func (c *Coordinator) Load() error {
	if c.owned.PerPartition() {
		return nil
	}
	c.mu.Lock()
	for _, p := range c.host.Partitions(coordlog.TxnStateTopic) {
		c.replayPartition(p, c.txns)
	}
	var maxPid int64 = -1
	for _, m := range c.txns {
		maxPid = max(maxPid, m.pid)
	}
	c.mu.Unlock()
	if err := c.host.EnsureProducerIDsAbove(max(maxPid, c.host.MaxLoggedProducerID())); err != nil {
		return err
	}
	now := c.clock.Now()
	c.mu.Lock()
	// That was the scan of the logs' producer ids: the periodic one is
	// due PIDScanInterval from now, not at the first tick (which would
	// move the allocator at a moment depending on the tick's timing).
	c.lastPidScan = now
	redo := c.claimInterruptedLocked(c.txns)
	n := len(c.txns)
	c.mu.Unlock()
	c.completeInterrupted(redo, now)
	c.lg.Info("transaction coordinator loaded", "transactional_ids", n, "completed_on_load", len(redo))
	return nil
}

// replayPartition replays __transaction_state partition p into txns.
func (c *Coordinator) replayPartition(p int32, txns map[string]*txnMeta) {
	err := c.host.Replay(coordlog.TxnStateTopic, p, func(e coordlog.Entry) { replayRecord(txns, e) })
	if err != nil {
		c.lg.Error("transaction coordinator: a state partition is offline or its replay stopped early", "partition", p, "err", err)
	}
}

// claimInterruptedLocked claims the loaded transactions a restart or a
// coordinator move interrupted in Prepare* (PrepareEpochFence goes on as
// PrepareAbort, as Kafka's). Called with c.mu held.
func (c *Coordinator) claimInterruptedLocked(txns map[string]*txnMeta) []*txnMeta {
	var redo []*txnMeta
	for _, m := range txns {
		switch m.state {
		case txnPrepareEpochFence:
			m.state = txnPrepareAbort
			fallthrough
		case txnPrepareCommit, txnPrepareAbort:
			c.claim(m)
			redo = append(redo, m)
		}
	}
	return redo
}

// completeInterrupted writes the markers of the claimed transactions
// again and completes them. Called without c.mu.
func (c *Coordinator) completeInterrupted(redo []*txnMeta, now time.Time) {
	for _, m := range redo {
		c.writeMarkers(m, now)
		c.releaseLocking(m)
	}
}

package txncoord

// Which __transaction_state partitions the coordinator serves.
//
// On a single node (Config.PerPartition false) it serves every
// transactional id: Load replays every partition before the broker
// serves. In cluster mode (PerPartition) a broker coordinates the ids of
// the partitions it leads, as Kafka's TransactionCoordinator
// onElection/onResignation: LoadPartition, on election, marks the
// partition loading (its ids' requests answer
// COORDINATOR_LOAD_IN_PROGRESS), replays its log without the
// coordinator's lock, installs its transactions and then completes those
// the previous coordinator left in Prepare* (their markers are written
// again, with this coordinator's epoch); UnloadPartition, on resignation,
// drops them (later requests answer NOT_COORDINATOR; a transition in
// flight goes on against a detached copy whose writes the log refuses).
// A replay that finishes after its partition was unloaded or loaded again
// is thrown away.

import (
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/verbatim-kafka/verbatim/coordlog"
)

// refusal is why the coordinator does not serve id now (nil: it does):
// NOT_COORDINATOR after Shutdown or for a partition it does not lead,
// COORDINATOR_LOAD_IN_PROGRESS while the partition loads. Called with
// c.mu held.
func (c *Coordinator) refusal(id string) *kerr.Error {
	return c.owned.Refusal(c.PartitionFor(id))
}

// LoadPartition makes the coordinator serve the transactional ids of
// __transaction_state partition p, led by this broker at leader epoch
// epoch (Config.PerPartition only). It marks p loading and returns the
// load, which the caller runs on a goroutine of its own: it replays the
// partition and writes the markers of interrupted transactions. A
// partition already served or loading (elected again without a
// resignation) is left as it is: load is then a no-op.
func (c *Coordinator) LoadPartition(p, epoch int32) (load func()) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.owned.Load(p, epoch, c.finishLoad)
}

// finishLoad replays partition p, installs its transactions unless p was
// unloaded or loaded again since generation gen began, and completes the
// interrupted ones.
func (c *Coordinator) finishLoad(p int32, gen uint64) {
	txns := map[string]*txnMeta{}
	c.replayPartition(p, txns)
	var maxPid int64 = -1
	for _, m := range txns {
		maxPid = max(maxPid, m.pid)
	}
	if err := c.host.EnsureProducerIDsAbove(maxPid); err != nil {
		c.lg.Warn("moving the producer id allocator above loaded transactions", "partition", p, "err", err)
	}
	now := c.clock.Now()
	c.mu.Lock()
	if !c.owned.Finish(p, gen) {
		c.mu.Unlock()
		return
	}
	for id, m := range txns {
		c.txns[id] = m
	}
	redo := c.claimInterruptedLocked(txns)
	epoch := c.owned.Epoch(p)
	c.mu.Unlock()
	c.lg.Info("transaction coordinator loaded a partition", "topic", coordlog.TxnStateTopic, "partition", p, "epoch", epoch,
		"transactional_ids", len(txns), "completing", len(redo))
	c.completeInterrupted(redo, now)
}

// UnloadPartition stops serving the transactional ids of
// __transaction_state partition p (this broker no longer leads it;
// Config.PerPartition only).
func (c *Coordinator) UnloadPartition(p int32) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.owned.PerPartition() {
		return
	}
	c.dropPartitionLocked(p)
	c.owned.Drop(p)
}

// dropPartitionLocked removes the transactions of partition p from
// memory. Called with c.mu held.
func (c *Coordinator) dropPartitionLocked(p int32) {
	for id := range c.txns {
		if c.PartitionFor(id) == p {
			delete(c.txns, id)
		}
	}
}

// Owns reports whether the coordinator serves __transaction_state
// partition p now (loaded): always on a single node until Shutdown.
func (c *Coordinator) Owns(p int32) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.owned.Serves(p)
}

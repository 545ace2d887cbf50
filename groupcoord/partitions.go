package groupcoord

// Which __consumer_offsets partitions the coordinator serves.
//
// On a single node (Config.PerPartition false) it serves every group:
// Load replays every partition before the broker serves. In cluster mode
// (PerPartition) a broker coordinates the groups of the partitions it
// leads, as Kafka's GroupCoordinator onElection/onResignation:
// LoadPartition, on election, marks the partition loading (its groups'
// requests answer COORDINATOR_LOAD_IN_PROGRESS), replays its log without
// the coordinator's lock and then installs its groups; UnloadPartition, on
// resignation, drops them (their waiting members are answered
// NOT_COORDINATOR, as later requests are). Load and unload are ordered by
// a generation: a replay that finishes after its partition was unloaded
// or loaded again is thrown away.

import (
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/verbatim-kafka/verbatim/coordlog"
)

type txnCompletion struct {
	pid    int64
	commit bool
}

// refusal is why the coordinator does not serve groupID now (nil: it
// does): NOT_COORDINATOR after Shutdown or for a partition it does not
// lead, COORDINATOR_LOAD_IN_PROGRESS while the partition loads. Called
// with c.mu held.
func (c *Coordinator) refusal(groupID string) *kerr.Error {
	return c.owned.Refusal(c.PartitionFor(groupID))
}

// LoadPartition makes the coordinator serve the groups of
// __consumer_offsets partition p, led by this broker at leader epoch
// epoch (Config.PerPartition only). It marks p loading and returns the
// replay, which the caller runs (on a goroutine of its own: it reads the
// whole partition); the groups are served once it has run. A partition
// already served or loading (elected again without a resignation) is left
// as it is: load is then a no-op.
func (c *Coordinator) LoadPartition(p, epoch int32) (load func()) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.owned.Load(p, epoch, c.finishLoad)
}

// finishLoad replays partition p and installs its groups unless p was
// unloaded or loaded again since generation gen began.
func (c *Coordinator) finishLoad(p int32, gen uint64) {
	now := c.clock.Now()
	groups := c.replayPartition(p, now)
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.owned.Finish(p, gen) {
		return
	}
	for _, tc := range c.loadingTxns[p] {
		for _, g := range groups {
			completeTxn(g, tc.pid, tc.commit)
		}
	}
	delete(c.loadingTxns, p)
	c.installLocked(groups, now)
	c.lg.Info("group coordinator loaded a partition", "topic", coordlog.OffsetsTopic, "partition", p, "epoch", c.owned.Epoch(p), "groups", len(groups))
}

// UnloadPartition stops serving the groups of __consumer_offsets
// partition p (this broker no longer leads it; Config.PerPartition only).
// Members waiting on a join or sync are answered NOT_COORDINATOR; writes
// already queued are still appended by their driver (the log refuses
// them) and their outcome no longer reaches the coordinator's groups.
func (c *Coordinator) UnloadPartition(p int32) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.owned.PerPartition() {
		return
	}
	c.dropPartitionLocked(p)
	c.owned.Drop(p)
}

// dropPartitionLocked removes the groups of partition p from memory.
// Called with c.mu held.
func (c *Coordinator) dropPartitionLocked(p int32) {
	delete(c.loadingTxns, p)
	for id, g := range c.groups {
		if c.PartitionFor(id) != p {
			continue
		}
		for _, m := range g.members {
			m.endWaits(kerr.NotCoordinator.Code)
		}
		delete(c.groups, id)
	}
}

// Owns reports whether the coordinator serves __consumer_offsets
// partition p now (loaded): always on a single node until Shutdown.
func (c *Coordinator) Owns(p int32) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.owned.Serves(p)
}

// LoadInProgress reports whether a partition is being loaded (ListGroups
// answers COORDINATOR_LOAD_IN_PROGRESS then, as Kafka's).
func (c *Coordinator) LoadInProgress() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.owned.AnyLoading()
}

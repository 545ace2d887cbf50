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

// partOwner is a partition the coordinator serves or is loading.
type partOwner struct {
	// epoch is the leader epoch it was loaded at; gen orders the loads.
	epoch int32
	gen   uint64
	// loaded is false while its log is replayed.
	loaded bool
	// completions are transaction markers written to the partition
	// while it loaded, applied once its groups are installed (a marker
	// the replay already read applies to nothing the second time).
	completions []txnCompletion
}

type txnCompletion struct {
	pid    int64
	commit bool
}

// refusal is why the coordinator does not serve groupID now (nil: it
// does): NOT_COORDINATOR after Shutdown or for a partition it does not
// lead, COORDINATOR_LOAD_IN_PROGRESS while the partition loads. Called
// with c.mu held.
func (c *Coordinator) refusal(groupID string) *kerr.Error {
	if c.closed {
		return kerr.NotCoordinator
	}
	if !c.perPartition {
		return nil
	}
	o := c.owned[c.PartitionFor(groupID)]
	switch {
	case o == nil:
		return kerr.NotCoordinator
	case !o.loaded:
		return kerr.CoordinatorLoadInProgress
	}
	return nil
}

// LoadPartition makes the coordinator serve the groups of
// __consumer_offsets partition p, led by this broker at leader epoch
// epoch (Config.PerPartition only). It marks p loading and returns the
// replay, which the caller runs (on a goroutine of its own: it reads the
// whole partition); the groups are served once it has run. A partition
// already served at that epoch is left as it is (load is then a no-op);
// at another epoch its groups are dropped and loaded again from the log.
func (c *Coordinator) LoadPartition(p, epoch int32) (load func()) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed || !c.perPartition {
		return func() {}
	}
	if o := c.owned[p]; o != nil && o.epoch == epoch {
		return func() {}
	}
	c.dropPartitionLocked(p)
	c.loadGen++
	o := &partOwner{epoch: epoch, gen: c.loadGen}
	c.owned[p] = o
	return func() { c.finishLoad(p, o.gen) }
}

// finishLoad replays partition p and installs its groups unless p was
// unloaded or loaded again since generation gen began.
func (c *Coordinator) finishLoad(p int32, gen uint64) {
	now := c.clock.Now()
	groups := c.replayPartition(p, now)
	c.mu.Lock()
	defer c.mu.Unlock()
	o := c.owned[p]
	if c.closed || o == nil || o.gen != gen {
		return
	}
	for _, tc := range o.completions {
		for _, g := range groups {
			completeTxn(g, tc.pid, tc.commit)
		}
	}
	o.completions = nil
	c.installLocked(groups, now)
	o.loaded = true
	c.lg.Info("group coordinator loaded a partition", "topic", coordlog.OffsetsTopic, "partition", p, "epoch", o.epoch, "groups", len(groups))
}

// UnloadPartition stops serving the groups of __consumer_offsets
// partition p (this broker no longer leads it; Config.PerPartition only).
// Members waiting on a join or sync are answered NOT_COORDINATOR; writes
// already queued are still appended by their driver (the log refuses
// them) and their outcome no longer reaches the coordinator's groups.
func (c *Coordinator) UnloadPartition(p int32) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.perPartition {
		return
	}
	c.dropPartitionLocked(p)
	delete(c.owned, p)
}

// dropPartitionLocked removes the groups of partition p from memory.
// Called with c.mu held.
func (c *Coordinator) dropPartitionLocked(p int32) {
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
// partition p now (loaded): always on a single node.
func (c *Coordinator) Owns(p int32) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.perPartition {
		return !c.closed
	}
	o := c.owned[p]
	return o != nil && o.loaded
}

// LoadInProgress reports whether a partition is being loaded (ListGroups
// answers COORDINATOR_LOAD_IN_PROGRESS then, as Kafka's).
func (c *Coordinator) LoadInProgress() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, o := range c.owned {
		if !o.loaded {
			return true
		}
	}
	return false
}

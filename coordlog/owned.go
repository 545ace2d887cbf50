package coordlog

import "github.com/twmb/franz-go/pkg/kerr"

// Owned is which partitions of its internal topic a coordinator serves.
// On a single node (not per partition) it serves every one. In cluster
// mode a coordinator serves the partitions its broker leads: Begin, on
// election, marks one loading at the leader epoch; Finish, once its
// replay is installed, marks it served; Drop, on resignation, forgets it.
// Loads are ordered by a generation, so a replay that finishes after its
// partition was dropped or loaded again is recognised as stale. Once
// closed (the coordinator shut down) it serves nothing and loads nothing.
//
// Owned has no lock: the coordinator calls it under its own.
type Owned struct {
	perPartition bool
	closed       bool
	parts        map[int32]*ownedPart
	gen          uint64
}

type ownedPart struct {
	epoch  int32
	gen    uint64
	loaded bool
}

// NewOwned returns the table: perPartition false serves every partition.
func NewOwned(perPartition bool) *Owned {
	return &Owned{perPartition: perPartition, parts: map[int32]*ownedPart{}}
}

// PerPartition reports whether only the partitions begun are served.
func (o *Owned) PerPartition() bool { return o.perPartition }

// Close makes the table serve nothing from now on (Shutdown).
func (o *Owned) Close() { o.closed = true }

// Closed reports whether Close was called.
func (o *Owned) Closed() bool { return o.closed }

// Refusal is why a request of partition p is not served (nil: it is):
// NOT_COORDINATOR once closed or for a partition not led here,
// COORDINATOR_LOAD_IN_PROGRESS while it loads.
func (o *Owned) Refusal(p int32) *kerr.Error {
	if o.closed {
		return kerr.NotCoordinator
	}
	if !o.perPartition {
		return nil
	}
	op := o.parts[p]
	switch {
	case op == nil:
		return kerr.NotCoordinator
	case !op.loaded:
		return kerr.CoordinatorLoadInProgress
	}
	return nil
}

// Begin starts loading partition p at leader epoch epoch and returns the
// load's generation; ok is false when there is nothing to load: closed,
// not per partition, or p is already served or loading. A partition elected
// again without a resignation in between (a newer epoch, the same
// leader) keeps its state: the coordinator's memory has followed its log
// all along, and writes of the old epoch still in flight would be missed
// by a replay begun now. It takes the new epoch.
func (o *Owned) Begin(p, epoch int32) (gen uint64, ok bool) {
	if o.closed || !o.perPartition {
		return 0, false
	}
	if op := o.parts[p]; op != nil {
		op.epoch = epoch
		return 0, false
	}
	o.gen++
	o.parts[p] = &ownedPart{epoch: epoch, gen: o.gen}
	return o.gen, true
}

// Load is Begin for a coordinator's LoadPartition: the load it returns
// runs finish(p, gen) of the generation begun, or does nothing when there
// is nothing to load.
func (o *Owned) Load(p, epoch int32, finish func(p int32, gen uint64)) (load func()) {
	gen, ok := o.Begin(p, epoch)
	if !ok {
		return func() {}
	}
	return func() { finish(p, gen) }
}

// Finish marks p served if gen is still its load; false when the table
// was closed, or p dropped or begun again, since.
func (o *Owned) Finish(p int32, gen uint64) bool {
	if o.closed {
		return false
	}
	op := o.parts[p]
	if op == nil || op.gen != gen {
		return false
	}
	op.loaded = true
	return true
}

// Drop forgets partition p.
func (o *Owned) Drop(p int32) { delete(o.parts, p) }

// Loading reports whether partition p is being loaded.
func (o *Owned) Loading(p int32) bool {
	op := o.parts[p]
	return op != nil && !op.loaded
}

// Serves reports whether partition p is served now (always when not per
// partition, until closed).
func (o *Owned) Serves(p int32) bool { return o.Refusal(p) == nil }

// AnyLoading reports whether some partition is being loaded.
func (o *Owned) AnyLoading() bool {
	for _, op := range o.parts {
		if !op.loaded {
			return true
		}
	}
	return false
}

// Epoch is the leader epoch partition p was begun at (-1: not begun).
func (o *Owned) Epoch(p int32) int32 {
	if op := o.parts[p]; op != nil {
		return op.epoch
	}
	return -1
}

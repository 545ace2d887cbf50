package broker

// ElectLeaders in cluster mode (owner: the leader-election work; see
// cluster_config.go): controller.Elect's decisions on a fresh read of the
// store, written by this broker, not handed to the controller. Each
// batch is one compare-and-swap on the partitions' versions fenced by
// this broker's registration, the way a leader writes its ISR changes: a
// state another writer (the controller, a leader's ISR change) changed
// since the read is a conflict, and those partitions are decided again on
// the newer state; nothing the controller decided is overwritten. The
// controller itself never undoes a preferred election (its leader is
// live and in the ISR), and it repairs an unclean one like any other
// leadership.

import (
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/verbatim-kafka/verbatim/clustermeta"
	"github.com/verbatim-kafka/verbatim/controller"
)

// electRetries bounds the re-reads after a conflict.
const electRetries = 8

// electBatch bounds the states of one compare-and-swap (an etcd
// transaction holds at most --max-txn-ops comparisons, 128 by default).
const electBatch = 50

// electLeaders elects the partitions (nil: all) and returns one result
// per partition, in order; an error only when nothing could be decided
// (no registration, the store unreachable).
func (cm *clusterMode) electLeaders(refs []controller.PartitionRef, kind controller.ElectionType) ([]controller.Election, error) {
	sess := cm.session.Load()
	if sess == nil {
		return nil, kafkaErr(kerr.NotController, "this broker is not registered in the cluster")
	}
	ctx, cancel := cm.writeCtx()
	defer cancel()
	snap, err := cm.store.Snapshot(ctx)
	if err != nil {
		return nil, storeErr("electing leaders", err)
	}
	if refs == nil {
		for _, e := range controller.Elect(snap, nil, kind) {
			refs = append(refs, e.PartitionRef)
		}
	}
	out := make([]controller.Election, len(refs))
	pending := make([]int, len(refs)) // indexes into refs still to decide
	for i := range pending {
		pending[i] = i
	}
	var rev int64
	for attempt := 0; len(pending) > 0; attempt++ {
		if attempt > 0 {
			if snap, err = cm.store.Snapshot(ctx); err != nil {
				break
			}
		}
		asked := make([]controller.PartitionRef, len(pending))
		for j, i := range pending {
			asked[j] = refs[i]
		}
		var todo []int // indexes into refs with a decision to write
		for j, e := range controller.Elect(snap, asked, kind) {
			i := pending[j]
			out[i] = e
			if e.Err == nil {
				todo = append(todo, i)
			}
		}
		pending = pending[:0]
		for len(todo) > 0 {
			batch := todo[:min(len(todo), electBatch)]
			todo = todo[len(batch):]
			states := make([]clustermeta.PartitionState, len(batch))
			for j, i := range batch {
				states[j] = out[i].Decision.New
			}
			written, werr := cm.store.CASPartitions(ctx, sess.Fence(), states)
			if errors.Is(werr, clustermeta.ErrConflict) && attempt+1 < electRetries {
				pending = append(pending, batch...)
				continue
			}
			if werr != nil {
				for _, i := range batch {
					out[i].Err = storeErr("electing leaders", werr)
				}
				continue
			}
			for _, w := range written {
				rev = max(rev, w.Version)
			}
			for _, i := range batch {
				d := out[i].Decision
				cm.s.log.Info("leader elected on request", "topic", d.New.Topic, "partition", d.New.Partition,
					"leader", fmt.Sprintf("%d -> %d", d.Old.Leader, d.New.Leader), "leader_epoch", d.New.LeaderEpoch, "reason", string(d.Reason))
			}
		}
	}
	if err != nil {
		for _, i := range pending {
			out[i].Err = storeErr("electing leaders", err)
		}
	}
	if rev > 0 {
		// Answer once this broker shows the new leaders; past the bound
		// the elections stand all the same (written), seen here shortly.
		cm.awaitRevision(ctx, rev)
	}
	return out, nil
}

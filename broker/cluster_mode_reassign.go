package broker

// Partition reassignment in cluster mode (owner: the reassignment work;
// see cluster_config.go): AlterPartitionReassignments' write of the
// target into the partition states (controller.Reassign, one
// compare-and-swap fenced by this broker's registration), and the
// removal of a replica moved off this broker once the store no longer
// names it (the reconciler calls removeMovedReplica).

import (
	"errors"
	"fmt"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/verbatim-kafka/verbatim/clustermeta"
	"github.com/verbatim-kafka/verbatim/controller"
)

// reassignItem is one partition of an AlterPartitionReassignments
// request: its target replicas, or a cancellation.
type reassignItem struct {
	topic     string
	partition int32
	target    []int32
	cancel    bool
}

// reassign carries out the items, one error (nil: done) per item.
func (s *Server) reassign(items []reassignItem, allowRF bool) []error {
	if s.cm != nil {
		return s.cm.reassign(items, allowRF)
	}
	// A single node: every partition is on this node alone, the only
	// assignment there can be.
	self := s.cfg.NodeID
	brokers := map[int32]clustermeta.BrokerInfo{self: {NodeID: self}}
	errs := make([]error, len(items))
	for i, it := range items {
		t := s.cluster.topic(it.topic)
		if t == nil || t.Partition(it.partition) == nil {
			errs[i] = unknownPartition(it)
			continue
		}
		st := clustermeta.PartitionState{Topic: it.topic, Partition: it.partition, Replicas: []int32{self}, ISR: []int32{self}, Leader: self}
		errs[i] = reassignErr(it, st, brokers, allowRF)
	}
	return errs
}

func unknownPartition(it reassignItem) error {
	return fmt.Errorf("%w: The partition %s-%d does not exist.", errUnknownTopic, it.topic, it.partition)
}

// reassignState is the item's new state of st (false: nothing to write,
// the target is the assignment already).
func reassignState(it reassignItem, st clustermeta.PartitionState, brokers map[int32]clustermeta.BrokerInfo, allowRF bool) (clustermeta.PartitionState, bool, error) {
	var target []int32
	if !it.cancel {
		target = it.target
		if target == nil {
			target = []int32{}
		}
	}
	if !it.cancel && !controller.Reassigning(st) && slices.Equal(target, st.Replicas) {
		return st, false, nil
	}
	n, err := controller.Reassign(st, target, allowRF, brokers)
	switch {
	case errors.Is(err, controller.ErrNoReassignment):
		return st, false, kafkaErr(kerr.NoReassignmentInProgress, fmt.Sprintf("No reassignment is in progress for partition %s-%d.", it.topic, it.partition))
	case errors.Is(err, controller.ErrReplicationFactorChange):
		return st, false, fmt.Errorf("%w: The replication factor of %s-%d cannot change in this reassignment (%v).", errInvalidReplicas, it.topic, it.partition, err)
	case err != nil:
		return st, false, fmt.Errorf("%w: %v", errInvalidReplicaAsg, err)
	}
	return n, true, nil
}

func reassignErr(it reassignItem, st clustermeta.PartitionState, brokers map[int32]clustermeta.BrokerInfo, allowRF bool) error {
	_, write, err := reassignState(it, st, brokers, allowRF)
	if err == nil && write {
		return fmt.Errorf("%w: a single node cannot move partition %s-%d", errInvalidReplicaAsg, it.topic, it.partition)
	}
	return err
}

// reassign writes the items' new states over the applied snapshot (again
// over a fresh read while a state changed meanwhile) and waits until this
// broker applied the write.
func (cm *clusterMode) reassign(items []reassignItem, allowRF bool) []error {
	const op = "reassigning partitions"
	errs := make([]error, len(items))
	ctx, cancel := cm.writeCtx()
	defer cancel()
	sess := cm.session.Load()
	if sess == nil {
		for i := range errs {
			errs[i] = storeErr(op, clustermeta.ErrFenced)
		}
		return errs
	}
	var rev int64
	err := cm.retryConflict(ctx, func(snap *clustermeta.Snapshot) error {
		var states []clustermeta.PartitionState
		var written []int
		seen := map[TopicPartition]bool{}
		for i, it := range items {
			errs[i] = nil
			tp := TopicPartition{Topic: it.topic, Partition: it.partition}
			st, ok := snap.Partition(it.topic, it.partition)
			switch {
			case !ok || len(st.Replicas) == 0:
				errs[i] = unknownPartition(it)
				continue
			case seen[tp]:
				errs[i] = kafkaErr(kerr.InvalidRequest, fmt.Sprintf("Partition %s-%d appears more than once in the request.", it.topic, it.partition))
				continue
			}
			seen[tp] = true
			n, write, err := reassignState(it, st, snap.Brokers, allowRF)
			if err != nil {
				errs[i] = err
				continue
			}
			if write {
				states = append(states, n)
				written = append(written, i)
			}
		}
		if len(states) == 0 {
			return nil
		}
		got, err := cm.store.CASPartitions(ctx, sess.Fence(), states)
		if err != nil {
			return err
		}
		for _, g := range got {
			rev = max(rev, g.Version)
		}
		for j, i := range written {
			it := items[i]
			cm.s.log.Info("partition reassignment", "topic", it.topic, "partition", it.partition,
				"replicas", fmt.Sprintf("%v -> %v", snapReplicas(snap, it), states[j].Replicas),
				"adding", states[j].AddingReplicas, "removing", states[j].RemovingReplicas, "cancel", it.cancel)
		}
		return nil
	})
	if err != nil {
		for i := range errs {
			if errs[i] == nil {
				errs[i] = storeErr(op, err)
			}
		}
		return errs
	}
	if rev != 0 && !cm.awaitRevision(ctx, rev) {
		for i := range errs {
			if errs[i] == nil {
				errs[i] = notSeenYet(op)
			}
		}
	}
	return errs
}

func snapReplicas(snap *clustermeta.Snapshot, it reassignItem) []int32 {
	st, _ := snap.Partition(it.topic, it.partition)
	return st.Replicas
}

// removeMovedReplica is the reconciler's step for a hosted partition
// whose state no longer names this broker (moved away by a
// reassignment): its role is dropped (the fetcher stops appending), and
// the partition is replaced in its topic by one without a log, whose
// log is then closed and removed. A later move back starts from an
// empty log, as in Kafka.
func (cm *clusterMode) removeMovedReplica(p *Partition, st clustermeta.PartitionState) {
	s := cm.s
	s.applyRole(p, st)
	np := newClusterPartition(p.Topic, p.Index, st)
	np.raiseLeaderEpoch(p.LeaderEpoch())
	cm.replacePartition(p, np)
	if p.Log != nil {
		if err := p.Log.Close(); err != nil {
			s.log.Warn("closing the log of a replica moved away", "topic", p.Topic.Name, "partition", p.Index, "err", err)
		}
	}
	s.cluster.removePartitionDir(p, p.Topic.ID)
	if err := s.cluster.fs.SyncDir("."); err != nil {
		s.log.Warn("syncing data dir after removing a replica", "err", err)
	}
	s.log.Info("replica moved off this broker: log removed", "topic", p.Topic.Name, "partition", p.Index, "replicas", st.Replicas)
}

// addedReplica is the reconciler's step for a partition this broker
// starts hosting (added by a reassignment): a new Partition with its log
// opened replaces p in the topic, so no request reads a Log being set
// under it. It returns the replacement, whose role the caller applies.
func (cm *clusterMode) addedReplica(p *Partition, st clustermeta.PartitionState) *Partition {
	np := newClusterPartition(p.Topic, p.Index, st)
	np.raiseLeaderEpoch(p.LeaderEpoch())
	cm.openHosted(np)
	cm.replacePartition(p, np)
	cm.s.log.Info("replica added to this broker", "topic", p.Topic.Name, "partition", p.Index, "replicas", st.Replicas)
	return np
}

// replacePartition publishes np in place of p in their topic.
func (cm *clusterMode) replacePartition(p, np *Partition) {
	parts := slices.Clone(p.Topic.Partitions())
	if int(p.Index) < len(parts) && parts[p.Index] == p {
		parts[p.Index] = np
		cm.s.cluster.setPartitions(p.Topic, parts)
	}
}

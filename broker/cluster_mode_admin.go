package broker

// Cluster mode's topic admin (owner: the cluster-metadata work; see
// cluster_config.go): the cluster mutations of cluster.go (create, delete,
// add partitions, set config, leader-epoch raises) written to the cluster
// store instead of the local metadata file. Each write is one store
// transaction (compare-and-swap on the record's version where it
// replaces one); once it succeeded the call waits, bounded, until this
// broker's reconciler has applied its revision, so the next request here
// sees the change. Replicas are placed by controller.Assign over the
// registered brokers, or as a request assigns them, checked as Kafka's
// controller checks them.

import (
	"context"
	"errors"
	"fmt"
	mrand "math/rand/v2"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/verbatim-kafka/verbatim/clustermeta"
	"github.com/verbatim-kafka/verbatim/controller"
)

// clusterWriter is what cluster.go's mutations become in cluster mode
// (cluster.remote).
type clusterWriter interface {
	createTopic(name string, partitions int32, cfg *TopicConfig, validateOnly bool, id [16]byte, pl placement) (*Topic, error)
	deleteTopic(t *Topic) error
	addPartitions(t *Topic, count int32, validateOnly bool, manual [][]int32) error
	setConfig(t *Topic, cfg *TopicConfig) error
	raiseLeaderEpochs(ps []*Partition, epochs []int32) error
}

// placement is how new partitions' replicas are chosen: rf replicas each
// (0: the broker's default for the topic) placed by controller.Assign, or
// the manual assignment, one replica list per partition.
type placement struct {
	rf     int16
	manual [][]int32
}

// storeRetries bounds the re-reads after a compare-and-swap found a newer
// version.
const storeRetries = 4

// writeCtx bounds one admin write and the wait for its revision.
func (cm *clusterMode) writeCtx() (context.Context, context.CancelFunc) {
	base := cm.s.baseCtx
	if base == nil {
		base = context.Background()
	}
	return context.WithTimeout(base, max(cm.s.cfg.RequestTimeout/2, time.Second))
}

// storeErr maps a failed store write to what the client is answered.
func storeErr(op string, err error) error {
	switch {
	case errors.Is(err, clustermeta.ErrFenced):
		return kafkaErr(kerr.NotLeaderForPartition, fmt.Sprintf("%s: this broker's registration ended: %v", op, err))
	case clustermeta.Unavailable(err):
		// A deadline, or etcd's own request timeout or leader change:
		// the write may have happened; Kafka's clients retry this.
		return kafkaErr(kerr.RequestTimedOut, fmt.Sprintf("%s: the cluster store did not answer in time: %v", op, err))
	}
	return kafkaErr(kerr.UnknownServerError, fmt.Sprintf("%s: cluster store: %v", op, err))
}

// notSeenYet answers a write that succeeded but that this broker's
// reconciler did not apply in time.
func notSeenYet(op string) error {
	return kafkaErr(kerr.RequestTimedOut, op+": written to the cluster store, but not yet applied by this broker")
}

// retryConflict runs write over the applied snapshot and, while it finds
// a newer version (ErrConflict), over a fresh read of the store.
func (cm *clusterMode) retryConflict(ctx context.Context, write func(*clustermeta.Snapshot) error) error {
	snap := cm.snap.Load()
	for attempt := 0; ; attempt++ {
		err := write(snap)
		if !errors.Is(err, clustermeta.ErrConflict) || attempt+1 == storeRetries {
			return err
		}
		if snap, err = cm.store.Snapshot(ctx); err != nil {
			return err
		}
	}
}

// liveBrokers are the registered brokers, by node id.
func liveBrokers(snap *clustermeta.Snapshot) []clustermeta.BrokerInfo {
	out := make([]clustermeta.BrokerInfo, 0, len(snap.Brokers))
	for _, b := range snap.Brokers {
		out = append(out, b)
	}
	slices.SortFunc(out, func(a, b clustermeta.BrokerInfo) int { return int(a.NodeID) - int(b.NodeID) })
	return out
}

// place returns the replicas of count new partitions numbered from first.
func (cm *clusterMode) place(snap *clustermeta.Snapshot, topic string, first, count int32, pl placement) ([][]int32, error) {
	brokers := liveBrokers(snap)
	if pl.manual != nil {
		return pl.manual, checkManualAssignment(snap, pl.manual)
	}
	rf := pl.rf
	if rf == 0 {
		rf = cm.cfg.DefaultReplicationFactor
		if isInternalTopic(topic) {
			// Kafka refuses to create an internal topic on fewer brokers
			// than its replication factor; here it is created with as many
			// as there are (docs/cluster.md).
			rf = max(min(cm.cfg.InternalReplicationFactor, int16(len(brokers))), 1)
		}
	}
	if rf < 1 {
		return nil, fmt.Errorf("%w: Replication factor must be larger than 0, or -1 to use the default value.", errInvalidReplicas)
	}
	if int(rf) > len(brokers) {
		return nil, fmt.Errorf("%w: Unable to replicate the partition %d time(s): The target replication factor of %d cannot be reached because only %d broker(s) are registered.", errInvalidReplicas, rf, rf, len(brokers))
	}
	asg, err := controller.Assign(brokers, first, count, rf, mrand.IntN(len(brokers)))
	if errors.Is(err, controller.ErrNotEnoughBrokers) {
		return nil, fmt.Errorf("%w: %v", errInvalidReplicas, err)
	}
	return asg, err
}

// checkManualAssignment applies Kafka's controller's checks of a manual
// assignment.
func checkManualAssignment(snap *clustermeta.Snapshot, asg [][]int32) error {
	for i, reps := range asg {
		if len(reps) == 0 {
			return fmt.Errorf("%w: The manual partition assignment includes an empty replica list.", errInvalidReplicaAsg)
		}
		if i > 0 && len(reps) != len(asg[0]) {
			return fmt.Errorf("%w: The manual partition assignment includes a partition with %d replica(s), but this is not consistent with previous partitions, which have %d replica(s).", errInvalidReplicaAsg, len(reps), len(asg[0]))
		}
		for j, b := range reps {
			if slices.Contains(reps[:j], b) {
				return fmt.Errorf("%w: The manual partition assignment includes the broker %d more than once.", errInvalidReplicaAsg, b)
			}
			if _, ok := snap.Brokers[b]; !ok {
				return fmt.Errorf("%w: The manual partition assignment includes broker %d, but no such broker is registered.", errInvalidReplicaAsg, b)
			}
		}
	}
	return nil
}

// newStates are the first states of new partitions: every registered
// replica in sync, the first of them leading at epoch 0.
func newStates(snap *clustermeta.Snapshot, topic string, id [16]byte, first int32, asg [][]int32) []clustermeta.PartitionState {
	out := make([]clustermeta.PartitionState, len(asg))
	for i, reps := range asg {
		isr := make([]int32, 0, len(reps))
		for _, b := range reps {
			if _, ok := snap.Brokers[b]; ok {
				isr = append(isr, b)
			}
		}
		leader := clustermeta.NoLeader
		if len(isr) > 0 {
			leader = isr[0]
		}
		out[i] = clustermeta.PartitionState{Topic: topic, TopicID: id, Partition: first + int32(i),
			Replicas: slices.Clone(reps), ISR: isr, Leader: leader}
	}
	return out
}

// newClusterTopicID is a random topic id no topic of snap has.
func newClusterTopicID(snap *clustermeta.Snapshot) ([16]byte, error) {
	return randomTopicID(func(id [16]byte) bool { return topicWithID(snap, id) != "" })
}

func topicWithID(snap *clustermeta.Snapshot, id [16]byte) string {
	for n, rec := range snap.Topics {
		if rec.ID == id {
			return n
		}
	}
	return ""
}

func (cm *clusterMode) createTopic(name string, partitions int32, cfg *TopicConfig, validateOnly bool, want [16]byte, pl placement) (*Topic, error) {
	c := cm.s.cluster
	snap := cm.snap.Load()
	if _, ok := snap.Topics[name]; ok || c.topic(name) != nil {
		return nil, fmt.Errorf("%w: Topic '%s' already exists.", errTopicExists, name)
	}
	if coll := collidingTopic(c.snap.Load(), name); coll != "" {
		return nil, fmt.Errorf("%w: Topic '%s' collides with existing topic: %s", errInvalidTopic, name, coll)
	}
	if pl.manual != nil {
		partitions = int32(len(pl.manual))
	}
	if partitions < 1 {
		return nil, fmt.Errorf("%w: Number of partitions must be larger than 0.", errInvalidPartitions)
	}
	c.mu.Lock()
	err := c.checkPartitionLimitLocked(c.snap.Load(), int64(partitions))
	c.mu.Unlock()
	if err != nil {
		return nil, err
	}
	if other := topicWithID(snap, want); want != ([16]byte{}) && other != "" {
		return nil, fmt.Errorf("%w: Topic id %s is already used by topic '%s'.", errTopicExists, formatTopicID(want), other)
	}
	asg, err := cm.place(snap, name, 0, partitions, pl)
	if err != nil {
		return nil, err
	}
	id := want
	if id == ([16]byte{}) {
		if id, err = newClusterTopicID(snap); err != nil {
			return nil, err
		}
	}
	rec := clustermeta.TopicRecord{Name: name, ID: id, Partitions: partitions, Configs: cfg.Overrides()}
	states := newStates(snap, name, id, 0, asg)
	if validateOnly {
		t := cm.buildTopic(rec, states)
		t.cfg.Store(cfg)
		return t, nil
	}
	ctx, cancel := cm.writeCtx()
	defer cancel()
	rec, _, err = cm.store.CreateTopic(ctx, rec, states)
	switch {
	case errors.Is(err, clustermeta.ErrTopicExists):
		// Created meanwhile through another broker: once this one has it
		// too, the callers that create on first use (internal topics,
		// auto-creation) find it.
		cm.awaitSnapshot(ctx, func(s *clustermeta.Snapshot) bool { _, ok := s.Topics[name]; return ok })
		return nil, fmt.Errorf("%w: Topic '%s' already exists.", errTopicExists, name)
	case err != nil:
		return nil, storeErr("creating topic "+name, err)
	}
	if !cm.awaitRevision(ctx, rec.Version) {
		return nil, notSeenYet("creating topic " + name)
	}
	t := c.topic(name)
	if t == nil || t.ID != id {
		return nil, fmt.Errorf("%w: Topic '%s' was deleted while it was created.", errUnknownTopic, name)
	}
	return t, nil
}

func (cm *clusterMode) deleteTopic(t *Topic) error {
	if rec, ok := cm.snap.Load().Topics[t.Name]; !ok || rec.ID != t.ID {
		return fmt.Errorf("%w: This server does not host this topic-partition.", errUnknownTopic)
	}
	ctx, cancel := cm.writeCtx()
	defer cancel()
	err := cm.store.DeleteTopic(ctx, t.Name, t.ID)
	switch {
	case errors.Is(err, clustermeta.ErrNotFound):
		return fmt.Errorf("%w: This server does not host this topic-partition.", errUnknownTopic)
	case err != nil:
		return storeErr("deleting topic "+t.Name, err)
	}
	if !cm.awaitSnapshot(ctx, func(s *clustermeta.Snapshot) bool { rec, ok := s.Topics[t.Name]; return !ok || rec.ID != t.ID }) {
		return notSeenYet("deleting topic " + t.Name)
	}
	cm.s.forgetMirrorRecord(ctx, t) // mirror_state_cluster.go
	return nil
}

func (cm *clusterMode) addPartitions(t *Topic, count int32, validateOnly bool, manual [][]int32) error {
	op := "adding partitions to " + t.Name
	gone := fmt.Errorf("%w: This server does not host this topic-partition.", errUnknownTopic)
	return cm.updateTopic(op, t, gone, func(ctx context.Context, snap *clustermeta.Snapshot, rec clustermeta.TopicRecord) (int64, error) {
		states := snap.Partitions[t.Name]
		old := int32(len(states))
		switch {
		case count < old:
			return 0, fmt.Errorf("%w: Topic currently has %d partitions, which is higher than the requested %d.", errInvalidPartitions, old, count)
		case count == old:
			return 0, fmt.Errorf("%w: Topic already has %d partitions.", errInvalidPartitions, old)
		case manual != nil && int32(len(manual)) != count-old:
			return 0, fmt.Errorf("%w: Attempted to add %d additional partition(s), but only %d assignment(s) were specified.", errInvalidReplicaAsg, count-old, len(manual))
		}
		c := cm.s.cluster
		c.mu.Lock()
		err := c.checkPartitionLimitLocked(c.snap.Load(), int64(count-old))
		c.mu.Unlock()
		if err != nil {
			return 0, err
		}
		rf := cm.cfg.DefaultReplicationFactor
		if old > 0 {
			rf = int16(len(states[0].Replicas) - len(states[0].AddingReplicas))
		}
		asg, err := cm.place(snap, t.Name, old, count-old, placement{rf: rf, manual: manual})
		if err != nil || validateOnly {
			return 0, err
		}
		rec.Partitions = count
		rec, err = cm.store.AddPartitions(ctx, rec, newStates(snap, t.Name, t.ID, old, asg))
		return rec.Version, storeWriteErr(op, err)
	})
}

func (cm *clusterMode) setConfig(t *Topic, cfg *TopicConfig) error {
	op := "altering the config of " + t.Name
	gone := fmt.Errorf("%w: topic %s was deleted", errUnknownTopic, t.Name)
	return cm.updateTopic(op, t, gone, func(ctx context.Context, _ *clustermeta.Snapshot, rec clustermeta.TopicRecord) (int64, error) {
		rec.Configs = cfg.Overrides()
		rec, err := cm.store.UpdateTopic(ctx, rec)
		return rec.Version, storeWriteErr(op, err)
	})
}

// updateTopic runs write over t's current record (gone when t was
// deleted), again over a fresh read while it finds a newer version, and
// waits until this broker applied the revision it returns (0: nothing
// written, as for validate-only).
func (cm *clusterMode) updateTopic(op string, t *Topic, gone error, write func(context.Context, *clustermeta.Snapshot, clustermeta.TopicRecord) (int64, error)) error {
	ctx, cancel := cm.writeCtx()
	defer cancel()
	var rev int64
	err := cm.retryConflict(ctx, func(snap *clustermeta.Snapshot) error {
		rec, ok := snap.Topics[t.Name]
		if !ok || rec.ID != t.ID {
			return gone
		}
		var err error
		rev, err = write(ctx, snap, rec)
		return err
	})
	switch {
	case errors.Is(err, clustermeta.ErrNotFound):
		return gone
	case errors.Is(err, clustermeta.ErrConflict):
		return storeErr(op, err)
	case err != nil:
		return err
	}
	if rev != 0 && !cm.awaitRevision(ctx, rev) {
		return notSeenYet(op)
	}
	return nil
}

// storeWriteErr is storeErr for what retryConflict and updateTopic do not
// handle themselves (a conflict is retried, a missing record is the
// topic's deletion).
func storeWriteErr(op string, err error) error {
	if err == nil || errors.Is(err, clustermeta.ErrConflict) || errors.Is(err, clustermeta.ErrNotFound) {
		return err
	}
	return storeErr(op, err)
}

// raiseLeaderEpochs raises the leader epochs of partitions this broker
// leads (the mirror's epoch rule) with one compare-and-swap fenced by
// its registration; the epoch never decreases.
func (cm *clusterMode) raiseLeaderEpochs(ps []*Partition, epochs []int32) error {
	sess := cm.session.Load()
	if sess == nil {
		return kafkaErr(kerr.NotLeaderForPartition, "this broker is not registered in the cluster")
	}
	ctx, cancel := cm.writeCtx()
	defer cancel()
	var written []clustermeta.PartitionState
	// Held across the write: the reconciler recognises the raise as this
	// broker's own (mirror_cluster.go) only once it is recorded.
	cm.raises.mu.Lock()
	err := cm.retryConflict(ctx, func(snap *clustermeta.Snapshot) error {
		var states []clustermeta.PartitionState
		for i, p := range ps {
			st, ok := snap.Partition(p.Topic.Name, p.Index)
			if !ok || st.TopicID != p.Topic.ID {
				return kafkaErr(kerr.UnknownTopicOrPartition, "This server does not host this topic-partition.")
			}
			if epochs[i] <= st.LeaderEpoch {
				continue
			}
			if st.Leader != cm.nodeID {
				return kafkaErr(kerr.NotLeaderForPartition, fmt.Sprintf("broker %d does not lead %s", cm.nodeID, p.Dir()))
			}
			st.LeaderEpoch = epochs[i]
			st.PartitionEpoch++
			states = append(states, st)
		}
		if len(states) == 0 {
			return nil
		}
		var err error
		written, err = cm.store.CASPartitions(ctx, sess.Fence(), states)
		return err
	})
	if err == nil {
		cm.raises.recordLocked(written)
	}
	cm.raises.mu.Unlock()
	var ke *kafkaError
	switch {
	case errors.As(err, &ke):
		return err
	case err != nil:
		return storeErr("raising leader epochs", err)
	}
	var rev int64
	for _, st := range written {
		rev = max(rev, st.Version)
	}
	// The epochs are the store's now; raise them here at once too, as
	// the callers read them right after.
	for i, p := range ps {
		p.raiseLeaderEpoch(epochs[i])
	}
	if len(written) > 0 && !cm.awaitRevision(ctx, rev) {
		return notSeenYet("raising leader epochs")
	}
	return nil
}

// allocateProducerIDs reserves n producer ids in the cluster store.
func (cm *clusterMode) allocateProducerIDs(n int64) (int64, error) {
	ctx, cancel := cm.writeCtx()
	defer cancel()
	first, err := cm.store.AllocateProducerIDs(ctx, n)
	if err != nil {
		return -1, storeErr("allocating producer ids", err)
	}
	return first, nil
}

// publishTopic adds a topic built from the store to the local view.
func (c *cluster) publishTopic(t *Topic) {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := c.cloneSnap()
	n.byName[t.Name] = t
	n.byID[t.ID] = t
	c.snap.Store(n)
}

// unpublishTopic removes a topic the store deleted from the local view
// and marks it deleted.
func (c *cluster) unpublishTopic(t *Topic) {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := c.cloneSnap()
	if n.byName[t.Name] == t {
		delete(n.byName, t.Name)
	}
	if n.byID[t.ID] == t {
		delete(n.byID, t.ID)
	}
	c.snap.Store(n)
	t.deleted.Store(true)
}

// setPartitions publishes t's grown partition list.
func (c *cluster) setPartitions(t *Topic, parts []*Partition) {
	c.mu.Lock()
	defer c.mu.Unlock()
	t.parts.Store(&parts)
}

// raiseLeaderEpoch raises p's in-memory leader epoch to at least e.
func (p *Partition) raiseLeaderEpoch(e int32) {
	for {
		cur := p.leaderEpoch.Load()
		if e <= cur || p.leaderEpoch.CompareAndSwap(cur, e) {
			return
		}
	}
}

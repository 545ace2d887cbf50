package broker

// Cluster mode's membership and metadata (owner: the cluster-metadata
// work; see cluster_config.go for who owns what): joining the cluster
// (the registration and its loss), the watch of the store and the
// reconciliation of every snapshot into topics, partitions, hosted logs
// and roles. Open's side is cluster_mode_open.go, the topic admin through
// the store cluster_mode_admin.go, the describe APIs over the cluster
// cluster_mode_describe.go.
//
// One goroutine (run) applies the snapshots, in the store's order, so
// applyRole is never called concurrently for one partition. Admin writes
// wait (without any broker lock) until that goroutine has applied the
// write's revision, so the next request on this broker sees it.

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/verbatim-kafka/verbatim/clustermeta"
)

// clusterMode is a Server's cluster-mode state (Server.cm; nil on a
// single node).
type clusterMode struct {
	s      *Server
	cfg    ClusterConfig // defaults filled in (clusterDefaults)
	store  clustermeta.Store
	nodeID int32

	// snap is the latest snapshot the reconciler applied (at Open: the
	// one the topics were built from).
	snap atomic.Pointer[clustermeta.Snapshot]
	// session is the current registration (nil before JoinCluster and
	// while re-registering after a lost one).
	session atomic.Pointer[clustermeta.Session]

	mu struct {
		sync.Mutex
		// applied is closed and replaced after every snapshot applied
		// (awaitSnapshot waits on it).
		applied chan struct{}
		joined  bool
		stop    context.CancelFunc
		done    chan struct{}
	}

	// Reconciler-only (run's goroutine): forceRoles makes the next
	// snapshot apply the role of every hosted partition (the first one,
	// and the first after a re-registration); info is the registration.
	forceRoles bool
	info       clustermeta.BrokerInfo
	// sec is what the ACLs and SCRAM credentials were last loaded from
	// (cluster_security.go).
	sec securityState

	// raises are this broker's own leader-epoch raises not yet applied
	// (mirror_cluster.go).
	raises epochRaises
}

// clusterDefaults fills in ClusterConfig's defaults (Kafka's).
func clusterDefaults(c ClusterConfig) ClusterConfig {
	if c.DefaultReplicationFactor == 0 {
		c.DefaultReplicationFactor = 1
	}
	if c.InternalReplicationFactor == 0 {
		c.InternalReplicationFactor = 3
	}
	if c.MinInsyncReplicas == 0 {
		c.MinInsyncReplicas = 1
	}
	if c.ReplicaLagTimeMax == 0 {
		c.ReplicaLagTimeMax = 30 * time.Second
	}
	if c.SessionTimeout == 0 {
		c.SessionTimeout = 9 * time.Second
	}
	if c.NumReplicaFetchers == 0 {
		c.NumReplicaFetchers = 1
	}
	return c
}

func newClusterMode(s *Server, c ClusterConfig) *clusterMode {
	cm := &clusterMode{s: s, cfg: clusterDefaults(c), store: c.Store, nodeID: s.cfg.NodeID, forceRoles: true}
	cm.mu.applied = make(chan struct{})
	return cm
}

// JoinCluster registers this broker in the cluster store with the
// endpoints its listeners serve (after they are bound), then follows the
// store: every snapshot is reconciled into topics, partitions, hosted
// logs and roles until Shutdown (or ctx ends). Cluster mode only.
func (s *Server) JoinCluster(ctx context.Context, endpoints []clustermeta.Endpoint) error {
	cm := s.cm
	if cm == nil {
		return errors.New("broker: JoinCluster needs cluster mode (Config.Cluster)")
	}
	if len(endpoints) == 0 {
		return errors.New("broker: JoinCluster needs the broker's endpoints")
	}
	ibl := cm.cfg.InterBrokerListener
	if ibl == "" {
		ibl = endpoints[0].Listener
	}
	found := false
	for _, e := range endpoints {
		found = found || e.Listener == ibl
	}
	if !found {
		return fmt.Errorf("broker: inter.broker.listener.name %s is not among the endpoints", ibl)
	}
	var inc [16]byte
	if _, err := rand.Read(inc[:]); err != nil {
		return err
	}
	cm.mu.Lock()
	if cm.mu.joined {
		cm.mu.Unlock()
		return errors.New("broker: already joined the cluster")
	}
	cm.mu.joined = true
	cm.mu.Unlock()
	cm.info = clustermeta.BrokerInfo{
		NodeID: cm.nodeID, Rack: cm.cfg.Rack, Endpoints: slices.Clone(endpoints),
		InterBrokerListener: ibl, Incarnation: hex.EncodeToString(inc[:]),
	}
	sess, err := cm.register(ctx)
	if err != nil {
		cm.mu.Lock()
		cm.mu.joined = false
		cm.mu.Unlock()
		return fmt.Errorf("broker: registering node %d: %w", cm.nodeID, err)
	}
	cm.session.Store(sess)
	s.log.Info("joined the cluster", "node_id", cm.nodeID, "broker_epoch", sess.Info.Epoch, "cluster_id", cm.store.ClusterID())
	runCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	stop := context.AfterFunc(ctx, cancel)
	done := make(chan struct{})
	cm.mu.Lock()
	cm.mu.stop, cm.mu.done = func() { stop(); cancel() }, done
	cm.mu.Unlock()
	go func() {
		defer close(done)
		cm.run(runCtx)
	}()
	return nil
}

// register registers cm.info. While the node id is held by another
// registration (this node's previous process, killed less than a session
// timeout ago: its lease has not expired yet) it tries again until ctx
// ends, as a restarted Kafka broker waits for its old registration to go.
func (cm *clusterMode) register(ctx context.Context) (*clustermeta.Session, error) {
	backoff := 100 * time.Millisecond
	for tries := 0; ; tries++ {
		sess, err := cm.store.Register(ctx, cm.info, cm.ttlSeconds())
		if !errors.Is(err, clustermeta.ErrConflict) {
			return sess, err
		}
		level := slog.LevelDebug
		if tries == 0 {
			level = slog.LevelWarn
		}
		cm.s.log.Log(ctx, level, "node id still registered (a previous process's session has not expired yet); waiting for it to go", "node_id", cm.nodeID, "session_timeout", cm.cfg.SessionTimeout)
		if !sleepCtx(ctx, backoff) {
			return nil, fmt.Errorf("%w (%w)", err, ctx.Err())
		}
		backoff = min(2*backoff, time.Second)
	}
}

// ttlSeconds is the registration lease's TTL (broker.session.timeout.ms,
// at least a second: etcd's leases count whole seconds).
func (cm *clusterMode) ttlSeconds() int64 {
	return max(int64((cm.cfg.SessionTimeout+time.Second-1)/time.Second), 1)
}

// leaveCluster stops the reconciler and revokes the registration
// (Shutdown, before the logs close).
func (s *Server) leaveCluster(ctx context.Context) {
	cm := s.cm
	if cm == nil {
		return
	}
	cm.mu.Lock()
	stop, done := cm.mu.stop, cm.mu.done
	cm.mu.Unlock()
	if stop == nil {
		return
	}
	stop()
	<-done
	if sess := cm.session.Swap(nil); sess != nil {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		if err := sess.Close(cctx); err != nil {
			s.log.Warn("unregistering from the cluster", "err", err)
		}
	}
}

// run applies every snapshot of the store until ctx ends, and handles
// the loss of the registration.
func (cm *clusterMode) run(ctx context.Context) {
	watch := cm.store.Watch(ctx)
	for {
		var lost <-chan struct{}
		if sess := cm.session.Load(); sess != nil {
			lost = sess.Done()
		}
		select {
		case <-ctx.Done():
			return
		case snap, ok := <-watch:
			if !ok {
				if ctx.Err() != nil {
					return
				}
				// The store's watch ended under us: watch again.
				cm.s.log.Warn("cluster store watch ended; watching again")
				if !sleepCtx(ctx, time.Second) {
					return
				}
				watch = cm.store.Watch(ctx)
				continue
			}
			cm.apply(snap)
		case <-lost:
			cm.fenced(ctx)
		}
	}
}

// fenced handles a lost registration (the lease expired, for instance
// while the process was paused): the controller treats this broker as
// gone, so it stops leading and following at once (roles dropped: every
// hosted partition's role applied with no leader), registers again (a
// new, higher broker epoch) and resumes with the next snapshot, which
// applies every hosted partition's role anew.
func (cm *clusterMode) fenced(ctx context.Context) {
	old := cm.session.Swap(nil)
	epoch := int64(0)
	if old != nil {
		epoch = old.Info.Epoch
	}
	cm.s.log.Warn("cluster registration lost: fenced; dropping roles and registering again", "node_id", cm.nodeID, "broker_epoch", epoch)
	for _, t := range cm.s.cluster.topics() {
		for _, p := range t.Partitions() {
			st := p.cstate.Load()
			if st == nil || !hosts(st, cm.nodeID) {
				continue
			}
			dropped := *st
			dropped.Leader = clustermeta.NoLeader
			cm.s.applyRole(p, dropped)
		}
	}
	backoff := 100 * time.Millisecond
	for {
		sess, err := cm.register(ctx)
		if err == nil {
			cm.session.Store(sess)
			cm.forceRoles = true
			cm.s.log.Info("registered again after being fenced", "node_id", cm.nodeID, "broker_epoch", sess.Info.Epoch)
			return
		}
		cm.s.log.Warn("registering again", "node_id", cm.nodeID, "err", err, "retry_in", backoff)
		if !sleepCtx(ctx, backoff) {
			return
		}
		backoff = min(2*backoff, 2*time.Second)
	}
}

func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// hosts reports whether node is one of st's replicas.
func hosts(st *clustermeta.PartitionState, node int32) bool {
	return slices.Contains(st.Replicas, node)
}

// apply reconciles one snapshot: deleted (or re-created) topics leave,
// new topics and partitions arrive (the logs of the hosted replicas
// opened before they are published), config changes are applied to the
// topic and its logs, and every hosted partition whose state changed gets
// its role applied, in partition order.
func (cm *clusterMode) apply(snap *clustermeta.Snapshot) {
	s, c := cm.s, cm.s.cluster
	force := cm.forceRoles
	cm.forceRoles = false
	for _, t := range c.topics() {
		if rec, ok := snap.Topics[t.Name]; !ok || rec.ID != t.ID {
			cm.dropTopic(t)
		}
	}
	for _, name := range slices.Sorted(maps.Keys(snap.Topics)) {
		rec, states := snap.Topics[name], snap.Partitions[name]
		t := c.topic(name)
		if t == nil {
			t = cm.buildTopic(rec, states)
			for _, p := range t.Partitions() {
				cm.openHosted(p)
			}
			c.publishTopic(t)
			cm.applyHostedRoles(t.Partitions())
			s.log.Info("topic arrived from the cluster", "topic", name, "partitions", len(states))
			continue
		}
		cm.applyConfig(t, rec)
		old := t.Partitions()
		if len(states) > len(old) {
			parts := slices.Clone(old)
			for i := len(old); i < len(states); i++ {
				p := newClusterPartition(t, int32(i), states[i])
				cm.openHosted(p)
				parts = append(parts, p)
			}
			c.setPartitions(t, parts)
			cm.applyHostedRoles(parts[len(old):])
		}
		for i, p := range old {
			if i >= len(states) {
				break
			}
			st := states[i]
			prev := p.cstate.Load()
			if !force && prev != nil && prev.Version == st.Version {
				continue
			}
			p.cstate.Store(&st)
			p.raiseLeaderEpoch(st.LeaderEpoch)
			wasHosted := prev != nil && hosts(prev, cm.nodeID)
			if !hosts(&st, cm.nodeID) {
				if wasHosted || p.Log != nil {
					cm.removeMovedReplica(p, st) // cluster_mode_reassign.go
				}
				continue
			}
			if !wasHosted && p.Log == nil {
				p = cm.addedReplica(p, st) // cluster_mode_reassign.go
			}
			cm.openHosted(p)
			s.applyRole(p, st)
		}
	}
	cm.applySecurity(snap)
	cm.snap.Store(snap)
	s.mirrorStopsAfterSnapshot(snap)  // mirror_stop_cluster.go; does not block
	s.sourceStartsAfterSnapshot(snap) // mirror_start_epoch_cluster.go
	cm.mu.Lock()
	close(cm.mu.applied)
	cm.mu.applied = make(chan struct{})
	cm.mu.Unlock()
}

// applyHostedRoles applies the role of the new partitions this broker
// hosts.
func (cm *clusterMode) applyHostedRoles(parts []*Partition) {
	for _, p := range parts {
		if st := p.cstate.Load(); hosts(st, cm.nodeID) {
			cm.s.applyRole(p, *st)
		}
	}
}

// buildTopic makes the local Topic of a topic record and its partition
// states (not published, no log opened).
func (cm *clusterMode) buildTopic(rec clustermeta.TopicRecord, states []clustermeta.PartitionState) *Topic {
	t := &Topic{Name: rec.Name, ID: rec.ID}
	t.cfg.Store(cm.topicConfig(rec))
	parts := make([]*Partition, len(states))
	for i := range states {
		parts[i] = newClusterPartition(t, int32(i), states[i])
	}
	t.parts.Store(&parts)
	return t
}

func newClusterPartition(t *Topic, i int32, st clustermeta.PartitionState) *Partition {
	p := &Partition{Topic: t, Index: i}
	p.cstate.Store(&st)
	p.leaderEpoch.Store(st.LeaderEpoch)
	return p
}

// topicConfig is the effective config of a topic record's overrides over
// the broker's defaults. Overrides this build refuses (written by a newer
// one) are logged and left out, rather than leaving the topic unserved.
func (cm *clusterMode) topicConfig(rec clustermeta.TopicRecord) *TopicConfig {
	cfg, err := cm.s.topicConfig(rec.Configs)
	if err == nil {
		return cfg
	}
	kept := map[string]string{}
	for k, v := range rec.Configs {
		if _, err := cm.s.topicConfig(map[string]string{k: v}); err == nil {
			kept[k] = v
		} else {
			cm.s.log.Error("topic config override from the cluster store not applied", "topic", rec.Name, "config", k, "err", err)
		}
	}
	if cfg, err = cm.s.topicConfig(kept); err != nil {
		cfg, _ = cm.s.topicConfig(nil)
	}
	return cfg
}

// applyConfig replaces t's config when the record's overrides changed,
// and pushes it into its open logs.
func (cm *clusterMode) applyConfig(t *Topic, rec clustermeta.TopicRecord) {
	if maps.Equal(t.Config().Overrides(), rec.Configs) {
		return
	}
	t.cfg.Store(cm.topicConfig(rec))
	cm.s.reconfigureLogs(t)
}

// openHosted opens p's log if this broker hosts a replica of it and the
// log is not open yet (a failure leaves it offline, as on a single node).
func (cm *clusterMode) openHosted(p *Partition) {
	st := p.cstate.Load()
	if st == nil || !hosts(st, cm.nodeID) || p.Log != nil {
		return
	}
	if err := cm.s.openPartitionLog(p); err != nil {
		cm.s.log.Error("partition offline: its log does not open", "topic", p.Topic.Name, "partition", p.Index, "err", err)
	}
}

// dropTopic removes a topic the store no longer has (deleted, or deleted
// and created again under a new id): its hosted replicas' roles are
// dropped (applyRole with no replica here: the fetchers stop appending),
// then it is unpublished and its logs closed and removed.
func (cm *clusterMode) dropTopic(t *Topic) {
	s := cm.s
	for _, p := range t.Partitions() {
		st := p.cstate.Load()
		if st == nil || !hosts(st, cm.nodeID) {
			continue
		}
		gone := clustermeta.PartitionState{Topic: st.Topic, TopicID: st.TopicID, Partition: st.Partition,
			Leader: clustermeta.NoLeader, LeaderEpoch: st.LeaderEpoch, PartitionEpoch: st.PartitionEpoch, Version: st.Version}
		s.applyRole(p, gone)
	}
	s.cluster.unpublishTopic(t)
	s.cluster.removeTopicFiles(t)
	s.metrics.DropTopic(t.Name)
	s.log.Info("topic deleted from the cluster", "topic", t.Name)
}

// clusterSnapshot is the latest snapshot of the cluster store the
// reconciler applied (nil on a single node).
func (s *Server) clusterSnapshot() *clustermeta.Snapshot {
	if s.cm == nil {
		return nil
	}
	return s.cm.snap.Load()
}

// brokerEpoch is this broker's registration epoch (0 before it joined and
// while it registers again after being fenced).
func (s *Server) brokerEpoch() int64 {
	if s.cm == nil {
		return 0
	}
	if sess := s.cm.session.Load(); sess != nil {
		return sess.Info.Epoch
	}
	return 0
}

// clusterSession is the current registration (nil: none), whose Fence
// fences a leader's ISR writes.
func (s *Server) clusterSession() *clustermeta.Session {
	if s.cm == nil {
		return nil
	}
	return s.cm.session.Load()
}

// awaitSnapshot waits until the reconciler has applied a snapshot for
// which done holds (a write's revision reached, a topic gone), at most
// until ctx ends; it reports whether done held.
func (cm *clusterMode) awaitSnapshot(ctx context.Context, done func(*clustermeta.Snapshot) bool) bool {
	for {
		cm.mu.Lock()
		ch := cm.mu.applied
		cm.mu.Unlock()
		if snap := cm.snap.Load(); snap != nil && done(snap) {
			return true
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return false
		}
	}
}

// awaitRevision waits until the applied snapshot has revision rev.
func (cm *clusterMode) awaitRevision(ctx context.Context, rev int64) bool {
	return cm.awaitSnapshot(ctx, func(s *clustermeta.Snapshot) bool { return s.Revision >= rev })
}

package broker

// The leader side of replication (owner: the replication work; see
// cluster_config.go).
//
// Kafka's rules (Partition.scala), as the leader of a partition applies
// them here:
//   - Every follower fetch (replica id >= 0) records the follower's log
//     end (its fetch offset) and when it last caught up: at the leader's
//     log end now, or at least at the log end of its previous fetch (then
//     it was caught up at that fetch's time).
//   - The high watermark is the least log end of the ISR, the leader's
//     own included, over the "maximal" ISR while a change is in flight
//     (the old and the proposed members); it never goes back on a leader.
//   - A follower outside the ISR joins it once its log end reaches the
//     high watermark and the start of the current leader epoch, unless it
//     is not registered or shutting down (KIP-841); an ISR
//     member that has not caught up for replica.lag.time.max.ms leaves it
//     (checked every half of it). A follower whose log end equals the
//     leader's is caught up whatever the time (an idle partition keeps
//     its ISR). Both changes are one compare-and-swap of the partition's
//     state in the store, fenced by this broker's session, and take effect
//     when the store confirms them: a leader whose session is gone cannot
//     change the ISR.
//   - acks=all needs |ISR| >= min.insync.replicas before the append
//     (NOT_ENOUGH_REPLICAS) and completes when the high watermark passes
//     the append's end: then NOT_ENOUGH_REPLICAS_AFTER_APPEND when the ISR
//     shrank below the minimum meanwhile; REQUEST_TIMED_OUT after the
//     request's timeout; NOT_LEADER_OR_FOLLOWER when the leadership ended.
//
// Lock order: leaderState.mu is a leaf (no other lock is taken under it).

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/verbatim-kafka/verbatim/clustermeta"
)

// leaderState is a leader's view of its partition's replication.
type leaderState struct {
	s     *Server
	p     *Partition
	h     *logHandle // nil when the log is offline
	epoch int32
	// epochStart is the log end when this leader epoch began: a follower
	// joins the ISR only once it has everything of the older epochs.
	epochStart int64

	mu sync.Mutex
	// st is the partition's state as the store last confirmed it.
	st        clustermeta.PartitionState
	followers map[int32]*followerProgress
	// pending is the ISR of a change in flight (nil: none).
	pending []int32
	// changed is closed (and replaced) whenever the high watermark
	// advances, the ISR changes or the leadership ends.
	changed  chan struct{}
	resigned bool

	// appendMu is held shared by every produce append while it is
	// written, and exclusively by resign; ended is set under it.
	appendMu sync.RWMutex
	ended    atomic.Bool
}

// followerProgress is what the leader knows of one follower.
type followerProgress struct {
	leo                int64 // -1: not fetched in this epoch yet
	caughtUp           time.Time
	lastFetch          time.Time
	lastFetchLeaderLEO int64
	// logStart is the follower's log start as its last fetch sent it
	// (-1: not fetched in this epoch, or not sent), for the low
	// watermark (replica_logstart.go).
	logStart int64
}

func newLeaderState(s *Server, p *Partition, st clustermeta.PartitionState) *leaderState {
	ls := &leaderState{s: s, p: p, epoch: st.LeaderEpoch, st: st, followers: make(map[int32]*followerProgress), changed: make(chan struct{})}
	if h, err := partitionHandle(p); err == nil {
		ls.h = h
		ls.epochStart = h.log.LogEndOffset()
	}
	now := s.repl.clock()
	ls.syncFollowersLocked(now)
	ls.advanceLocked()
	return ls
}

// syncFollowersLocked keeps one progress per follower of the assignment;
// a new one in the ISR counts as caught up now (Kafka's leader election
// resets its followers the same way).
func (ls *leaderState) syncFollowersLocked(now time.Time) {
	self := ls.s.cfg.NodeID
	for _, r := range ls.st.Replicas {
		if r == self || ls.followers[r] != nil {
			continue
		}
		f := &followerProgress{leo: -1, lastFetch: now, lastFetchLeaderLEO: ls.epochStart, logStart: -1}
		if slices.Contains(ls.st.ISR, r) {
			f.caughtUp = now
		}
		ls.followers[r] = f
	}
	for r := range ls.followers {
		if !slices.Contains(ls.st.Replicas, r) {
			delete(ls.followers, r)
		}
	}
}

// update takes a newer state of the partition under the same leader
// epoch (an ISR change, a reassignment).
func (ls *leaderState) update(st clustermeta.PartitionState) {
	ls.mu.Lock()
	if st.PartitionEpoch < ls.st.PartitionEpoch || ls.resigned {
		ls.mu.Unlock()
		return
	}
	ls.adoptLocked(st)
	ls.settleAndUnlock()
}

// adoptLocked takes st as the state the store confirmed.
func (ls *leaderState) adoptLocked(st clustermeta.PartitionState) {
	ls.st = st
	ls.syncFollowersLocked(ls.s.repl.clock())
}

// settleAndUnlock follows a state change: the high watermark may move and
// the waiters look again; it releases ls.mu and wakes the long polls when
// the high watermark moved.
func (ls *leaderState) settleAndUnlock() {
	advanced := ls.advanceLocked()
	ls.broadcastLocked()
	ls.mu.Unlock()
	if advanced {
		ls.p.wakeWaiters()
	}
}

// resign ends the leadership: appends not yet written are refused, the
// ones being written finish first (so a follower's fetcher, started after
// resign, is the log's only writer), waiters answer NOT_LEADER_OR_FOLLOWER.
func (ls *leaderState) resign() {
	ls.appendMu.Lock()
	ls.ended.Store(true)
	ls.appendMu.Unlock()
	ls.mu.Lock()
	if !ls.resigned {
		ls.resigned = true
		close(ls.changed)
	}
	ls.mu.Unlock()
}

func (ls *leaderState) broadcastLocked() {
	if ls.resigned {
		return
	}
	close(ls.changed)
	ls.changed = make(chan struct{})
}

// inMaximalISR reports whether r counts for the high watermark.
func (ls *leaderState) inMaximalISRLocked(r int32) bool {
	return slices.Contains(ls.st.ISR, r) || slices.Contains(ls.pending, r)
}

// advanceLocked raises the high watermark to the least log end of the
// maximal ISR and reports whether it moved.
func (ls *leaderState) advanceLocked() bool {
	if ls.h == nil || ls.resigned {
		return false
	}
	hw := ls.h.log.LogEndOffset()
	for r, f := range ls.followers {
		if f.leo < hw && ls.inMaximalISRLocked(r) {
			hw = f.leo
		}
	}
	// (A member that has not fetched in this epoch has log end -1 and
	// holds it too.) An ISR member that is not an assigned replica holds
	// the high watermark where it is until the ISR drops it.
	for _, r := range ls.st.ISR {
		if r != ls.s.cfg.NodeID && ls.followers[r] == nil {
			return false
		}
	}
	if hw <= ls.h.hw.Load() {
		return false
	}
	ls.h.hw.Store(hw)
	ls.broadcastLocked()
	return true
}

// appended is called after every append to the led partition: with a
// single in-sync replica the high watermark follows the log end at once.
func (ls *leaderState) appended() {
	ls.mu.Lock()
	ls.advanceLocked()
	ls.mu.Unlock()
}

// followerFetched records a follower's fetch at offset (its log end) with
// its log start logStart, and advances the high watermark and the ISR
// accordingly (and wakes DeleteRecords' waits when the log start moved:
// replica_logstart.go). A fetch from a
// broker that is not a replica, or with a stale broker epoch, is
// NOT_LEADER_OR_FOLLOWER, as Kafka answers both.
func (ls *leaderState) followerFetched(id int32, brokerEpoch, offset, logStart int64) error {
	if ls.h == nil {
		return nil // the read answers the offline log
	}
	eligible := true // may join the ISR: registered, not shutting down (KIP-841)
	if snap := ls.s.clusterSnapshot(); snap != nil {
		b, ok := snap.Brokers[id]
		if ok && brokerEpoch >= 0 && b.Epoch > brokerEpoch {
			return errNotLeader(ls.p, fmt.Sprintf("fetch from broker %d with stale broker epoch %d (registered %d)", id, brokerEpoch, b.Epoch))
		}
		eligible = ok && !b.ShuttingDown
	}
	now := ls.s.repl.clock()
	leo := ls.h.log.LogEndOffset()
	ls.mu.Lock()
	f := ls.followers[id]
	switch {
	case ls.resigned:
		ls.mu.Unlock()
		return errNotLeader(ls.p, "the leadership ended")
	case f == nil:
		ls.mu.Unlock()
		return errNotLeader(ls.p, fmt.Sprintf("broker %d is not one of its replicas %v", id, ls.st.Replicas))
	case offset > leo:
		ls.mu.Unlock()
		return nil // the read answers OFFSET_OUT_OF_RANGE
	}
	if offset >= leo {
		f.caughtUp = maxTime(f.caughtUp, now)
	} else if offset >= f.lastFetchLeaderLEO {
		f.caughtUp = maxTime(f.caughtUp, f.lastFetch)
	}
	f.leo, f.lastFetchLeaderLEO, f.lastFetch = offset, leo, now
	advanced := ls.advanceLocked()
	if f.logStart != logStart {
		f.logStart = logStart
		if !advanced { // (advanceLocked broadcast already)
			ls.broadcastLocked()
		}
	}
	var next *clustermeta.PartitionState
	if eligible && !ls.inMaximalISRLocked(id) && ls.pending == nil && offset >= ls.h.hw.Load() && offset >= ls.epochStart {
		next = ls.proposeLocked(append(slices.Clone(ls.st.ISR), id))
	}
	ls.mu.Unlock()
	if advanced {
		ls.p.wakeWaiters()
	}
	if next != nil {
		go ls.alterISR(*next, "expand")
	}
	return nil
}

// admitAppend admits a produce append at the moment it is written (the
// produce guard's Begin), appendDone releases it (End).
func (ls *leaderState) admitAppend() error {
	ls.appendMu.RLock()
	if ls.ended.Load() {
		ls.appendMu.RUnlock()
		return errNotLeader(ls.p, "the leadership ended before the append was written")
	}
	return nil
}

func (ls *leaderState) appendDone() { ls.appendMu.RUnlock() }

func maxTime(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// checkLag takes the followers that have not caught up for
// replica.lag.time.max.ms out of the ISR.
func (ls *leaderState) checkLag(now time.Time) {
	if ls.h == nil {
		return
	}
	lagMax := ls.s.replicaLagTimeMax()
	leo := ls.h.log.LogEndOffset()
	ls.mu.Lock()
	if ls.resigned || ls.pending != nil {
		ls.mu.Unlock()
		return
	}
	var next []int32
	shrink := false
	for _, r := range ls.st.ISR {
		f := ls.followers[r]
		if r != ls.s.cfg.NodeID && (f == nil || f.leo != leo && now.Sub(f.caughtUp) > lagMax) {
			shrink = true
			continue
		}
		next = append(next, r)
	}
	var st *clustermeta.PartitionState
	if shrink {
		if next == nil {
			next = []int32{}
		}
		st = ls.proposeLocked(next)
	}
	ls.mu.Unlock()
	if st != nil {
		ls.alterISR(*st, "shrink")
	}
}

// proposeLocked marks the ISR isr in flight and returns the state to
// write: the confirmed one with isr, its partition epoch raised.
func (ls *leaderState) proposeLocked(isr []int32) *clustermeta.PartitionState {
	ls.pending = isr
	st := ls.st
	st.ISR = isr
	st.PartitionEpoch++
	return &st
}

// alterISR writes the ISR next (Kafka's AlterPartition, here a
// compare-and-swap fenced by the broker's session) and adopts it once the
// store confirmed it. A conflict (the controller changed the partition)
// leaves the change to the next decision on the newer state.
func (ls *leaderState) alterISR(st clustermeta.PartitionState, why string) {
	next := st.ISR
	err := errNoSession
	var got []clustermeta.PartitionState
	if fence, ok := ls.s.isrFence(); ok {
		ctx, cancel := context.WithTimeout(ls.s.baseCtx, isrWriteTimeout)
		got, err = ls.s.cfg.Cluster.Store.CASPartitions(ctx, fence, []clustermeta.PartitionState{st})
		cancel()
	}
	ls.mu.Lock()
	ls.pending = nil
	adopted := err == nil && len(got) == 1 && !ls.resigned && got[0].PartitionEpoch >= ls.st.PartitionEpoch
	if adopted {
		ls.adoptLocked(got[0])
	}
	ls.settleAndUnlock()
	if adopted {
		ls.s.log.Info("ISR "+why, "topic", ls.p.Topic.Name, "partition", ls.p.Index, "leader_epoch", st.LeaderEpoch, "isr", next, "partition_epoch", st.PartitionEpoch)
	} else {
		ls.s.log.Info("ISR "+why+" not written", "topic", ls.p.Topic.Name, "partition", ls.p.Index, "isr", next, "err", err)
	}
}

// isrFence is what fences the leader's ISR writes: the broker's session
// (false before it registered).
func (s *Server) isrFence() (clustermeta.Fence, bool) {
	if f := s.repl.fence.Load(); f != nil {
		return *f, true
	}
	if sess := s.clusterSession(); sess != nil {
		return sess.Fence(), true
	}
	return clustermeta.Fence{}, false
}

// isrWriteTimeout bounds one ISR write to the store.
const isrWriteTimeout = 10 * time.Second

var errNoSession = fmt.Errorf("broker: not registered in the cluster store")

// isr is the confirmed ISR.
func (ls *leaderState) isr() []int32 {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	return slices.Clone(ls.st.ISR)
}

// checkMinISR refuses an acks=all write while the ISR is smaller than
// min.insync.replicas (NOT_ENOUGH_REPLICAS, nothing appended).
func (ls *leaderState) checkMinISR() error {
	minISR := ls.s.minInsyncReplicas(ls.p)
	ls.mu.Lock()
	n := len(ls.st.ISR)
	ls.mu.Unlock()
	if n < minISR {
		return kafkaErr(kerr.NotEnoughReplicas, fmt.Sprintf("The size of the current ISR %d is insufficient to satisfy the min.isr requirement of %d for partition %s", n, minISR, ls.p.Dir()))
	}
	return nil
}

// awaitHW waits until the high watermark reaches end (see the rules
// above); a zero deadline waits as long as ctx.
func (ls *leaderState) awaitHW(ctx context.Context, end int64, deadline time.Time) error {
	minISR := ls.s.minInsyncReplicas(ls.p)
	var timeout <-chan time.Time
	for {
		ls.mu.Lock()
		resigned, ch, n := ls.resigned, ls.changed, len(ls.st.ISR)
		var hw int64
		if ls.h != nil {
			hw = ls.h.hw.Load()
		}
		ls.mu.Unlock()
		switch {
		case resigned:
			return errNotLeader(ls.p, "the leadership ended before the records were replicated")
		case ls.h == nil:
			return fmt.Errorf("%w: %s: %v", errStorage, ls.p.Dir(), errNoLog)
		case hw >= end && n < minISR:
			return kafkaErr(kerr.NotEnoughReplicasAfterAppend, fmt.Sprintf("the records of %s were replicated to %d in-sync replicas, fewer than min.insync.replicas %d", ls.p.Dir(), n, minISR))
		case hw >= end:
			return nil
		}
		if timeout == nil && !deadline.IsZero() {
			t := time.NewTimer(time.Until(deadline))
			defer t.Stop()
			timeout = t.C
		}
		select {
		case <-ch:
		case <-timeout:
			return kafkaErr(kerr.RequestTimedOut, fmt.Sprintf("the records of %s were not replicated to the ISR within the request's timeout", ls.p.Dir()))
		case <-ctx.Done():
			return kafkaErr(kerr.RequestTimedOut, "the broker is shutting down")
		}
	}
}

// awaitReplicated returns once p's high watermark reaches end (everything
// below end is on every in-sync replica), or an error: the broker is no
// longer p's leader (NOT_LEADER_OR_FOLLOWER), the ISR shrank below
// min.insync.replicas (NOT_ENOUGH_REPLICAS_AFTER_APPEND), the broker shuts
// down. On a single node it returns at once. The coordinators' appends use
// it (they are acks=all writes, as Kafka's).
func (s *Server) awaitReplicated(p *Partition, end int64) error {
	if s.cfg.Cluster == nil {
		return nil
	}
	rs := p.repl.Load()
	if rs == nil || !rs.leader {
		return errNotLeader(p, "not led by this broker")
	}
	return rs.lead.awaitHW(s.baseCtx, end, time.Time{})
}

// minInsyncReplicas is p's min.insync.replicas: the topic's override, the
// broker's topic default, else ClusterConfig.MinInsyncReplicas.
func (s *Server) minInsyncReplicas(p *Partition) int {
	tc := p.Topic.Config()
	const key = "min.insync.replicas"
	_, over := tc.overrides[key]
	_, def := s.cfg.TopicDefaults[key]
	if !over && !def && s.cfg.Cluster != nil && s.cfg.Cluster.MinInsyncReplicas > 0 {
		return s.cfg.Cluster.MinInsyncReplicas
	}
	return int(tc.MinInsyncReplicas)
}

// replicaLagTimeMax is replica.lag.time.max.ms (Kafka's 30 s default).
func (s *Server) replicaLagTimeMax() time.Duration {
	if c := s.cfg.Cluster; c != nil && c.ReplicaLagTimeMax > 0 {
		return c.ReplicaLagTimeMax
	}
	return 30 * time.Second
}

// checkISRLag is one round of the ISR shrink check over every led
// partition.
func (s *Server) checkISRLag() {
	now := s.repl.clock()
	for _, t := range s.cluster.topics() {
		for _, p := range t.Partitions() {
			if rs := p.repl.Load(); rs != nil && rs.leader {
				rs.lead.checkLag(now)
			}
		}
	}
}

// countLed counts the partitions this broker leads for which cond holds
// of their confirmed ISR's and assignment's sizes (read at scrape).
func (s *Server) countLed(cond func(ls *leaderState, isr, replicas int) bool) int {
	n := 0
	for _, t := range s.cluster.topics() {
		for _, p := range t.Partitions() {
			rs := p.repl.Load()
			if rs == nil || !rs.leader {
				continue
			}
			ls := rs.lead
			ls.mu.Lock()
			isr, replicas := len(ls.st.ISR), len(ls.st.Replicas)
			ls.mu.Unlock()
			if cond(ls, isr, replicas) {
				n++
			}
		}
	}
	return n
}

// startReplication runs the cluster mode's periodic replication work
// until ctx ends: the ISR shrink check every half replica.lag.time.max.ms
// and the high-watermark checkpoint (replica_checkpoint.go).
func (s *Server) startReplication(ctx context.Context) {
	if s.cfg.Cluster == nil {
		return
	}
	s.metrics.GaugeFunc("kafka_server_replicamanager_underreplicatedpartitions",
		"Partitions this broker leads whose ISR is smaller than their replica set (Kafka's ReplicaManager UnderReplicatedPartitions).",
		func() float64 {
			return float64(s.countLed(func(ls *leaderState, isr, replicas int) bool { return isr < replicas }))
		})
	s.metrics.GaugeFunc("kafka_server_replicamanager_underminisrpartitioncount",
		"Partitions this broker leads whose ISR is smaller than min.insync.replicas (Kafka's ReplicaManager UnderMinIsrPartitionCount).",
		func() float64 {
			return float64(s.countLed(func(ls *leaderState, isr, _ int) bool { return isr < s.minInsyncReplicas(ls.p) }))
		})
	go every(ctx, s.replicaLagTimeMax()/2, s.checkISRLag)
	go every(ctx, hwCheckpointInterval, func() {
		if err := s.writeHWCheckpoint(); err != nil {
			s.log.Warn("high-watermark checkpoint not written", "err", err)
		}
	})
}

// produceLeaderCheck is Produce's check in cluster mode: the leader takes
// the write; acks=all needs min.insync.replicas in the ISR.
func (s *Server) produceLeaderCheck(p *Partition, acks int16) (*leaderState, error) {
	rs, err := s.leaderCheck(p, -1)
	if err != nil {
		return nil, err
	}
	if acks == -1 {
		if err := rs.lead.checkMinISR(); err != nil {
			return nil, err
		}
	}
	return rs.lead, nil
}

// awaitISR is an acks=all produce's wait for its append to reach the high
// watermark, bounded by the request's timeout (cluster mode).
func (op *produceOp) awaitISR(ctx context.Context, pa *pendingAppend) error {
	rs := pa.p.repl.Load()
	if rs == nil {
		return nil
	}
	if !rs.leader {
		return errNotLeader(pa.p, "the leadership moved before the records were replicated")
	}
	deadline := time.UnixMilli(op.startMs + int64(max(op.timeoutMs, 0)))
	return rs.lead.awaitHW(ctx, pa.a.Result.LastOffset+1, deadline)
}

// fetchLeaderCheck is Fetch's check in cluster mode: consumers and
// followers fetch from the leader (no KIP-392 yet); a follower's fetch
// records its progress (the leader's *leaderState is returned for it,
// nil for a consumer).
func (s *Server) fetchLeaderCheck(p *Partition, currentEpoch, replicaID int32, replicaEpoch, offset, logStart int64) (*leaderState, error) {
	rs, err := s.leaderCheck(p, currentEpoch)
	if err != nil || replicaID < 0 {
		return nil, err
	}
	if err := rs.lead.followerFetched(replicaID, replicaEpoch, offset, logStart); err != nil {
		return nil, err
	}
	return rs.lead, nil
}

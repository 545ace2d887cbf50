package broker

// Mirror stop in cluster mode (docs/cluster.md "Mirror topics in a
// cluster"). The stop is one decision in the cluster store: the DELETE of
// mirror.mode turns the topic's mirror record "stopping" (a
// compare-and-swap, mirror_state_cluster.go: of two stops one decides,
// the other finds it decided). Each partition's leader then carries out
// the partition's steps (mirror_stop.go: the stop point, the leader epoch
// above every mirrored one, ABORT markers, the MIRROR_PID_RESET barrier)
// on its own log, waits until every in-sync replica has them (the high
// watermark reaches the barrier) and records the partition "stopped";
// once every partition is, the leader of partition 0 writes the topic's
// config without mirror.* and records the topic "stopped". Every broker
// looks at the stopping topics after each snapshot it applies, so a new
// leader finishes what a failed one began:
//
//   - a stop point the old leader recorded above the new leader's log
//     end (its last appends never reached this replica) is recorded again
//     at the new log end, so the stop point is on every replica;
//   - the barrier is written only when none follows the stop point, so
//     one the old leader wrote and replicated is not written twice;
//   - a partition is recorded stopped only with its barrier replicated,
//     so a leader change after that cannot lose it.
//
// The broker that received the DELETE answers once the record says
// "stopped" (REQUEST_TIMED_OUT after the request timeout; the stop goes
// on and a repeated DELETE waits for it again).

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/verbatim-kafka/verbatim/clustermeta"
	"github.com/verbatim-kafka/verbatim/kbatch"
)

// clusterStops tracks the stop runners of this broker, one per topic.
type clusterStops struct {
	// running: the topic's runner runs; again: it was kicked meanwhile
	// and makes another pass before it ends (no snapshot is missed).
	running, again map[[16]byte]bool
}

// stopMirrorCluster decides t's stop in the store and waits for it.
func (s *Server) stopMirrorCluster(t *Topic, target map[string]string, sourceID string) error {
	began := false
	err := s.updateMirrorState(t, func(st *mirrorTopicState) error {
		if st.State != mirrorStateMirroring {
			return nil // decided already (here or on another broker)
		}
		st.State, st.SourceClusterID, st.TargetConfigs = mirrorStateStopping, sourceID, target
		began = true
		return nil
	})
	if err != nil {
		return err
	}
	if began {
		s.log.Info("mirror stop begins (cluster): each partition's leader stops it", "topic", t.Name, "source_cluster_id", sourceID)
	}
	s.kickMirrorStop(t)
	return s.awaitClusterStop(t)
}

// awaitClusterStop waits until t's mirror record says "stopped".
func (s *Server) awaitClusterStop(t *Topic) error {
	ctx, cancel := context.WithTimeout(s.ctxOrBackground(), max(s.cfg.RequestTimeout, 10*time.Second))
	defer cancel()
	name := s.mirrorRecordName(t.ID)
	ok := s.cm.awaitSnapshot(ctx, func(snap *clustermeta.Snapshot) bool {
		rec, ok := snap.Record(mirrorRecordKind, name)
		return ok && recordState(rec.Value) == mirrorStateStopped
	})
	if !ok {
		return kafkaErr(kerr.RequestTimedOut, fmt.Sprintf("the mirror stop of %s is not complete yet (every partition's leader stops its partition); it goes on, and a repeated DELETE of mirror.mode waits for it again", t.Name))
	}
	return nil
}

func (s *Server) ctxOrBackground() context.Context {
	if s.baseCtx != nil {
		return s.baseCtx
	}
	return context.Background()
}

func (s *Server) mirrorRecordName(id [16]byte) string {
	s.mirror.mu.Lock()
	defer s.mirror.mu.Unlock()
	return s.mirror.recordName(id)
}

// recordState is a mirror record's state without decoding the rest.
func recordState(v []byte) string {
	var st struct {
		State string `json:"state"`
	}
	if json.Unmarshal(v, &st) != nil {
		return ""
	}
	return st.State
}

// mirrorStopsAfterSnapshot starts the stop runner of every stopping
// mirror topic (the reconciler calls it after each snapshot; it does not
// block).
func (s *Server) mirrorStopsAfterSnapshot(snap *clustermeta.Snapshot) {
	for name, rec := range snap.Records[mirrorRecordKind] {
		if !bytes.Contains(rec.Value, []byte(`"state":"stopping"`)) {
			continue
		}
		var id [16]byte
		if n, err := hex.Decode(id[:], []byte(name)); err != nil || n != len(id) {
			continue
		}
		if t := s.cluster.topicByID(id); t != nil {
			s.kickMirrorStop(t)
		}
	}
}

// kickMirrorStop starts t's stop runner unless it runs.
func (s *Server) kickMirrorStop(t *Topic) {
	s.mirror.mu.Lock()
	if s.mirror.stops.running == nil {
		s.mirror.stops.running = make(map[[16]byte]bool)
	}
	if s.mirror.stops.running[t.ID] {
		if s.mirror.stops.again == nil {
			s.mirror.stops.again = make(map[[16]byte]bool)
		}
		s.mirror.stops.again[t.ID] = true
		s.mirror.mu.Unlock()
		return
	}
	s.mirror.stops.running[t.ID] = true
	s.mirror.mu.Unlock()
	go s.runClusterStop(t)
}

// runClusterStop does this broker's part of t's stop until it has none
// left (another snapshot starts it again), retrying failures.
func (s *Server) runClusterStop(t *Topic) {
	// done ends the runner unless it was kicked since its last pass.
	done := func() bool {
		s.mirror.mu.Lock()
		defer s.mirror.mu.Unlock()
		if s.mirror.stops.again[t.ID] {
			delete(s.mirror.stops.again, t.ID)
			return false
		}
		delete(s.mirror.stops.running, t.ID)
		return true
	}
	ctx := s.ctxOrBackground()
	for backoff := 100 * time.Millisecond; ; backoff = min(2*backoff, 2*time.Second) {
		more, err := s.clusterStopPass(t)
		if err == nil && !more {
			if done() {
				return
			}
			continue
		}
		if err != nil {
			s.log.Warn("mirror stop step failed; retrying", "topic", t.Name, "err", err)
		}
		select {
		case <-ctx.Done():
			done()
			return
		case <-time.After(backoff):
		}
		if t.deleted.Load() {
			done()
			return
		}
	}
}

// clusterStopPass stops the partitions of t this broker leads and, as
// partition 0's leader, completes the topic once every partition is
// stopped. more: something this broker leads is still to do (a
// replication to wait for).
func (s *Server) clusterStopPass(t *Topic) (more bool, err error) {
	st, err := s.mirrorStateOf(t)
	if err != nil || st.State != mirrorStateStopping {
		return false, err
	}
	all := true
	for _, p := range t.Partitions() {
		if int(p.Index) < len(st.Partitions) && st.Partitions[p.Index].Stopped {
			continue
		}
		rs := p.repl.Load()
		if rs == nil || !rs.leader {
			all = false // its leader's part
			continue
		}
		done, err := s.stopLedPartition(p, rs, st.SourceClusterID)
		if err != nil {
			return true, fmt.Errorf("%s: %w", p.Dir(), err)
		}
		more = more || !done
		all = all && done
	}
	if !all {
		return more, nil
	}
	if ps := t.Partitions(); len(ps) == 0 {
		return false, nil
	} else if rs := ps[0].repl.Load(); rs == nil || !rs.leader {
		return false, nil // partition 0's leader completes the topic
	}
	return false, s.finishMirrorStop(t, st.TargetConfigs)
}

// stopLedPartition runs p's stop steps as its leader; done once the
// barrier is replicated and the partition recorded stopped.
func (s *Server) stopLedPartition(p *Partition, rs *replState, sourceID string) (done bool, err error) {
	h, err := partitionHandle(p)
	if err != nil {
		return false, err
	}
	l := h.log
	// The stop point, recorded (again when above this replica's log
	// end: a failed leader's appends that never reached it).
	p.data.appendMu.Lock()
	var ps mirrorPartitionState
	st, err := s.mirrorStateOf(p.Topic)
	if err == nil && int(p.Index) < len(st.Partitions) {
		ps = st.Partitions[p.Index]
	}
	if err == nil && (!ps.Stopping || ps.StopFrom > l.LogEndOffset()) {
		err = s.updateMirrorState(p.Topic, func(st *mirrorTopicState) error {
			cur := &st.Partitions[p.Index]
			if cur.Stopping && cur.StopFrom > l.LogEndOffset() {
				s.log.Warn("mirror stop: the stop point recorded by the previous leader is above this replica's log end; recording it again", "topic", p.Topic.Name, "partition", p.Index, "recorded", cur.StopFrom, "log_end", l.LogEndOffset())
				cur.Stopping = false
			}
			recordStopPoint(cur, p, l)
			ps = *cur
			return nil
		})
	}
	p.data.appendMu.Unlock()
	if err != nil {
		return false, err
	}
	if err := stopHook(p.Topic.Name, p.Index, stopStepRecorded); err != nil {
		return false, err
	}
	if err := s.SetLeaderEpochAtLeast(p, ps.NewEpoch); err != nil {
		return false, err
	}
	if err := stopHook(p.Topic.Name, p.Index, stopStepEpoch); err != nil {
		return false, err
	}
	if rs = p.repl.Load(); rs == nil || !rs.leader {
		return false, errNotLeader(p, "the leadership moved during the stop")
	}
	end, aborted, wrote, err := s.writeStopMarkers(p, rs.lead, ps, sourceID)
	if err != nil {
		return false, err
	}
	if wrote || aborted > 0 {
		s.log.Info("mirror partition stop markers written", "topic", p.Topic.Name, "partition", p.Index,
			"last_mirrored_offset", ps.LastMirroredOffset, "last_mirrored_epoch", ps.LastMirroredEpoch,
			"leader_epoch", p.LeaderEpoch(), "aborted_transactions", aborted, "barrier_written", wrote)
	}
	if err := stopHook(p.Topic.Name, p.Index, stopStepBarrier); err != nil {
		return false, err
	}
	if h.hw.Load() < end {
		return false, nil // the followers have not got them yet
	}
	err = s.updateMirrorState(p.Topic, func(st *mirrorTopicState) error {
		st.Partitions[p.Index].Stopped = true
		return nil
	})
	if err != nil {
		return false, err
	}
	s.log.Info("mirror partition stopped", "topic", p.Topic.Name, "partition", p.Index,
		"last_mirrored_offset", ps.LastMirroredOffset, "last_mirrored_epoch", ps.LastMirroredEpoch, "leader_epoch", p.LeaderEpoch())
	return true, nil
}

// writeStopMarkers appends p's ABORT markers and its barrier (once) as
// the leader ls, holding the leadership while it writes; end is the log
// end after them.
func (s *Server) writeStopMarkers(p *Partition, ls *leaderState, ps mirrorPartitionState, sourceID string) (end int64, aborted int, wrote bool, err error) {
	h, err := partitionHandle(p)
	if err != nil {
		return 0, 0, false, err
	}
	l := h.log
	if err := ls.admitAppend(); err != nil {
		return 0, 0, false, err
	}
	defer ls.appendDone()
	p.data.appendMu.Lock()
	defer p.data.appendMu.Unlock()
	have, err := barrierSince(l, ps.StopFrom)
	if err != nil {
		return 0, 0, false, err
	}
	if !have {
		epoch := p.LeaderEpoch()
		for _, pi := range l.Producers() {
			if pi.CurrentTxnFirstOffset < 0 {
				continue
			}
			if err := appendControl(l, epoch, pi.ProducerID, pi.Epoch, kbatch.TransactionalBit,
				kbatch.ControlAbort, kbatch.EndTxnMarkerValue(pi.CoordinatorEpoch)); err != nil {
				return 0, aborted, false, fmt.Errorf("aborting the open transaction of producer %d: %w", pi.ProducerID, err)
			}
			aborted++
		}
		if err := appendControl(l, epoch, kbatch.NoProducerID, -1, 0,
			kbatch.ControlMirrorPidReset, kbatch.MirrorPidResetValue(sourceID)); err != nil {
			return 0, aborted, false, fmt.Errorf("writing the MIRROR_PID_RESET barrier: %w", err)
		}
		// Durable on the leader too, as on a single node, besides
		// replicated before the partition is recorded stopped.
		if err := l.Flush(); err != nil {
			return 0, aborted, true, fmt.Errorf("syncing the stop's markers and barrier: %w", err)
		}
		wrote = true
		p.notifyAppend()
	}
	return l.LogEndOffset(), aborted, wrote, nil
}

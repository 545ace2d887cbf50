package broker

// Mirror stop / failover (brief I6; docs/mirroring.md "Stopping a mirror").
//
// An IncrementalAlterConfigs DELETE of mirror.mode runs, before it is
// answered:
//
//  0. The topic's mirror state becomes "stopping" (persisted, with the
//     source cluster id and the topic's configs once stopped); mirror
//     produces and mirror DeleteRecords are refused from here on.
//
// then per partition, under the partition's append lock (no mirror append
// can interleave), after recording the last mirrored offset and epoch and
// the new leader epoch (persisted before anything is written):
//
//  1. the leader epoch moves above every mirrored epoch and the current
//     one (max(current, latest batch epoch) + 1), persisted;
//  2. an ABORT marker (leader epoch = the new one, the producer's epoch
//     and coordinator epoch) is appended for every open transaction that
//     storage's producer state knows;
//  3. the MIRROR_PID_RESET barrier (control type 7, KIP-1279's
//     MirrorPidResetRecord with SourceClusterId = mirror.source.cluster.id)
//     is appended; storage clears all producer state when it meets it, on
//     append and on recovery;
//
// and for the topic:
//
//  4. the config without mirror.* is persisted: the topic is writable;
//  5. the state becomes "stopped" and retention runs once at once
//     (retention is dormant while a topic is a mirror).
//
// Every step can be repeated: the epoch only rises, open transactions are
// read from producer state (an aborted one is no longer open), and the
// barrier is written only when none follows the recorded log end. A broker
// that crashed in the middle finds the "stopping" state when it starts and
// completes the stop before it serves (recoverMirrorStops); a failed stop
// (I/O error) leaves the topic "stopping" and a repeated DELETE resumes it.

import (
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"strings"
	"sync/atomic"
	"time"

	"github.com/verbatim-kafka/verbatim/kbatch"
	"github.com/verbatim-kafka/verbatim/storage"
)

// Stop steps, as mirrorStopHook sees them.
const (
	stopStepRecorded = iota // the partition's stop is recorded
	stopStepEpoch           // its leader epoch is bumped
	stopStepAborts          // its open transactions are aborted
	stopStepBarrier         // its barrier is written
	stopStepWritable        // the topic config no longer has mirror.*
)

// mirrorStopHook, when not nil (tests only), runs after each step of a
// stop; partition is -1 for the topic-level step. An error ends the stop
// there, as a crash would.
var mirrorStopHook atomic.Pointer[func(topic string, partition int32, step int) error]

func stopHook(topic string, partition int32, step int) error {
	h := mirrorStopHook.Load()
	if h == nil {
		return nil
	}
	return (*h)(topic, partition, step)
}

// stopMirror begins and completes the stop of mirror topic t; target is
// the topic's overrides once stopped, sourceID its
// mirror.source.cluster.id.
func (s *Server) stopMirror(t *Topic, target map[string]string, sourceID string) error {
	if s.cm != nil {
		return s.stopMirrorCluster(t, target, sourceID)
	}
	err := s.updateMirrorState(t, func(st *mirrorTopicState) error {
		if st.State != mirrorStateMirroring {
			return nil // a stop that failed earlier: resume it as recorded
		}
		st.State, st.SourceClusterID, st.TargetConfigs = mirrorStateStopping, sourceID, target
		return nil
	})
	if err != nil {
		return err
	}
	s.log.Info("mirror stop begins", "topic", t.Name, "source_cluster_id", sourceID)
	return s.completeMirrorStop(t)
}

// completeMirrorStop runs the stop steps of a "stopping" topic.
func (s *Server) completeMirrorStop(t *Topic) error {
	st, err := s.mirrorStateOf(t)
	if err != nil {
		return err
	}
	if st.State == mirrorStateStopped {
		return nil
	}
	// Steps 0 and 1 of every partition at once: one state write and one
	// metadata write for the topic, not one each per partition (a topic
	// of thousands of partitions stops in seconds); stopPartition then
	// finds them done and goes on with its markers.
	if err := s.recordStops(t); err != nil {
		return fmt.Errorf("mirror stop of %s: %w", t.Name, err)
	}
	for _, p := range t.Partitions() {
		if err := s.stopPartition(p, st.SourceClusterID); err != nil {
			return fmt.Errorf("mirror stop of %s: %w", p.Dir(), err)
		}
	}
	return s.finishMirrorStop(t, st.TargetConfigs)
}

// finishMirrorStop is a stop's topic steps once every partition is
// stopped: the configs target without mirror.* (the topic is writable),
// then the state "stopped" (logged by the broker that moved it there)
// and retention at once.
func (s *Server) finishMirrorStop(t *Topic, target map[string]string) error {
	cfg, err := s.topicConfig(target)
	if err != nil {
		return err
	}
	if err := s.setTopicConfig(t, cfg); err != nil {
		return err
	}
	if err := stopHook(t.Name, -1, stopStepWritable); err != nil {
		return err
	}
	stopped := false
	if err := s.updateMirrorState(t, func(st *mirrorTopicState) error {
		stopped = st.State == mirrorStateStopping
		st.State = mirrorStateStopped
		return nil
	}); err != nil {
		return err
	}
	if stopped {
		s.log.Info("mirror stopped: the topic is writable", "topic", t.Name, "configs", cfg.Overrides())
	}
	s.wakeRetention(t)
	return nil
}

// recordStops records the stop point of every partition of t not yet
// recorded (what stopPartition's first step records, under every
// partition's append lock at once, so it sees every mirror append
// admitted before the topic became "stopping" and none after) and raises
// their leader epochs to the recorded new epochs.
func (s *Server) recordStops(t *Topic) error {
	parts := t.Partitions()
	logs := make([]*logHandle, len(parts))
	for i, p := range parts {
		h, err := partitionHandle(p)
		if err != nil {
			return fmt.Errorf("%s: %w", p.Dir(), err)
		}
		logs[i] = h
	}
	for _, p := range parts {
		p.data.appendMu.Lock()
	}
	epochs := make([]int32, len(parts))
	err := s.updateMirrorState(t, func(st *mirrorTopicState) error {
		for i, p := range parts {
			cur := &st.Partitions[p.Index]
			recordStopPoint(cur, p, logs[i].log)
			epochs[i] = cur.NewEpoch
		}
		return nil
	})
	for _, p := range parts {
		p.data.appendMu.Unlock()
	}
	if err != nil {
		return err
	}
	// Not under the append locks: the epoch write takes the cluster lock
	// (see stopPartition).
	return s.setLeaderEpochsAtLeast(parts, epochs)
}

// recordStopPoint records p's stop point in cur unless recorded already:
// the log end before the stop writes anything, the last mirrored offset
// and its epoch, the epoch the stop moves to. REQUIRES: p's append lock.
func recordStopPoint(cur *mirrorPartitionState, p *Partition, l *storage.Log) {
	if cur.Stopping {
		return
	}
	leo := l.LogEndOffset()
	cur.Stopping, cur.StopFrom = true, leo
	cur.LastMirroredOffset, cur.LastMirroredEpoch = -1, -1
	if leo > 0 {
		cur.LastMirroredOffset = leo - 1
	}
	if e, ok := l.EpochCache().LatestEpoch(); ok {
		cur.LastMirroredEpoch = e
	}
	cur.NewEpoch = max(p.LeaderEpoch(), cur.LastMirroredEpoch) + 1
}

// stopPartition runs steps 1-3 for p.
func (s *Server) stopPartition(p *Partition, sourceID string) error {
	h, err := partitionHandle(p)
	if err != nil {
		return err
	}
	l := h.log
	// The append lock orders the stop against mirror appends (their
	// guard, produce_guard.go, takes it around the write): the record
	// sees every mirror append admitted before the topic became
	// "stopping", and none is admitted after. It is not held across the
	// epoch bump, which takes the cluster lock: a topic deletion holds
	// that lock while it closes the partition's queue, whose owner may be
	// waiting for this one.
	p.data.appendMu.Lock()
	var ps mirrorPartitionState
	st, err := s.mirrorStateOf(p.Topic)
	if err == nil && int(p.Index) < len(st.Partitions) && st.Partitions[p.Index].Stopping {
		ps = st.Partitions[p.Index] // recorded already (recordStops): nothing to write
	} else if err == nil {
		err = s.updateMirrorState(p.Topic, func(st *mirrorTopicState) error {
			cur := &st.Partitions[p.Index]
			recordStopPoint(cur, p, l)
			ps = *cur
			return nil
		})
	}
	p.data.appendMu.Unlock()
	if err != nil {
		return err
	}
	if err := stopHook(p.Topic.Name, p.Index, stopStepRecorded); err != nil {
		return err
	}
	// 1. The leader epoch above every mirrored one.
	if err := s.SetLeaderEpochAtLeast(p, ps.NewEpoch); err != nil {
		return err
	}
	if err := stopHook(p.Topic.Name, p.Index, stopStepEpoch); err != nil {
		return err
	}
	p.data.appendMu.Lock()
	defer p.data.appendMu.Unlock()
	epoch := p.LeaderEpoch()
	// 2. ABORT markers for the open transactions.
	aborted := 0
	for _, pi := range l.Producers() {
		if pi.CurrentTxnFirstOffset < 0 {
			continue
		}
		if err := appendControl(l, epoch, pi.ProducerID, pi.Epoch, kbatch.TransactionalBit,
			kbatch.ControlAbort, kbatch.EndTxnMarkerValue(pi.CoordinatorEpoch)); err != nil {
			return fmt.Errorf("aborting the open transaction of producer %d (first offset %d): %w", pi.ProducerID, pi.CurrentTxnFirstOffset, err)
		}
		aborted++
	}
	if err := stopHook(p.Topic.Name, p.Index, stopStepAborts); err != nil {
		return err
	}
	// 3. The MIRROR_PID_RESET barrier, once.
	have, err := barrierSince(l, ps.StopFrom)
	if err != nil {
		return err
	}
	if !have {
		if err := appendControl(l, epoch, kbatch.NoProducerID, -1, 0,
			kbatch.ControlMirrorPidReset, kbatch.MirrorPidResetValue(sourceID)); err != nil {
			return fmt.Errorf("writing the MIRROR_PID_RESET barrier: %w", err)
		}
	}
	// The markers and the barrier are durable before the stop goes on
	// to make the topic writable: a power cut must not leave a STOPPED,
	// writable partition with a transaction open again (I6).
	if err := l.Flush(); err != nil {
		return fmt.Errorf("syncing the stop's markers and barrier: %w", err)
	}
	p.notifyAppend()
	s.log.Info("mirror partition stopped", "topic", p.Topic.Name, "partition", p.Index,
		"last_mirrored_offset", ps.LastMirroredOffset, "last_mirrored_epoch", ps.LastMirroredEpoch,
		"new_epoch", epoch, "aborted_transactions", aborted, "barrier_written", !have)
	return stopHook(p.Topic.Name, p.Index, stopStepBarrier)
}

// resumeMirrorStop completes t's stop if one is recorded as begun.
func (s *Server) resumeMirrorStop(t *Topic) error {
	st, err := s.mirrorStateOf(t)
	if err != nil || st.State != mirrorStateStopping {
		return err
	}
	if s.cm != nil {
		s.kickMirrorStop(t)
		return s.awaitClusterStop(t)
	}
	return s.completeMirrorStop(t)
}

// appendControl appends one control batch through storage's coordinator
// append (offsets assigned, leader epoch stamped).
func appendControl(l *storage.Log, leaderEpoch int32, pid int64, pepoch int16, attrs int16, typ int16, value []byte) error {
	now := time.Now().UnixMilli()
	b := kbatch.NewBatch(now, kbatch.Record{Key: kbatch.ControlKey(typ), Value: value})
	b.ProducerID, b.ProducerEpoch, b.BaseSequence = pid, pepoch, -1
	b.Attributes |= attrs | kbatch.ControlBit
	set, err := kbatch.Encode(b)
	if err != nil {
		return err
	}
	_, err = l.AppendCoordinator(set, leaderEpoch, now, 1)
	return err
}

// barrierSince reports whether a MIRROR_PID_RESET batch is stored at or
// after offset from (only the stop's own few batches follow it).
func barrierSince(l *storage.Log, from int64) (bool, error) {
	var buf []byte
	for next := max(from, l.LogStartOffset()); next < l.LogEndOffset(); {
		sl, err := l.Read(next, 1<<20)
		if err != nil {
			return false, err
		}
		if buf, err = sl.Bytes(buf[:0]); err != nil {
			return false, err
		}
		if len(buf) == 0 {
			return false, nil
		}
		for it := kbatch.Batches(buf); it.Next(); {
			b := it.Batch()
			if kbatch.Attributes(b)&kbatch.ControlBit != 0 && kbatch.BaseOffset(b) >= from {
				// Streamed and bounded: a mirrored control batch may be
				// compressed and hostile.
				if ctl, err := storage.ParseControlBatch(b); err == nil && ctl.Present && ctl.Type == kbatch.ControlMirrorPidReset {
					return true, nil
				}
			}
			next = kbatch.BaseOffset(b) + int64(kbatch.LastOffsetDelta(b)) + 1
		}
	}
	return false, nil
}

// wakeRetention applies retention to t's partitions once, right after a
// stop made it an ordinary topic (the periodic loop skips mirror topics).
// Compaction: Verbatim has no log cleaner yet, so there is nothing else
// to wake.
func (s *Server) wakeRetention(t *Topic) {
	now := time.Now().UnixMilli()
	for _, p := range t.Partitions() {
		l, err := partitionLog(p)
		if err != nil {
			continue
		}
		if n, err := l.ApplyRetention(now); err != nil && !errors.Is(err, storage.ErrClosed) {
			s.log.Warn("retention after mirror stop", "topic", t.Name, "partition", p.Index, "err", err)
		} else if n > 0 {
			s.log.Info("retention after mirror stop deleted segments", "topic", t.Name, "partition", p.Index, "segments", n)
		}
	}
}

// recoverMirrorStops completes, at start-up, every stop a crash
// interrupted, and forgets the states of deleted topics. A stop that
// cannot complete (an offline log) is logged; the topic stays "stopping"
// (no mirror writes, still read-only for clients) until a DELETE of
// mirror.mode or the next start completes it.
func (s *Server) recoverMirrorStops() {
	names, err := s.fs.ReadDir(mirrorStateDir)
	if errors.Is(err, fs.ErrNotExist) {
		return
	}
	if err != nil {
		s.log.Error("reading the mirror states", "dir", mirrorStateDir, "err", err)
		return
	}
	for _, name := range names {
		hexID, ok := strings.CutSuffix(name, ".json")
		var id [16]byte
		if n, err := hex.Decode(id[:], []byte(hexID)); !ok || err != nil || n != len(id) {
			continue // a temporary file of an interrupted write
		}
		t := s.cluster.topicByID(id)
		if t == nil {
			if err := s.fs.Remove(mirrorStateDir + "/" + name); err != nil {
				s.log.Warn("removing the mirror state of a deleted topic", "file", name, "err", err)
			}
			continue
		}
		st, err := s.mirrorStateOf(t)
		if err != nil {
			s.log.Error("mirror state unreadable", "topic", t.Name, "err", err)
			continue
		}
		if st.State != mirrorStateStopping {
			continue
		}
		s.log.Warn("completing a mirror stop interrupted by a crash", "topic", t.Name)
		if err := s.completeMirrorStop(t); err != nil {
			s.log.Error("mirror stop could not complete; the topic stays stopping", "topic", t.Name, "err", err)
		}
	}
}

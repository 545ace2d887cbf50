package broker

// Per-topic mirror state (docs/mirroring.md "Broker side").
//
// A mirror topic's state lives in "verbatim-meta/mirror/<topic id>.json",
// written atomically (temporary file, fsync, rename, fsync of the
// directory) whenever it changes:
//
//   - State: "mirroring" (mirror.mode=push, mirror produces accepted),
//     "stopping" (mirror stop began: mirror produces are refused, and the
//     stop sequence is completed at the next start if the broker crashed
//     in the middle of it) or "stopped".
//   - Per partition: the registered mirror writer, the epoch the broker
//     assigned it and its writer id (mirror_writer.go; a mirror produce
//     or mirror DeleteRecords from any other writer is refused), and,
//     once a stop began, the last mirrored offset and epoch, the new
//     leader epoch the stop chose and the log end at which the stop's own
//     batches start.
//
// Version 2: version-1 files (the pushers' clocks as writer epochs) have
// their writer records reset when first read (migrateWriterEpochsLocked),
// which recoverMirrorStops does for every file at start-up.
//
// Keyed by topic id, so a topic deleted and re-created under the same name
// never inherits its predecessor's state. The file is read lazily, the
// first time a topic needs it.

import (
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"sync"

	"github.com/twmb/franz-go/pkg/kerr"
)

// mirrorStateDir holds one state file per mirror topic that has one.
const mirrorStateDir = metaDirName + "/mirror"

// Mirror topic states.
const (
	mirrorStateMirroring = "mirroring"
	mirrorStateStopping  = "stopping"
	mirrorStateStopped   = "stopped"
)

// mirrorStateVersion is the state files' version: 2 since writer epochs
// are assigned by the broker (version 1 held the pushers' clocks).
const mirrorStateVersion = 2

// mirrorTopicState is the persisted state of one mirror topic.
type mirrorTopicState struct {
	Version int    `json:"version"`
	Topic   string `json:"topic"`
	TopicID string `json:"topic_id"`
	State   string `json:"state"`
	// SourceClusterID is the mirror.source.cluster.id the barrier
	// carries, recorded when the stop began.
	SourceClusterID string `json:"source_cluster_id,omitempty"`
	// TargetConfigs are the topic's overrides once stopped (mirror.*
	// removed, the rest of the stopping request applied).
	TargetConfigs map[string]string      `json:"target_configs,omitempty"`
	Partitions    []mirrorPartitionState `json:"partitions"`
}

// mirrorPartitionState is one partition's part of it.
type mirrorPartitionState struct {
	// WriterEpoch is the epoch assigned to the partition's registered
	// writer, the highest assigned there (-1: none registered), WriterID
	// that registrant's id (mirror_writer.go).
	WriterEpoch int32    `json:"writer_epoch"`
	WriterID    writerID `json:"writer_id"`
	// Set when a stop begins (Stopping true): the last mirrored offset
	// and the leader epoch of that batch (-1: none), the log end before
	// the stop wrote anything, and the leader epoch the stop moves to.
	Stopping           bool  `json:"stopping,omitempty"`
	LastMirroredOffset int64 `json:"last_mirrored_offset"`
	LastMirroredEpoch  int32 `json:"last_mirrored_epoch"`
	StopFrom           int64 `json:"stop_from"`
	NewEpoch           int32 `json:"new_epoch"`
	// Stopped (cluster mode): the partition's leader completed its stop
	// steps and its in-sync replicas have them (mirror_stop_cluster.go).
	Stopped bool `json:"stopped,omitempty"`
	// SourceStart (cluster mode): the source's leader epoch at the log
	// start its leader last took with a forward, for every replica's
	// epoch cache (mirror_start_epoch_cluster.go); nil: none forwarded.
	SourceStart *mirrorSourceStart `json:"source_start,omitempty"`
}

func newMirrorPartitionState() mirrorPartitionState {
	return mirrorPartitionState{WriterEpoch: -1, LastMirroredOffset: -1, LastMirroredEpoch: -1, StopFrom: -1, NewEpoch: -1}
}

// mirrorRegistry caches the loaded states. Changes are made under mu and
// persisted before they are visible.
type mirrorRegistry struct {
	mu     sync.Mutex
	topics map[[16]byte]*mirrorTopicState
	// Cluster mode (mirror_state_cluster.go): versions are the store
	// record versions the cached states were read at or written with,
	// names the records' names.
	versions map[[16]byte]int64
	names    map[[16]byte]string
	stops    clusterStops
	// startSeen is the record version each mirror record was last read
	// at for its source starts (mirror_start_epoch_cluster.go; the
	// reconciler goroutine's alone, not under mu).
	startSeen map[string]int64
}

func mirrorStateName(id [16]byte) string { return hex.EncodeToString(id[:]) + ".json" }

// loadMirrorStateLocked returns t's state, reading it from disk the first
// time; a topic without a file starts "mirroring" with no writer epoch.
// The partition list is grown to the topic's partition count.
// REQUIRES: r.mu.
func (s *Server) loadMirrorStateLocked(t *Topic) (*mirrorTopicState, error) {
	r := &s.mirror
	st := r.topics[t.ID]
	if s.cm != nil {
		// Cluster mode: the store's record (mirror_state_cluster.go).
		var err error
		if st, err = s.clusterMirrorStateLocked(t); err != nil {
			return nil, err
		}
		if st == nil {
			st = &mirrorTopicState{Version: mirrorStateVersion, Topic: t.Name, TopicID: hex.EncodeToString(t.ID[:]), State: mirrorStateMirroring}
			if r.topics == nil {
				r.topics = make(map[[16]byte]*mirrorTopicState)
			}
			r.topics[t.ID] = st
		}
	}
	if st == nil {
		st = &mirrorTopicState{Version: mirrorStateVersion, Topic: t.Name, TopicID: hex.EncodeToString(t.ID[:]), State: mirrorStateMirroring}
		data, err := readFile(s.fs, mirrorStateDir+"/"+mirrorStateName(t.ID))
		switch {
		case errors.Is(err, fs.ErrNotExist):
		case err != nil:
			return nil, fmt.Errorf("%w: reading the mirror state of %s: %v", errStorage, t.Name, err)
		default:
			if err := json.Unmarshal(data, st); err != nil {
				return nil, fmt.Errorf("%w: the mirror state of %s (%s/%s) is corrupt: %v", errStorage, t.Name, mirrorStateDir, mirrorStateName(t.ID), err)
			}
			if st.TopicID != hex.EncodeToString(t.ID[:]) {
				return nil, fmt.Errorf("%w: the mirror state file %s/%s names topic id %q", errStorage, mirrorStateDir, mirrorStateName(t.ID), st.TopicID)
			}
			switch st.State {
			case mirrorStateMirroring, mirrorStateStopping, mirrorStateStopped:
			default:
				return nil, fmt.Errorf("%w: the mirror state file %s/%s has state %q", errStorage, mirrorStateDir, mirrorStateName(t.ID), st.State)
			}
			if st.Version < mirrorStateVersion {
				if err := s.migrateWriterEpochsLocked(t, st); err != nil {
					return nil, err
				}
			}
		}
		if r.topics == nil {
			r.topics = make(map[[16]byte]*mirrorTopicState)
		}
		r.topics[t.ID] = st
	}
	for n := len(t.Partitions()); len(st.Partitions) < n; {
		st.Partitions = append(st.Partitions, newMirrorPartitionState())
	}
	return st, nil
}

// migrateWriterEpochsLocked resets the writer records of a version-1
// state, whose epochs were the pushers' clocks (a forged one at
// 2147483647 would fence every pusher until 2038): no writer is
// registered afterwards, so the next registration wins and a pusher still
// sending its clock is refused (INVALID_PRODUCER_EPOCH). Persisted before
// the state is used. REQUIRES: s.mirror.mu.
func (s *Server) migrateWriterEpochsLocked(t *Topic, st *mirrorTopicState) error {
	saved := cloneMirrorState(st)
	high := int32(-1)
	for i := range st.Partitions {
		high = max(high, st.Partitions[i].WriterEpoch)
		st.Partitions[i].WriterEpoch, st.Partitions[i].WriterID = -1, writerID{}
	}
	st.Version = mirrorStateVersion
	if err := s.persistMirrorStateLocked(t.ID, st); err != nil {
		*st = saved
		return err
	}
	s.log.Info("mirror writer epochs are now assigned by the broker: the clock-based writer records were reset, the next pusher to register becomes the writer", "topic", t.Name, "highest_old_epoch", high)
	return nil
}

// persistMirrorStateLocked writes st. On failure the caller restores the
// in-memory copy it changed. REQUIRES: s.mirror.mu.
func (s *Server) persistMirrorStateLocked(id [16]byte, st *mirrorTopicState) error {
	if s.cm != nil {
		return s.persistClusterMirrorStateLocked(id, st)
	}
	data, err := json.MarshalIndent(st, "", "  ")
	if err != nil {
		return err
	}
	if err := s.fs.MkdirAll(mirrorStateDir, 0o755); err != nil {
		return fmt.Errorf("%w: %v", errStorage, err)
	}
	if err := writeFileAtomic(s.fs, mirrorStateDir, mirrorStateName(id), append(data, '\n')); err != nil {
		return fmt.Errorf("%w: persisting the mirror state of %s: %v", errStorage, st.Topic, err)
	}
	return nil
}

// updateMirrorState applies fn to t's state and persists the result; if
// fn fails or the write fails, the state is left as it was.
func (s *Server) updateMirrorState(t *Topic, fn func(st *mirrorTopicState) error) error {
	r := &s.mirror
	r.mu.Lock()
	defer r.mu.Unlock()
	return s.retryMirrorConflicts(func() []*Topic { return []*Topic{t} }, func() error {
		st, err := s.loadMirrorStateLocked(t)
		if err != nil {
			return err
		}
		saved := cloneMirrorState(st)
		if err := fn(st); err != nil {
			*st = saved
			return err
		}
		if err := s.persistMirrorStateLocked(t.ID, st); err != nil {
			*st = saved
			return err
		}
		return nil
	})
}

// mirrorStateOf returns a copy of t's state.
func (s *Server) mirrorStateOf(t *Topic) (mirrorTopicState, error) {
	r := &s.mirror
	r.mu.Lock()
	defer r.mu.Unlock()
	st, err := s.loadMirrorStateLocked(t)
	if err != nil {
		return mirrorTopicState{}, err
	}
	return cloneMirrorState(st), nil
}

func cloneMirrorState(st *mirrorTopicState) mirrorTopicState {
	c := *st
	c.Partitions = append([]mirrorPartitionState(nil), st.Partitions...)
	if st.TargetConfigs != nil {
		c.TargetConfigs = make(map[string]string, len(st.TargetConfigs))
		for k, v := range st.TargetConfigs {
			c.TargetConfigs[k] = v
		}
	}
	return c
}

// checkMirrorWriter admits a mirror write (produce or DeleteRecords) by
// writer we to p: refused once a stop began (the topic is no longer a
// mirror), and admitted only from the partition's registered writer
// (admitWriter, mirror_writer.go). Mirror produces call it from their
// append's guard (produce_guard.go), under the partition's append lock and
// at the moment of the write, so no mirror append slips in after a stop
// took that lock, even one queued before the stop began. It changes
// nothing: only a registration makes a writer.
func (s *Server) checkMirrorWriter(p *Partition, we mirrorWriter) error {
	r := &s.mirror
	r.mu.Lock()
	defer r.mu.Unlock()
	st, err := s.loadMirrorStateLocked(p.Topic)
	if err != nil {
		return err
	}
	if st.State != mirrorStateMirroring {
		return kafkaErr(kerr.PolicyViolation, fmt.Sprintf("topic %s is no longer a mirror (mirror stop: %s): mirror writes are refused", p.Topic.Name, st.State))
	}
	ps := &st.Partitions[p.Index]
	err = admitWriter(mirrorWriter{Epoch: ps.WriterEpoch, ID: ps.WriterID}, we, p)
	if err != nil {
		if code, _ := dataErrorToKafka(err); code == kerr.ProducerFenced.Code {
			s.topicMetrics(p.Topic).MirrorFenced.Inc()
		}
	}
	return err
}

// checkMirrorDelete admits a mirror DeleteRecords (mirror: the request
// carries tag wireext.MirrorTag) by its writer epoch; other DeleteRecords pass (their
// topic rules are deleteRecords').
func (s *Server) checkMirrorDelete(p *Partition, mirror bool, we mirrorWriter) error {
	if !mirror || !p.Topic.Config().MirrorPush {
		return nil
	}
	return s.admitMirrorDelete(p, we)
}

// admitMirrorDelete admits a log-start forward by we under p's append
// lock (a pusher's mirror DeleteRecords, a link's forward).
func (s *Server) admitMirrorDelete(p *Partition, we mirrorWriter) error {
	p.data.appendMu.Lock()
	defer p.data.appendMu.Unlock()
	return s.checkMirrorWriter(p, we)
}

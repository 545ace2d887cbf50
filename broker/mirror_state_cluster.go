package broker

// Mirror state in cluster mode (docs/cluster.md "Mirror topics in a
// cluster"): a mirror topic's state (mirror_state.go: the writers and
// their epochs per partition, the stop) is the record "mirror/<topic id
// in hex>" of the cluster store, the same JSON the single node keeps in
// its meta dir. Every change is a compare-and-swap on the version this
// broker last read or wrote, fenced by its registration, so a new leader
// after a failover knows the partition's writer and its epoch (and fences
// a stale one) and two brokers changing the same topic's state (each
// registering the writer of the partitions it leads) never overwrite
// each other: the loser reads the record again and applies its change to
// what won.

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/verbatim-kafka/verbatim/clustermeta"
)

// mirrorRecordKind is the record kind of mirror topic states.
const mirrorRecordKind = "mirror"

// errMirrorStateConflict: another broker changed the topic's mirror
// state since this one read it.
var errMirrorStateConflict = errors.New("the mirror state changed on another broker")

// mirrorStoreRetries bounds the re-reads after conflicts.
const mirrorStoreRetries = 8

// mirrorRecordName is t's record name.
func (r *mirrorRegistry) recordName(id [16]byte) string {
	if n, ok := r.names[id]; ok {
		return n
	}
	if r.names == nil {
		r.names = make(map[[16]byte]string)
	}
	n := hex.EncodeToString(id[:])
	r.names[id] = n
	return n
}

// clusterMirrorStateLocked returns t's cached state, replaced by the
// latest snapshot's record when that is newer than what this broker read
// or wrote (nil: nothing cached and no record, a fresh state).
// REQUIRES: s.mirror.mu.
func (s *Server) clusterMirrorStateLocked(t *Topic) (*mirrorTopicState, error) {
	r := &s.mirror
	st := r.topics[t.ID]
	snap := s.cm.snap.Load()
	if snap == nil {
		return st, nil
	}
	rec, ok := snap.Record(mirrorRecordKind, r.recordName(t.ID))
	if !ok || (st != nil && rec.Version <= r.versions[t.ID]) {
		return st, nil
	}
	return s.adoptMirrorRecordLocked(t, rec)
}

// adoptMirrorRecordLocked caches rec as t's state. REQUIRES: s.mirror.mu.
func (s *Server) adoptMirrorRecordLocked(t *Topic, rec clustermeta.Record) (*mirrorTopicState, error) {
	r := &s.mirror
	st := &mirrorTopicState{}
	if err := json.Unmarshal(rec.Value, st); err != nil {
		return nil, fmt.Errorf("%w: the mirror state of %s in the cluster store is corrupt: %v", errStorage, t.Name, err)
	}
	if st.TopicID != r.recordName(t.ID) {
		return nil, fmt.Errorf("%w: the mirror state record of %s names topic id %q", errStorage, t.Name, st.TopicID)
	}
	switch st.State {
	case mirrorStateMirroring, mirrorStateStopping, mirrorStateStopped:
	default:
		return nil, fmt.Errorf("%w: the mirror state record of %s has state %q", errStorage, t.Name, st.State)
	}
	if r.topics == nil {
		r.topics = make(map[[16]byte]*mirrorTopicState)
	}
	if r.versions == nil {
		r.versions = make(map[[16]byte]int64)
	}
	r.topics[t.ID], r.versions[t.ID] = st, rec.Version
	return st, nil
}

// refreshMirrorStateLocked reads t's record from the store itself (after
// a conflict: the watch may not have delivered the winner yet).
// REQUIRES: s.mirror.mu.
func (s *Server) refreshMirrorStateLocked(t *Topic) error {
	ctx, cancel := s.cm.writeCtx()
	defer cancel()
	snap, err := s.cm.store.Snapshot(ctx)
	if err != nil {
		return storeErr("reading the mirror state", err)
	}
	r := &s.mirror
	rec, ok := snap.Record(mirrorRecordKind, r.recordName(t.ID))
	if !ok {
		delete(r.topics, t.ID)
		delete(r.versions, t.ID)
		return nil
	}
	_, err = s.adoptMirrorRecordLocked(t, rec)
	return err
}

// persistClusterMirrorStateLocked writes st as topic id's record, if the
// record is still at the version this broker read (errMirrorStateConflict
// otherwise). REQUIRES: s.mirror.mu.
func (s *Server) persistClusterMirrorStateLocked(id [16]byte, st *mirrorTopicState) error {
	data, err := json.Marshal(st)
	if err != nil {
		return err
	}
	sess := s.cm.session.Load()
	if sess == nil {
		return kafkaErr(kerr.NotLeaderForPartition, "this broker is not registered in the cluster")
	}
	r := &s.mirror
	expect := r.versions[id]
	if expect == 0 {
		expect = clustermeta.MustNotExist
	}
	ctx, cancel := s.cm.writeCtx()
	defer cancel()
	v, err := s.cm.store.PutRecord(ctx, sess.Fence(), mirrorRecordKind, r.recordName(id), data, expect)
	switch {
	case errors.Is(err, clustermeta.ErrConflict):
		return errMirrorStateConflict
	case err != nil:
		return storeErr("writing the mirror state of "+st.Topic, err)
	}
	if r.versions == nil {
		r.versions = make(map[[16]byte]int64)
	}
	r.versions[id] = v
	return nil
}

// retryMirrorConflicts runs fn (one read-modify-write of the states of
// topics under s.mirror.mu) again after re-reading those topics'
// records while it fails with errMirrorStateConflict. REQUIRES:
// s.mirror.mu.
func (s *Server) retryMirrorConflicts(topics func() []*Topic, fn func() error) error {
	for attempt := 0; ; attempt++ {
		err := fn()
		if !errors.Is(err, errMirrorStateConflict) || s.cm == nil {
			return err
		}
		if attempt+1 == mirrorStoreRetries {
			return kafkaErr(kerr.RequestTimedOut, fmt.Sprintf("the mirror state kept changing on other brokers (%d attempts)", mirrorStoreRetries))
		}
		for _, t := range topics() {
			if err := s.refreshMirrorStateLocked(t); err != nil {
				return err
			}
		}
	}
}

// forgetMirrorRecord deletes a deleted topic's mirror record (topic ids
// are never reused, so nothing else would); a failure leaves a record
// nobody reads, logged.
func (s *Server) forgetMirrorRecord(ctx context.Context, t *Topic) {
	name := hex.EncodeToString(t.ID[:])
	if snap := s.cm.snap.Load(); snap != nil {
		if _, ok := snap.Record(mirrorRecordKind, name); !ok {
			return
		}
	}
	if _, err := s.cm.store.DeleteRecord(ctx, clustermeta.Fence{}, mirrorRecordKind, name, clustermeta.AnyVersion); err != nil && !errors.Is(err, clustermeta.ErrNotFound) {
		s.log.Warn("could not delete the mirror state of a deleted topic", "topic", t.Name, "err", err)
	}
	s.mirror.mu.Lock()
	delete(s.mirror.topics, t.ID)
	delete(s.mirror.versions, t.ID)
	s.mirror.mu.Unlock()
}

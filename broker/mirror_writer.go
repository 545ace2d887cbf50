package broker

// Mirror writer identity (docs/protocol.md "Writer epoch").
//
// A mirror writer (a pusher) is (WriterEpoch, WriterID). The epoch is the
// broker's to assign: a writer registers with a mirror DeleteRecords whose
// MirrorProduce value has WriterEpoch wireext.RegisterWriterEpoch (-1) and
// its 16-byte WriterID; the broker assigns one epoch to every partition of
// the request, one above the highest any of them had, makes the registrant
// each partition's writer, persists that in the topic's mirror state and
// only then answers the epoch (wireext.MirrorWriterEpoch on each response
// partition), as InitProducerId bumps and persists a producer epoch before
// answering. A partition's current writer is therefore also the highest
// epoch ever assigned there, and a mirror write (produce or log-start
// forward) is admitted only from exactly that writer:
//
//   - an epoch below it: PRODUCER_FENCED (a newer pusher registered);
//   - an epoch above it, or a partition nobody registered on:
//     INVALID_PRODUCER_EPOCH (the broker never assigned it: a forged or
//     clock-based epoch, which changes nothing);
//   - its epoch with another WriterID: PRODUCER_FENCED (the epoch is bound
//     to the registrant's identity).
//
// One epoch per request and one lock (s.mirror.mu) over the whole
// assignment make a pusher that registers all its partitions in one
// request newer than every pusher registered before it on all of them, so
// of two pushers the later registrant wins everywhere.

import (
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/verbatim-kafka/verbatim/wireext"
)

// mirrorWriter identifies a mirror writer.
type mirrorWriter struct {
	Epoch int32
	ID    writerID
}

// writerID is a WriterID, persisted as 32 hex digits.
type writerID [16]byte

func (id writerID) MarshalText() ([]byte, error) { return []byte(hex.EncodeToString(id[:])), nil }

func (id *writerID) UnmarshalText(b []byte) error {
	if len(b) != 2*len(id) {
		return fmt.Errorf("writer id %q: want %d hex digits", b, 2*len(id))
	}
	_, err := hex.Decode(id[:], b)
	return err
}

// writerOf returns the writer identity a MirrorProduce value carries.
func writerOf(m *wireext.MirrorProduce) mirrorWriter {
	return mirrorWriter{Epoch: m.WriterEpoch, ID: m.WriterID}
}

// String names the writer in refusals: its epoch, and its id when it has
// one.
func (w mirrorWriter) String() string {
	if w.ID == (writerID{}) {
		return fmt.Sprintf("epoch %d", w.Epoch)
	}
	return fmt.Sprintf("epoch %d (writer id %x)", w.Epoch, w.ID[:])
}

// admitWriter decides a mirror write by we to partition p whose current
// (registered) writer is cur (epoch -1: none). Admitting allocates
// nothing (the produce path calls it per append).
func admitWriter(cur, we mirrorWriter, p *Partition) error {
	if we.Epoch >= 0 && we == cur {
		return nil
	}
	return refuseWriter(cur, we, p)
}

// refuseWriter is admitWriter's refusal, apart so that the admitting
// path keeps its arguments off the heap.
func refuseWriter(cur, we mirrorWriter, p *Partition) error {
	part := p.Dir()
	switch {
	case we.Epoch < 0:
		return kafkaErr(kerr.InvalidProducerEpoch, fmt.Sprintf("a mirror write to %s must carry the writer epoch its registration was assigned, not %d", part, we.Epoch))
	case cur.Epoch < 0:
		return kafkaErr(kerr.InvalidProducerEpoch, fmt.Sprintf("mirror writer epoch %d was not assigned on %s: no writer registered there (register with a mirror DeleteRecords carrying writer epoch -1)", we.Epoch, part))
	case we.Epoch < cur.Epoch:
		return kafkaErr(kerr.ProducerFenced, fmt.Sprintf("mirror writer epoch %d is older than %d, the writer registered last on %s: a newer pusher took over", we.Epoch, cur.Epoch, part))
	case we.Epoch > cur.Epoch:
		return kafkaErr(kerr.InvalidProducerEpoch, fmt.Sprintf("mirror writer epoch %d was never assigned on %s (the highest assigned is %d): writer epochs come from registration", we.Epoch, part, cur.Epoch))
	case we.ID != cur.ID:
		return kafkaErr(kerr.ProducerFenced, fmt.Sprintf("mirror writer %s is not the registrant of epoch %d on %s (writer id %x): another pusher took over", we, cur.Epoch, part, cur.ID[:]))
	}
	return kafkaErr(kerr.InvalidProducerEpoch, fmt.Sprintf("mirror writer %s refused on %s", we, part)) // unreachable: admitWriter admits we == cur
}

// registerMirrorWriters assigns one writer epoch to the partitions ps (of
// mirror topics) for the registrant id: one above the highest any of them
// has, persisted per topic before it is returned. errs[i] is partition
// i's refusal (a stopped mirror, a state that cannot be read or written);
// refused partitions do not count towards the epoch.
func (s *Server) registerMirrorWriters(ps []*Partition, id writerID) (epoch int32, errs []error) {
	r := &s.mirror
	r.mu.Lock()
	defer r.mu.Unlock()
	// Cluster mode: a topic whose record another broker changed meanwhile
	// is read again and the whole assignment made again, so the epoch is
	// still one above every partition's (mirror_state_cluster.go).
	var conflicted []*Topic
	err := s.retryMirrorConflicts(func() []*Topic { return conflicted }, func() error {
		epoch, errs = s.registerMirrorWritersLocked(ps, id)
		conflicted = conflicted[:0]
		for i, err := range errs {
			if errors.Is(err, errMirrorStateConflict) && !slices.Contains(conflicted, ps[i].Topic) {
				conflicted = append(conflicted, ps[i].Topic)
			}
		}
		if len(conflicted) > 0 {
			return errMirrorStateConflict
		}
		return nil
	})
	if err != nil && !errors.Is(err, errMirrorStateConflict) {
		for i := range errs {
			if errs[i] == nil || errors.Is(errs[i], errMirrorStateConflict) {
				errs[i] = err
			}
		}
	}
	return epoch, errs
}

// registerMirrorWritersLocked is one attempt of registerMirrorWriters.
// REQUIRES: s.mirror.mu.
func (s *Server) registerMirrorWritersLocked(ps []*Partition, id writerID) (epoch int32, errs []error) {
	errs = make([]error, len(ps))
	states := make(map[*Topic]*mirrorTopicState)
	high := int32(-1)
	for i, p := range ps {
		st, err := s.loadMirrorStateLocked(p.Topic)
		if err == nil && st.State != mirrorStateMirroring {
			err = kafkaErr(kerr.PolicyViolation, fmt.Sprintf("topic %s is no longer a mirror (mirror stop: %s): mirror writers cannot register", p.Topic.Name, st.State))
		}
		if errs[i] = err; err == nil {
			states[p.Topic] = st
			high = max(high, st.Partitions[p.Index].WriterEpoch)
		}
	}
	if high == math.MaxInt32 {
		err := kafkaErr(kerr.InvalidProducerEpoch, "mirror writer epochs are exhausted on these partitions (2147483647 assigned)")
		for i := range errs {
			if errs[i] == nil {
				errs[i] = err
			}
		}
		return -1, errs
	}
	epoch = high + 1
	saved := make(map[*Topic]mirrorTopicState, len(states))
	for t, st := range states {
		saved[t] = cloneMirrorState(st)
	}
	for i, p := range ps {
		if errs[i] == nil {
			ps := &states[p.Topic].Partitions[p.Index]
			ps.WriterEpoch, ps.WriterID = epoch, id
		}
	}
	for t, st := range states {
		if err := s.persistMirrorStateLocked(t.ID, st); err != nil {
			*st = saved[t]
			for i, p := range ps {
				if p.Topic == t && errs[i] == nil {
					errs[i] = err
				}
			}
		}
	}
	return epoch, errs
}

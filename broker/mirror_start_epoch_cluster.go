package broker

// The source's leader epoch at a mirror's log start on every replica
// (cluster mode; docs/cluster.md "Mirror topics in a cluster").
//
// A log-start forward carrying the source's epoch (mirror_start_epoch.go)
// changes the leader's epoch cache only: the followers move their log
// start from the leader's fetch answers (replica_follower.go), which
// carry no epoch. So the leader also records (offset, epoch) in the
// partition's part of the mirror topic's record in the cluster store
// (SourceStart, a compare-and-swap as every mirror-state write, retried
// on conflict), and the forward is answered only once that write is in
// the store: a failover right after the answer keeps it.
//
// Every broker follows the records (sourceStartsAfterSnapshot): a hosted
// replica whose record names a start its cache may lack keeps it pending
// (Partition.sourceStart) and applies it with the leader's storage call
// (storage.Log.DeleteRecordsWithEpoch, refused when it contradicts the
// stored batches) once it can:
//   - a follower once its log start is that offset (it takes the leader's
//     log start from its fetches, bounded by its high watermark) and it
//     holds a batch at or after it (an emptied follower starts at the
//     leader's log start before it fetched any batch), checked after each
//     append;
//   - a leader (one that became leader, or whose record arrived) at once
//     when its log start is at or below the offset and it holds a batch
//     at or after it: below, the forward the old leader answered never
//     reached it, and the offsets below are committed (the old leader
//     moved its log start no higher than its high watermark, which every
//     in-sync replica had reached), so it moves its log start there as
//     the forward did; its followers follow.
//
// A log start already past the offset makes the entry moot (a later
// forward or retention moved on; the cache's first entry moved with it).

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"errors"

	"github.com/verbatim-kafka/verbatim/clustermeta"
	"github.com/verbatim-kafka/verbatim/storage"
)

// mirrorSourceStart is a source's leader epoch at a log start offset.
type mirrorSourceStart struct {
	Offset int64 `json:"offset"`
	Epoch  int32 `json:"epoch"`
}

// errSourceStartKept: the record already holds the start (or a later
// one); nothing to write.
var errSourceStartKept = errors.New("the mirror record holds this source start already")

// recordSourceStart records, on a cluster, that p's log start is offset
// with the source's leader epoch epoch (a forward the leader applied), in
// the mirror topic's record, before the forward is answered. A record
// holding a later log start keeps it (a deposed leader's late forward does
// not move it back).
func (s *Server) recordSourceStart(p *Partition, offset int64, epoch int32) error {
	if s.cm == nil || epoch < 0 || offset < 0 {
		return nil
	}
	err := s.updateMirrorState(p.Topic, func(st *mirrorTopicState) error {
		ps := &st.Partitions[p.Index]
		if cur := ps.SourceStart; cur != nil && (cur.Offset > offset || *cur == (mirrorSourceStart{offset, epoch})) {
			return errSourceStartKept
		}
		ps.SourceStart = &mirrorSourceStart{Offset: offset, Epoch: epoch}
		return nil
	})
	if errors.Is(err, errSourceStartKept) {
		return nil
	}
	return err
}

// sourceStartsAfterSnapshot hands every hosted replica the source start
// its topic's mirror record names when the record changed since the last
// snapshot, and applies what it can at once. The reconciler calls it
// after each snapshot (it alone touches s.mirror.startSeen).
func (s *Server) sourceStartsAfterSnapshot(snap *clustermeta.Snapshot) {
	recs := snap.Records[mirrorRecordKind]
	seen := s.mirror.startSeen
	if seen == nil {
		seen = make(map[string]int64)
		s.mirror.startSeen = seen
	}
	if len(seen) > len(recs) {
		for name := range seen {
			if _, ok := recs[name]; !ok {
				delete(seen, name)
			}
		}
	}
	for name, rec := range recs {
		if seen[name] == rec.Version {
			continue
		}
		seen[name] = rec.Version
		if !bytes.Contains(rec.Value, []byte(`"source_start"`)) {
			continue
		}
		var id [16]byte
		if n, err := hex.Decode(id[:], []byte(name)); err != nil || n != len(id) {
			continue
		}
		t := s.cluster.topicByID(id)
		if t == nil {
			continue
		}
		var st struct {
			Partitions []struct {
				SourceStart *mirrorSourceStart `json:"source_start"`
			} `json:"partitions"`
		}
		if err := json.Unmarshal(rec.Value, &st); err != nil {
			continue // the mirror state's reader reports it
		}
		for i, ps := range st.Partitions {
			p := t.Partition(int32(i))
			if ps.SourceStart == nil || p == nil || p.Log == nil || ps.SourceStart.Offset < 0 || ps.SourceStart.Epoch < 0 {
				continue
			}
			if cur := p.sourceStart.Load(); cur == nil || *cur != *ps.SourceStart {
				p.sourceStart.Store(ps.SourceStart)
			}
			s.applySourceStart(p)
		}
	}
}

// applySourceStart records p's pending source start in its epoch cache
// when this replica can (see above) and clears it once done or moot.
// Concurrent calls are harmless: the storage call is idempotent.
func (s *Server) applySourceStart(p *Partition) {
	ss := p.sourceStart.Load()
	if ss == nil {
		return
	}
	h, err := partitionHandle(p)
	if err != nil {
		return
	}
	l := h.log
	start, end := l.LogStartOffset(), l.LogEndOffset()
	rs := p.repl.Load()
	leader := rs != nil && rs.leader
	switch {
	case start > ss.Offset:
		p.sourceStart.CompareAndSwap(ss, nil) // moot
		return
	case start < ss.Offset && !leader, end <= ss.Offset:
		return // not yet: the log start or a batch at or after it to come
	}
	if _, err := l.DeleteRecordsWithEpoch(ss.Offset, ss.Epoch); err != nil {
		if errors.Is(err, storage.ErrEpochInconsistent) {
			s.log.Warn("the mirror source's leader epoch at the log start, recorded by the partition's leader, contradicts this replica's batches; not recorded",
				"topic", p.Topic.Name, "partition", p.Index, "offset", ss.Offset, "epoch", ss.Epoch, "err", err)
		} else {
			s.log.Error("recording the mirror source's leader epoch at the log start failed", "topic", p.Topic.Name, "partition", p.Index, "offset", ss.Offset, "epoch", ss.Epoch, "err", err)
		}
		p.sourceStart.CompareAndSwap(ss, nil)
		return
	}
	p.sourceStart.CompareAndSwap(ss, nil)
	if leader && start < ss.Offset {
		s.log.Info("log start moved to the mirror forward the previous leader took", "topic", p.Topic.Name, "partition", p.Index, "log_start", ss.Offset, "epoch", ss.Epoch)
		p.wakeWaiters() // the followers' long polls take the new log start
	}
}

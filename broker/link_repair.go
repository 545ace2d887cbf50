package broker

// Divergence repair and failback, the broker's side (package link's
// repairHost, link/host_repair.go; docs/mirroring.md "Divergence and
// failback").
//
// TruncateKeepingCut truncates a partition to an offset as Kafka's
// truncateTo does (whole batches; epoch cache, indexes, transaction index
// and producer state rebuilt by storage; the high watermark and the last
// stable offset follow the log end), after copying every batch it removes
// verbatim, at its original offsets, into a keep topic: nothing a
// truncation removes is lost silently. The steps, each durable before the
// next:
//
//  1. the keep topic exists (created like an ordinary topic with the
//     truncated topic's partition count, retention off so old batches
//     are not expired at once; never a mirror);
//  2. the removed batches are appended to the keep topic's partition of
//     the same number with storage's verbatim append (follower semantics:
//     producer state tracks them and refuses nothing), and synced;
//  3. the log is truncated (storage.Log.Truncate records its target first
//     and Open completes it, so a crash leaves the old log or the
//     truncated one);
//  4. the partition's leader epoch rises by one, so that consumers
//     validate their positions (KIP-320) and see the truncation.
//
// A crash between 2 and 3 leaves the old log with the copy kept; doing it
// again finds the copy in place (an identical retry of verbatim batches)
// and completes. A keep partition holding other batches at those offsets
// (an earlier cut) is refused with the offset: name another keep topic.
//
// The caller (the link manager) decides that a partition may be truncated
// and orders it against its own writes; this file orders it against
// mirror appends (the partition's append lock).

import (
	"context"
	"errors"
	"fmt"
	"path"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/verbatim-kafka/verbatim/kbatch"
	"github.com/verbatim-kafka/verbatim/storage"
	"github.com/verbatim-kafka/verbatim/wireext"
)

// KeepTopicSuffix names the default keep topic: `<topic>.truncated`.
const KeepTopicSuffix = ".truncated"

// DefaultKeepTopic is the keep topic of topic when the operator names
// none.
func DefaultKeepTopic(topic string) string { return topic + KeepTopicSuffix }

// keepCopyChunk bounds one read of the batches to keep.
const keepCopyChunk = 1 << 20

// TruncateKeepingCut truncates topic's partition to the offset to (the
// batch containing it goes whole), first keeping what it removes in
// keepTopic ("" for DefaultKeepTopic). It answers what was removed;
// TruncatedTo -1 when nothing was (to at or above the log end).
func (s *Server) TruncateKeepingCut(ctx context.Context, topic string, partition int32, to int64, keepTopic string) (wireext.TruncatedPartition, error) {
	res := wireext.TruncatedPartition{Partition: partition, TruncatedTo: -1}
	if s.cm != nil {
		return res, errRepairInCluster("mirror truncate") // link_cluster.go
	}
	t := s.cluster.topic(topic)
	if t == nil || t.Partition(partition) == nil {
		return res, kafkaErr(kerr.UnknownTopicOrPartition, fmt.Sprintf("%s/%d: this server does not host this topic-partition", topic, partition))
	}
	if keepTopic == "" {
		keepTopic = DefaultKeepTopic(topic)
	}
	if keepTopic == topic {
		return res, kafkaErr(kerr.InvalidRequest, fmt.Sprintf("the keep topic of %s cannot be the topic itself", topic))
	}
	if strings.HasPrefix(topic, "__") || strings.HasPrefix(keepTopic, "__") {
		return res, kafkaErr(kerr.InvalidRequest, "internal topics (__*) are neither truncated nor used to keep a cut")
	}
	p := t.Partition(partition)
	h, err := partitionHandle(p)
	if err != nil {
		return res, err
	}
	l := h.log
	if to < 0 {
		return res, kafkaErr(kerr.OffsetOutOfRange, fmt.Sprintf("%s/%d: truncation to negative offset %d", topic, partition, to))
	}
	if to >= l.LogEndOffset() {
		// Nothing to cut (checked again under the lock): no keep topic.
		return res, nil
	}
	kt, err := s.ensureKeepTopic(keepTopic, t)
	if err != nil {
		return res, err
	}
	kp := kt.Partition(partition)
	kh, err := partitionHandle(kp)
	if err != nil {
		return res, err
	}

	// The append lock orders the copy and the cut against mirror
	// appends. It is not held across the epoch bumps, which take the
	// cluster lock (a topic deletion holds that lock while it closes a
	// partition queue whose owner may wait for this one: mirror_stop.go).
	batches, bytes, maxEpoch, end, err := s.keepAndCut(ctx, p, l, kh.log, to, keepTopic)
	if err != nil || end < 0 {
		return res, err
	}
	if batches > 0 {
		if err := s.SetLeaderEpochAtLeast(kp, storage.MirrorLeaderEpoch(kp.LeaderEpoch(), maxEpoch)); err != nil {
			return res, err
		}
		kp.notifyAppend()
	}
	// 4. Consumers' positions past the cut are validated anew.
	if err := s.SetLeaderEpochAtLeast(p, p.LeaderEpoch()+1); err != nil {
		return res, err
	}
	p.notifyAppend()
	res.TruncatedTo, res.RemovedBatches, res.RemovedBytes, res.KeptIn = end, int32(batches), bytes, keepTopic
	s.log.Warn("partition truncated, the removed batches kept", "topic", topic, "partition", partition,
		"truncated_to", res.TruncatedTo, "removed_batches", batches, "removed_bytes", bytes, "kept_in", keepTopic)
	return res, nil
}

// keepAndCut is steps 2 and 3 under p's append lock; end is the log end
// after the cut, -1 when there was nothing to cut.
func (s *Server) keepAndCut(ctx context.Context, p *Partition, l, keep *storage.Log, to int64, keepTopic string) (batches int, n int64, maxEpoch int32, end int64, err error) {
	p.data.appendMu.Lock()
	defer p.data.appendMu.Unlock()
	if to >= l.LogEndOffset() {
		return 0, 0, -1, -1, nil
	}
	// 2. Keep what goes.
	batches, n, maxEpoch, err = copyTail(ctx, l, keep, to)
	if err != nil {
		return 0, 0, -1, -1, fmt.Errorf("keeping %s/%d from offset %d in %s: %w", p.Topic.Name, p.Index, to, keepTopic, err)
	}
	if batches > 0 {
		if err := keep.Flush(); err != nil {
			return 0, 0, -1, -1, fmt.Errorf("%w: syncing the keep topic %s/%d: %v", errStorage, keepTopic, p.Index, err)
		}
		// A keep partition created just now: its directory's entry in
		// the data dir must be durable before anything is cut.
		if err := s.cfg.FS.SyncDir(path.Dir(keep.Dir())); err != nil {
			return 0, 0, -1, -1, fmt.Errorf("%w: syncing the data dir after the keep topic %s: %v", errStorage, keepTopic, err)
		}
	}
	// 3. Cut.
	if err := l.Truncate(to); err != nil {
		return 0, 0, -1, -1, fmt.Errorf("%w: truncating %s/%d to %d: %v", errStorage, p.Topic.Name, p.Index, to, err)
	}
	return batches, n, maxEpoch, l.LogEndOffset(), nil
}

// ensureKeepTopic returns the keep topic, creating it with t's partition
// count; an existing one must be an ordinary topic with enough
// partitions.
func (s *Server) ensureKeepTopic(name string, t *Topic) (*Topic, error) {
	want := int32(len(t.Partitions()))
	kt := s.cluster.topic(name)
	if kt == nil {
		cfg, err := s.topicConfig(map[string]string{
			"cleanup.policy": "delete", "retention.ms": "-1", "retention.bytes": "-1",
		})
		if err != nil {
			return nil, err
		}
		kt, err = s.cluster.createTopic(name, want, cfg, false)
		if errors.Is(err, errTopicExists) {
			kt = s.cluster.topic(name) // created meanwhile
		} else if err != nil {
			return nil, fmt.Errorf("creating the keep topic %s: %w", name, err)
		} else {
			s.log.Info("keep topic created for truncated batches", "topic", name, "for", t.Name, "partitions", want)
		}
		if kt == nil {
			return nil, kafkaErr(kerr.UnknownTopicOrPartition, fmt.Sprintf("the keep topic %s was deleted while it was created", name))
		}
	}
	if kt.Config().Mirror {
		return nil, kafkaErr(kerr.InvalidRequest, fmt.Sprintf("the keep topic %s is a mirror topic: a cut is kept in an ordinary topic", name))
	}
	if n := int32(len(kt.Partitions())); n < want {
		return nil, kafkaErr(kerr.InvalidPartitions, fmt.Sprintf("the keep topic %s has %d partitions, %s has %d: add partitions or name another keep topic", name, n, t.Name, want))
	}
	return kt, nil
}

// copyTail appends every batch of src whose last offset is at or above to
// into keep, verbatim at its offsets. An empty keep log first starts at
// the first batch's offset, so its earliest offset is the cut's.
func copyTail(ctx context.Context, src, keep *storage.Log, to int64) (batches int, n int64, maxEpoch int32, err error) {
	maxEpoch = -1
	var buf []byte
	first := true
	for next := max(to, src.LogStartOffset()); next < src.LogEndOffset(); {
		if err := ctx.Err(); err != nil {
			return batches, n, maxEpoch, err
		}
		sl, err := src.Read(next, keepCopyChunk)
		if err != nil {
			return batches, n, maxEpoch, err
		}
		if buf, err = sl.Bytes(buf[:0]); err != nil {
			return batches, n, maxEpoch, err
		}
		if len(buf) == 0 {
			break
		}
		// Read starts at the batch containing next: that batch goes too.
		if first {
			first = false
			base := kbatch.BaseOffset(buf)
			if keep.LogEndOffset() == keep.LogStartOffset() && keep.LogEndOffset() != base {
				if err := keep.TruncateFullyAndStartAt(base); err != nil {
					return batches, n, maxEpoch, err
				}
			}
		}
		if _, err := keep.AppendVerbatim(buf); err != nil {
			if errors.Is(err, storage.ErrOffsetBelowLogEnd) {
				return batches, n, maxEpoch, kafkaErr(kerr.InvalidRequest, fmt.Sprintf(
					"the keep topic already holds other batches at offsets from %d (an earlier truncation?): name another keep topic", kbatch.BaseOffset(buf)))
			}
			return batches, n, maxEpoch, err
		}
		for it := kbatch.Batches(buf); it.Next(); {
			b := it.Batch()
			batches++
			n += int64(len(b))
			maxEpoch = max(maxEpoch, kbatch.LeaderEpoch(b))
			next = kbatch.BaseOffset(b) + int64(kbatch.LastOffsetDelta(b)) + 1
		}
	}
	return batches, n, maxEpoch, nil
}

// ConvertToPullMirror makes the existing writable topic (ordinary, or a
// stopped mirror) a pull-mode mirror topic of link (the failback, `mirror
// create --truncate-to-common`): mirror.mode=pull and mirror.link=link
// are added to its configs (sourceClusterID, when known, as
// mirror.source.cluster.id, which a later stop's barrier carries), and
// its mirror state starts afresh as "mirroring" with no registered
// writer, keeping every writer epoch assigned so far so that the link's
// registration is fenced above all of them. From then on clients'
// produces are refused; the ones admitted before are waited for (the
// partitions' queues drained) so that a truncation that follows sees
// them. Converting a topic that already is link's pull mirror does
// nothing (a repeated failback after a crash).
func (s *Server) ConvertToPullMirror(ctx context.Context, topic, link, sourceClusterID string) error {
	if s.cm != nil {
		return errRepairInCluster("converting a topic into a mirror (mirror create --truncate-to-common, the failback)")
	}
	t := s.cluster.topic(topic)
	if t == nil {
		return kafkaErr(kerr.UnknownTopicOrPartition, fmt.Sprintf("topic %s does not exist", topic))
	}
	if strings.HasPrefix(topic, "__") {
		return kafkaErr(kerr.InvalidRequest, fmt.Sprintf("internal topic %s is never mirrored", topic))
	}
	cfg := t.Config()
	switch {
	case cfg.MirrorPull && cfg.MirrorLink == link:
		return s.drainQueues(ctx, t)
	case cfg.Mirror:
		return kafkaErr(kerr.InvalidRequest, fmt.Sprintf("topic %s is already a mirror topic (mirror.mode=%s%s): stop it first (verbatim mirror stop)", topic, mirrorModeOf(cfg), linkSuffix(cfg)))
	}
	st, err := s.mirrorStateOf(t)
	if err != nil {
		return err
	}
	if st.State == mirrorStateStopping {
		return kafkaErr(kerr.InvalidRequest, fmt.Sprintf("topic %s has a mirror stop in progress: complete it first (verbatim mirror stop)", topic))
	}
	if err := s.updateMirrorState(t, func(st *mirrorTopicState) error {
		st.State, st.SourceClusterID, st.TargetConfigs = mirrorStateMirroring, "", nil
		for i := range st.Partitions {
			fresh := newMirrorPartitionState()
			fresh.WriterEpoch = st.Partitions[i].WriterEpoch
			st.Partitions[i] = fresh
		}
		return nil
	}); err != nil {
		return err
	}
	next := cfg.Overrides()
	next[cfgMirrorMode], next[cfgMirrorLink] = "pull", link
	delete(next, cfgMirrorSourceClusterID)
	if sourceClusterID != "" {
		next[cfgMirrorSourceClusterID] = sourceClusterID
	}
	if err := s.setTopicOverrides(t, next); err != nil {
		return err
	}
	s.log.Warn("topic converted into a pull-mode mirror (failback): clients' produces are refused from now on",
		"topic", topic, "link", link, "source_cluster_id", sourceClusterID)
	return s.drainQueues(ctx, t)
}

func linkSuffix(c *TopicConfig) string {
	if c.MirrorLink == "" {
		return ""
	}
	return ", mirror.link=" + c.MirrorLink
}

// drainQueues waits until the appends queued on t's partitions before
// its config changed are done.
func (s *Server) drainQueues(ctx context.Context, t *Topic) error {
	for _, p := range t.Partitions() {
		h, err := partitionHandle(p)
		if err != nil {
			return err
		}
		for h.queue.Queued() > 0 {
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(time.Millisecond):
			}
		}
	}
	return nil
}

// PartitionEpochs answers topic/partition's leader-epoch cache (ascending
// epochs and start offsets), log start and log end: what the common point
// with a source is computed from.
func (s *Server) PartitionEpochs(topic string, partition int32) (entries []storage.EpochEntry, logStart, logEnd int64, err error) {
	t := s.cluster.topic(topic)
	if t == nil || t.Partition(partition) == nil {
		return nil, 0, 0, kafkaErr(kerr.UnknownTopicOrPartition, fmt.Sprintf("%s/%d: this server does not host this topic-partition", topic, partition))
	}
	l, err := partitionLog(t.Partition(partition))
	if err != nil {
		return nil, 0, 0, err
	}
	// The append lock: no mirror append between the cache and the end.
	p := t.Partition(partition)
	p.data.appendMu.Lock()
	defer p.data.appendMu.Unlock()
	return l.EpochCache().Entries(), l.LogStartOffset(), l.LogEndOffset(), nil
}

// MirrorStopPoint answers the last offset and leader epoch topic's
// partition mirrored before its mirror stop, as the stop persisted them
// (ok false when the topic never began a stop). A source that failed over
// shares nothing with its old source beyond this point: the failback's
// cross-check (DescribeMirrors' last mirrored point of a STOPPED
// partition).
func (s *Server) MirrorStopPoint(topic string, partition int32) (offset int64, epoch int32, ok bool) {
	t := s.cluster.topic(topic)
	if t == nil || t.Partition(partition) == nil {
		return -1, -1, false
	}
	st, err := s.mirrorStateOf(t)
	if err != nil || int(partition) >= len(st.Partitions) || !st.Partitions[partition].Stopping {
		return -1, -1, false
	}
	ps := st.Partitions[partition]
	return ps.LastMirroredOffset, ps.LastMirroredEpoch, true
}

package link

// The two repair operations of the Manager (docs/mirroring.md "Divergence
// and failback"):
//
//   - TruncateMirrorTopics (`mirror truncate --to-divergence`): the
//     partitions of a link's pull-mode topic that are FAILED by divergence
//     are truncated to the point they share with the source (the cut kept
//     in a keep topic) and resume: PREPARING, then MIRRORING.
//   - StartMirrorTopics with TruncateToCommon (`mirror create --link L
//     --topics t --truncate-to-common`, the failback): an existing writable
//     topic (ordinary, or a stopped mirror) becomes a pull-mode mirror of
//     L: clients are refused from then on, each partition is truncated to
//     the point it shares with L's source (cut kept), and L mirrors the
//     source's later writes with a fresh writer registration.
//
// The topic is kept paused (persisted) while it is converted and cut, so
// no copy of the runner starts on a log about to be truncated; a crash in
// between leaves it paused: `mirror resume` then meets the divergence
// (FAILED) and `mirror truncate --to-divergence` completes the repair.
// The broker's handlers authorized the requests and audit them.

import (
	"context"
	"fmt"
	"sort"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/verbatim-kafka/verbatim/wireext"
)

// installRepair fills the Manager's repair hooks.
func (m *Manager) installRepair() {
	m.truncate = m.truncateToDivergence
	m.repair = m.failback
}

// isDivergence reports a failure by divergence.
func isDivergence(f failure) bool {
	return f.Divergence >= 0 || strings.HasPrefix(f.Reason, "divergence")
}

// linkOfTopic is the running link whose pull-mode topic name is.
func (m *Manager) linkOfTopic(name string) (*runner, error) {
	info, ok := m.host.LinkTopic(name)
	if !ok {
		return nil, kafkaErr(kerr.UnknownTopicOrPartition, "topic %s does not exist", name)
	}
	if info.MirrorMode != "pull" {
		mode := info.MirrorMode
		if mode == "" {
			mode = "none: an ordinary topic"
		}
		return nil, kafkaErr(kerr.InvalidRequest, "topic %s is not a mirror topic of a cluster link (mirror.mode %s): only a link's FAILED partitions are truncated; failback of a writable topic is mirror create --truncate-to-common", name, mode)
	}
	r := m.link(info.MirrorLink)
	if r == nil {
		return nil, kafkaErr(kerr.InvalidRequest, "topic %s belongs to link %s, which does not exist", name, info.MirrorLink)
	}
	return r, nil
}

// truncateToDivergence is TruncateMirrorTopics.
func (m *Manager) truncateToDivergence(ctx context.Context, req wireext.TruncateMirrorTopicsRequest) ([]wireext.MirrorTopicResult, error) {
	if len(req.Topics) == 0 {
		return nil, kafkaErr(kerr.InvalidRequest, "mirror truncate names no topic")
	}
	out := make([]wireext.MirrorTopicResult, 0, len(req.Topics))
	for _, name := range req.Topics {
		res := wireext.MirrorTopicResult{Topic: name}
		parts, err := m.truncateTopic(ctx, name, req.KeepTopic)
		res.Partitions = parts
		if err != nil {
			res.ErrorCode, res.ErrorMessage = errCode(err), err.Error()
		}
		out = append(out, res)
	}
	return out, nil
}

func (m *Manager) truncateTopic(ctx context.Context, name, keep string) ([]wireext.TruncatedPartition, error) {
	r, err := m.linkOfTopic(name)
	if err != nil {
		return nil, err
	}
	r.mu.Lock()
	var diverged, other []int32
	if tm := r.meta.Topics[name]; tm != nil {
		for p, f := range tm.Failed {
			if isDivergence(f) {
				diverged = append(diverged, p)
			} else {
				other = append(other, p)
			}
		}
	}
	r.mu.Unlock()
	if len(diverged) == 0 {
		msg := fmt.Sprintf("no partition of %s is FAILED by divergence: nothing to truncate (mirror status shows its states)", name)
		if len(other) > 0 {
			msg += fmt.Sprintf("; partitions %v are FAILED for other reasons (mirror resume retries them)", other)
		}
		return nil, kafkaErr(kerr.InvalidRequest, "%s", msg)
	}
	sort.Slice(diverged, func(i, j int) bool { return diverged[i] < diverged[j] })
	var parts []wireext.TruncatedPartition
	for _, p := range diverged {
		if pr := r.part(name, p); pr != nil {
			pr.halt()
		}
		tp, cp, err := TruncateToCommon(ctx, m.host, name, p, keep, -1, sourceEpochs(ctx, r.src, name, p), nil)
		if err != nil {
			return parts, fmt.Errorf("%s/%d: %w", name, p, err)
		}
		parts = append(parts, tp)
		if err := r.clearFailure(name, p); err != nil {
			return parts, kafkaErr(kerr.KafkaStorageError, "%s/%d truncated, but its restart was not persisted: %v", name, p, err)
		}
		r.log.Warn("mirror partition truncated to the common point with the source; it resumes", "topic", name, "partition", p,
			"common_offset", cp.Offset, "common_epoch", cp.Epoch, "removed_batches", tp.RemovedBatches, "kept_in", tp.KeptIn)
	}
	r.poke()
	return parts, nil
}

// failback is StartMirrorTopics with TruncateToCommon for link r.
func (m *Manager) failback(ctx context.Context, r *runner, req wireext.StartMirrorTopicsRequest) ([]wireext.MirrorTopicResult, error) {
	out := make([]wireext.MirrorTopicResult, 0, len(req.Topics))
	for _, name := range req.Topics {
		res := wireext.MirrorTopicResult{Topic: name}
		parts, err := m.failbackTopic(ctx, r, name, req.KeepTopic)
		res.Partitions = parts
		if err != nil {
			res.ErrorCode, res.ErrorMessage = errCode(err), err.Error()
		}
		out = append(out, res)
	}
	r.poke()
	return out, nil
}

func (m *Manager) failbackTopic(ctx context.Context, r *runner, name, keep string) ([]wireext.TruncatedPartition, error) {
	if strings.HasPrefix(name, "__") {
		return nil, kafkaErr(kerr.InvalidRequest, "internal topic %s is never mirrored", name)
	}
	md, err := r.src.Metadata(ctx, []string{name})
	if err != nil {
		return nil, kafkaErr(kerr.NetworkException, "link %s: the source's metadata of %s: %v", r.name, name, err)
	}
	sm := md[name]
	info, ok := m.host.LinkTopic(name)
	if !ok {
		// Nothing to truncate: created like the source's.
		return nil, r.startTopic(ctx, name, sm)
	}
	if sm == nil || sm.Err != nil {
		return nil, kafkaErr(kerr.UnknownTopicOrPartition, "link %s: the source has no topic %s", r.name, name)
	}
	switch {
	case info.MirrorMode == "pull" && info.MirrorLink == r.name:
		// A failback repeated after a crash: convert again (nothing
		// changes) and truncate.
	case info.MirrorMode != "":
		return nil, kafkaErr(kerr.InvalidRequest, "topic %s is a live mirror topic (mirror.mode=%s, mirror.link=%s): stop it first (mirror stop)", name, info.MirrorMode, info.MirrorLink)
	case info.MirrorState == "stopping":
		return nil, kafkaErr(kerr.InvalidRequest, "topic %s has a mirror stop in progress: complete it first (mirror stop)", name)
	}
	if n := int32(len(sm.Partitions)); n < info.Partitions {
		return nil, kafkaErr(kerr.InvalidPartitions, "topic %s has %d partitions here but %d on the source: a mirror cannot hold partitions its source lacks", name, info.Partitions, n)
	}
	cl := r.src.Client()
	if cl == nil {
		return nil, kafkaErr(kerr.InvalidRequest, "link %s: failback needs a source reached through package client", r.name)
	}
	limits, err := SourceMirroredLimits(ctx, cl, name)
	if err != nil {
		r.log.Warn("failback: the source's last mirrored points are unavailable; OffsetForLeaderEpoch alone decides", "topic", name, "err", err)
	}
	// Paused first (persisted, and a copy already running halted: a
	// repeated failback of the link's own mirror): no copy appends before
	// the cut is done.
	err = r.update(func(lm *linkMeta) {
		tm := lm.topic(name)
		tm.Added, tm.Mirrored = true, true
		tm.Failed = nil
	})
	if err == nil {
		err = r.setPaused(ctx, name, true)
	}
	if err != nil {
		return nil, kafkaErr(kerr.KafkaStorageError, "persisting link %s's topic %s: %v", r.name, name, err)
	}
	if err := m.host.ConvertToPullMirror(ctx, name, r.name, r.src.ClusterID()); err != nil {
		return nil, err
	}
	// After the conversion: until then a sync round may have taken the
	// topic (a mirror state, no mirror.mode) for the link's stopped one.
	r.mu.Lock()
	delete(r.stopped, name)
	delete(r.skipped, name)
	r.mu.Unlock()
	var parts []wireext.TruncatedPartition
	for p := int32(0); p < info.Partitions; p++ {
		limit := int64(-1)
		if l, ok := limits[p]; ok {
			limit = l
		}
		read := func(off int64) ([]byte, error) { return m.host.ReadMirrorLog(name, p, off, 1<<20) }
		sameAt := func(off int64) (bool, error) { return SameBatchAt(ctx, read, cl, name, p, off) }
		tp, cp, err := TruncateToCommon(ctx, m.host, name, p, keep, limit, sourceEpochs(ctx, r.src, name, p), sameAt)
		if err != nil {
			return parts, fmt.Errorf("%s/%d: %w (the topic stays a paused mirror of link %s: mirror create --truncate-to-common again, or mirror resume)", name, p, err, r.name)
		}
		parts = append(parts, tp)
		r.log.Warn("failback: partition truncated to the common point with the link's source", "topic", name, "partition", p,
			"common_offset", cp.Offset, "common_epoch", cp.Epoch, "source_limit", limit, "removed_batches", tp.RemovedBatches, "kept_in", tp.KeptIn)
	}
	if err := r.setPaused(ctx, name, false); err != nil {
		return parts, kafkaErr(kerr.KafkaStorageError, "%s truncated, but resuming it was not persisted: %v (mirror resume)", name, err)
	}
	return parts, nil
}

// part is the partition's run, nil when none was made yet.
func (r *runner) part(topic string, partition int32) *partRun {
	r.mu.Lock()
	defer r.mu.Unlock()
	if ps := r.parts[topic]; int(partition) < len(ps) {
		return ps[partition]
	}
	return nil
}

package link

// Continuous sync (docs/mirroring.md "Continuous sync"): after each
// discovery round of a link (runner.syncRound), what keeps its mirror
// topics in step with the source besides the data:
//
//   - a source topic deleted puts its partitions in FAILED ("source topic
//     deleted"); one re-created (its topic id changed) in FAILED ("source
//     topic re-created: id X, was Y"), before discovery could add or copy
//     anything of the new topic: never silently re-mirrored;
//   - with SyncConfigs, the topic configs set explicitly on the source
//     (DescribeConfigs) onto the mirror topics, through the broker's own
//     config path, except mirror.* and the configs that stay local
//     (localConfig);
//   - with Groups, the committed offsets of the matching source groups
//     for the link's mirror topics, for groups with no members on the
//     destination, clamped into the destination partition's range
//     (mirror.Clamp, KIP-1279's rule), with their leader epoch and
//     metadata, committed through the group coordinator in process.
//
// New source partitions are discovery's (runner.ensureTopic).

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/verbatim-kafka/verbatim/broker"
	"github.com/verbatim-kafka/verbatim/client"
	"github.com/verbatim-kafka/verbatim/mirror"
)

// Reasons of the partitions continuous sync puts in FAILED.
const (
	reasonSourceDeleted   = "source topic deleted"
	reasonSourceRecreated = "source topic re-created"
)

// localConfigs are the topic configs a config sync never copies and never
// removes: settings of the destination cluster's own replication and
// storage, which mean nothing (or something else) for another cluster.
// MirrorMaker 2's config.properties.exclude defaults list the throttled
// replicas, min.insync.replicas and unclean.leader.election.enable (and
// two timestamp configs, which a byte-exact mirror does copy: producers
// must see the same rules after a failover); Confluent's cluster links
// never sync tiered storage and replica placement (confluent.*).
var localConfigs = map[string]bool{
	"leader.replication.throttled.replicas":   true,
	"follower.replication.throttled.replicas": true,
	"min.insync.replicas":                     true,
	"unclean.leader.election.enable":          true,
	"remote.storage.enable":                   true,
	"local.retention.ms":                      true,
	"local.retention.bytes":                   true,
	"remote.log.copy.disable":                 true,
	"remote.log.delete.on.disable":            true,
	"remote.copy.lag.bytes":                   true,
	"remote.copy.lag.ms":                      true,
}

// SyncedTopicConfig reports whether a link copies topic config name from
// the source (at creation and, with SyncConfigs, every sync interval):
// not mirror.*, not confluent.*, not a local one (localConfigs).
func SyncedTopicConfig(name string) bool {
	return !strings.HasPrefix(name, "mirror.") && !strings.HasPrefix(name, "confluent.") && !localConfigs[name]
}

// formatID prints a topic id as Kafka does (Uuid.toString).
func formatID(id [16]byte) string { return base64.RawURLEncoding.EncodeToString(id[:]) }

// syncRoundDone, when set (by tests, before any runner starts), is
// called at the end of each sync round.
var syncRoundDone func(r *runner)

// syncRunner is the Manager's sync hook.
func syncRunner(ctx context.Context, r *runner) {
	if syncRoundDone != nil {
		defer syncRoundDone(r)
	}
	topics := r.syncTopics()
	if len(topics) == 0 || ctx.Err() != nil {
		return
	}
	// On a cluster the topics' sync is the link coordinator's; every
	// broker syncs the groups it coordinates (the others' answer
	// NOT_COORDINATOR here and are skipped).
	cfg := r.Config()
	if r.m.coordinator() {
		topics = r.syncSourceTopics(ctx, topics)
		if cfg.SyncConfigs && len(topics) > 0 {
			r.syncConfigs(ctx, topics)
		}
	}
	if cfg.Groups != "" && len(topics) > 0 {
		r.syncGroups(ctx, cfg.Groups, topics)
	}
}

// syncTopics are the link's topics that are its pull-mode mirrors now
// (a stopped topic is the destination's own: nothing of it is synced).
func (r *runner) syncTopics() []broker.LinkTopicInfo {
	var out []broker.LinkTopicInfo
	for _, n := range r.Topics() {
		info, ok := r.m.host.LinkTopic(n)
		if ok && info.MirrorMode == "pull" && info.MirrorLink == r.name &&
			info.MirrorState != broker.MirrorStateStopping && info.MirrorState != broker.MirrorStateStopped {
			out = append(out, info)
		}
	}
	return out
}

// syncSourceTopics asks the source for the link's topics by name (so a
// topic the link may no longer DESCRIBE answers TOPIC_AUTHORIZATION_FAILED,
// not absence) and fails the deleted and re-created ones; it returns the
// topics still the source's.
func (r *runner) syncSourceTopics(ctx context.Context, topics []broker.LinkTopicInfo) []broker.LinkTopicInfo {
	names := make([]string, len(topics))
	for i, t := range topics {
		names[i] = t.Name
	}
	md, err := r.src.Metadata(ctx, names)
	if err != nil {
		if ctx.Err() == nil {
			r.log.Debug("continuous sync: source metadata", "err", err)
		}
		return nil
	}
	var out []broker.LinkTopicInfo
	for _, t := range topics {
		sm := md[t.Name]
		switch {
		case sm == nil:
			// Not answered at all: nothing to conclude.
		case errors.Is(sm.Err, client.ErrTopicMissing):
			r.failTopic(t.Name, t.Partitions, reasonSourceDeleted, func(old string) bool {
				return old == reasonSourceDeleted || strings.HasPrefix(old, reasonSourceRecreated)
			})
		case sm.Err != nil:
			r.log.Debug("continuous sync: source topic", "topic", t.Name, "err", sm.Err)
		case r.sourceReplaced(t.Name, sm.ID):
		default:
			out = append(out, t)
		}
	}
	return out
}

// sourceReplaced reports whether the source topic now has another id
// than the one the link first mirrored (recorded then, persisted), and if
// so fails all the topic's partitions naming both ids. The first id seen
// is recorded: the source's id of a topic the link created (which the
// mirror topic keeps), or of the source a converted topic mirrors from
// its conversion on (failback). A source without topic ids (zero) is not
// compared.
func (r *runner) sourceReplaced(topic string, srcID [16]byte) bool {
	if srcID == ([16]byte{}) {
		return false
	}
	id := formatID(srcID)
	r.mu.Lock()
	var was string
	if tm := r.meta.Topics[topic]; tm != nil {
		was = tm.SourceID
	}
	r.mu.Unlock()
	switch was {
	case id:
		return false
	case "":
		if err := r.update(func(lm *linkMeta) { lm.topic(topic).SourceID = id }); err != nil {
			r.log.Warn("persisting the source topic's id", "topic", topic, "err", err)
		}
		return false
	}
	info, ok := r.m.host.LinkTopic(topic)
	if !ok {
		return true
	}
	reason := fmt.Sprintf("%s: id %s, was %s", reasonSourceRecreated, id, was)
	r.failTopic(topic, info.Partitions, reason, func(old string) bool { return old == reason })
	return true
}

// createdTopics records, for mirror topics the link just created, the
// source topic id each mirrors and that the link mirrors it, and forgets
// the failures of an earlier destination topic of that name (deleted
// since, e.g. to mirror a re-created source topic anew): one persisted
// update for the batch.
func (r *runner) createdTopics(created []broker.PullTopic) {
	err := r.update(func(lm *linkMeta) {
		for _, pt := range created {
			id := ""
			if pt.ID != ([16]byte{}) {
				id = formatID(pt.ID)
			}
			tm := lm.topic(pt.Name)
			tm.SourceID, tm.Failed, tm.Mirrored = id, nil, true
		}
	})
	if err != nil {
		r.log.Warn("persisting the created topics' source ids", "topics", len(created), "err", err)
	}
}

// failTopic puts partitions [0, n) of topic in FAILED with reason, in one
// persisted update, and ends their copies. A partition whose failure
// keep accepts keeps it (nothing is rewritten round after round).
func (r *runner) failTopic(topic string, n int32, reason string, keep func(old string) bool) {
	var changed []int32
	err := r.update(func(lm *linkMeta) {
		tm := lm.topic(topic)
		if tm.Failed == nil {
			tm.Failed = map[int32]failure{}
		}
		for p := int32(0); p < n; p++ {
			if f, ok := tm.Failed[p]; ok && keep(f.Reason) {
				continue
			}
			tm.Failed[p] = failure{Reason: reason, Divergence: -1}
			changed = append(changed, p)
		}
	})
	if err != nil {
		r.log.Error("persisting the failure of a topic's partitions", "topic", topic, "reason", reason, "err", err)
		return
	}
	if len(changed) == 0 {
		return
	}
	r.mu.Lock()
	var halt []*partRun
	for _, pr := range r.parts[topic] {
		halt = append(halt, pr)
	}
	r.mu.Unlock()
	for _, pr := range halt {
		pr.halt()
	}
	r.log.Warn("mirror partitions failed", "topic", topic, "partitions", len(changed), "reason", reason)
}

// syncedConfigs computes a mirror topic's configs from its current ones
// (cur) and the source's explicitly set ones (src): the synced names take
// the source's values (those the broker knows), or are removed when the
// source does not set them; mirror.* and local configs stay as they are.
// changed lists the names that differ, sorted; unknown the source's
// synced names the broker does not know.
func syncedConfigs(cur, src map[string]string, known func(string) bool) (next map[string]string, changed, unknown []string) {
	next = make(map[string]string, len(cur)+len(src))
	for k, v := range cur {
		if !SyncedTopicConfig(k) {
			next[k] = v
		}
	}
	for k, v := range src {
		switch {
		case !SyncedTopicConfig(k):
		case !known(k):
			unknown = append(unknown, k)
		default:
			next[k] = v
		}
	}
	for k, v := range next {
		if ov, ok := cur[k]; !ok || ov != v {
			changed = append(changed, k)
		}
	}
	for k := range cur {
		if _, ok := next[k]; !ok {
			changed = append(changed, k)
		}
	}
	sort.Strings(changed)
	sort.Strings(unknown)
	return next, changed, unknown
}

// syncConfigs brings the topics' configs in line with the source's.
func (r *runner) syncConfigs(ctx context.Context, topics []broker.LinkTopicInfo) {
	names := make([]string, len(topics))
	for i, t := range topics {
		names[i] = t.Name
	}
	src, errs, err := r.src.TopicsConfigs(ctx, names)
	if err != nil {
		if ctx.Err() == nil {
			r.log.Debug("continuous sync: source configs", "err", err)
		}
		return
	}
	h := r.m.host
	for _, t := range topics {
		sc, ok := src[t.Name]
		if !ok {
			if e := errs[t.Name]; e != nil {
				r.warnOnce("configs/"+t.Name, "continuous sync: the source's topic configs", "topic", t.Name, "err", e)
			}
			continue
		}
		next, changed, unknown := syncedConfigs(t.Configs, sc, h.IsTopicConfig)
		if len(unknown) > 0 {
			r.warnOnce("unknown/"+t.Name+"/"+strings.Join(unknown, ","), "continuous sync: source topic configs this broker does not know are not copied", "topic", t.Name, "configs", unknown)
		}
		if len(changed) == 0 {
			continue
		}
		err := h.SetLinkTopicConfigs(r.name, t.Name, next)
		if err == nil {
			r.log.Info("synced topic configs from the source", "topic", t.Name, "configs", changed)
			continue
		}
		// One refused value must not hold back the others: apply them
		// one at a time, keeping the refused ones as they are.
		r.syncConfigsOneByOne(t, next, changed)
	}
}

// syncConfigsOneByOne applies the changed names of next to t one at a
// time, logging the ones the broker refuses.
func (r *runner) syncConfigsOneByOne(t broker.LinkTopicInfo, next map[string]string, changed []string) {
	cur := make(map[string]string, len(t.Configs))
	for k, v := range t.Configs {
		cur[k] = v
	}
	var applied []string
	for _, k := range changed {
		try := make(map[string]string, len(cur)+1)
		for ck, cv := range cur {
			try[ck] = cv
		}
		if v, ok := next[k]; ok {
			try[k] = v
		} else {
			delete(try, k)
		}
		if err := r.m.host.SetLinkTopicConfigs(r.name, t.Name, try); err != nil {
			r.warnOnce("refused/"+t.Name+"/"+k+"="+next[k], "continuous sync: the broker refused a source topic config; kept as it is", "topic", t.Name, "config", k, "err", err)
			continue
		}
		cur = try
		applied = append(applied, k)
	}
	if len(applied) > 0 {
		r.log.Info("synced topic configs from the source", "topic", t.Name, "configs", applied)
	}
}

// syncGroups copies the committed offsets of the source groups matching
// pattern for topics.
func (r *runner) syncGroups(ctx context.Context, pattern string, topics []broker.LinkTopicInfo) {
	re, err := client.CompileGroups(pattern)
	if err != nil {
		return // refused at creation
	}
	groups, err := r.src.ListGroups(ctx, re)
	if err != nil {
		if ctx.Err() == nil {
			r.warnOnce("groups", "continuous sync: listing the source's groups", "err", err)
		}
		return
	}
	names := make([]string, len(topics))
	for i, t := range topics {
		names[i] = t.Name
	}
	for _, g := range groups {
		if ctx.Err() != nil {
			return
		}
		r.syncGroup(ctx, g, names)
	}
}

// syncGroup copies one group's offsets, unless it has members here.
func (r *runner) syncGroup(ctx context.Context, group string, topics []string) {
	h := r.m.host
	if n, state, err := h.LinkGroupMembers(group); err != nil || n > 0 {
		if n > 0 {
			r.log.Debug("continuous sync: the group has members on the destination; offsets not synced", "group", group, "state", state, "members", n)
		}
		return
	}
	src, err := r.src.FetchGroupOffsets(ctx, group, topics)
	if err != nil {
		if ctx.Err() == nil {
			r.warnOnce("group/"+group, "continuous sync: the source group's offsets", "group", group, "err", err)
		}
		return
	}
	want := clampGroupOffsets(src, h.LinkGroupRange)
	have, err := h.LinkGroupOffsets(group)
	if err != nil {
		return
	}
	todo := changedOffsets(want, have)
	if len(todo) == 0 {
		return
	}
	errs, err := h.CommitLinkGroupOffsets(group, todo)
	if errors.Is(err, broker.ErrLinkGroupActive) {
		r.log.Debug("continuous sync: the group gained members on the destination; offsets not synced", "group", group)
		return
	}
	if err != nil {
		r.warnOnce("commit/"+group, "continuous sync: committing the group's offsets", "group", group, "err", err)
		return
	}
	for i, e := range errs {
		if e != nil {
			r.warnOnce("commit/"+group+"/"+todo[i].Topic, "continuous sync: a group offset was refused", "group", group, "topic", todo[i].Topic, "partition", todo[i].Partition, "err", e)
		}
	}
	r.log.Info("synced group offsets from the source", "group", group, "partitions", len(todo))
}

// clampGroupOffsets maps source commits to what the destination holds:
// the same leader epoch and metadata, the offset put into the destination
// partition's [log start, high watermark] (mirror.Clamp, the pusher's and
// KIP-1279's rule; verify clamps the same way on its own). Partitions the
// destination lacks are left out.
func clampGroupOffsets(src []client.GroupOffset, rangeOf func(string, int32) (int64, int64, error)) []broker.LinkGroupOffset {
	out := make([]broker.LinkGroupOffset, 0, len(src))
	for _, o := range src {
		start, hw, err := rangeOf(o.Topic, o.Partition)
		if err != nil {
			continue
		}
		out = append(out, broker.LinkGroupOffset{Topic: o.Topic, Partition: o.Partition, Offset: mirror.Clamp(o.Offset, start, hw),
			LeaderEpoch: o.LeaderEpoch, Metadata: o.Metadata})
	}
	return out
}

// changedOffsets are the offsets of want the destination does not hold
// as they are.
func changedOffsets(want, have []broker.LinkGroupOffset) []broker.LinkGroupOffset {
	type tp struct {
		t string
		p int32
	}
	cur := make(map[tp]broker.LinkGroupOffset, len(have))
	for _, o := range have {
		cur[tp{o.Topic, o.Partition}] = o
	}
	var out []broker.LinkGroupOffset
	for _, o := range want {
		if c, ok := cur[tp{o.Topic, o.Partition}]; !ok || c != o {
			out = append(out, o)
		}
	}
	return out
}

// warnOnce logs a WARN line once per key for the runner's lifetime (a
// refusal repeated every sync interval is logged once).
func (r *runner) warnOnce(key, msg string, args ...any) {
	r.mu.Lock()
	if r.warned == nil {
		r.warned = map[string]bool{}
	}
	seen := r.warned[key]
	r.warned[key] = true
	r.mu.Unlock()
	if !seen {
		r.log.Warn(msg, args...)
	}
}

package link

// The Manager's per-topic requests: StartMirrorTopics, PauseMirrorTopics,
// DescribeLinks and DescribeMirrors.

import (
	"context"
	"errors"
	"sort"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/verbatim-kafka/verbatim/broker"
	"github.com/verbatim-kafka/verbatim/client"
	"github.com/verbatim-kafka/verbatim/secret"
	"github.com/verbatim-kafka/verbatim/wireext"
)

// Reason of the partitions of a force-deleted link's topics.
const reasonLinkDeleted = "link deleted"

// StartMirrorTopics makes the named source topics mirror topics of the
// link (created like the source's); an existing ordinary topic only with
// TruncateToCommon (link-repair's hook).
func (m *Manager) StartMirrorTopics(ctx context.Context, principal string, req wireext.StartMirrorTopicsRequest) ([]wireext.MirrorTopicResult, error) {
	r := m.link(req.Link)
	if r == nil {
		return nil, kafkaErr(kerr.ResourceNotFound, "link %s does not exist", req.Link)
	}
	if req.TruncateToCommon {
		if m.repair == nil {
			return nil, kafkaErr(kerr.InvalidRequest, "mirror create --truncate-to-common is not available on this broker")
		}
		return m.repair(ctx, r, req)
	}
	md, err := r.src.Metadata(ctx, req.Topics)
	if err != nil {
		return nil, kafkaErr(kerr.NetworkException, "link %s: source metadata: %v", req.Link, err)
	}
	out := make([]wireext.MirrorTopicResult, 0, len(req.Topics))
	for _, t := range req.Topics {
		res := wireext.MirrorTopicResult{Topic: t}
		if err := r.startTopic(ctx, t, md[t]); err != nil {
			res.ErrorCode, res.ErrorMessage = errCode(err), err.Error()
		}
		out = append(out, res)
	}
	r.poke()
	return out, nil
}

// startTopic adds topic to the link (persisted) and creates it.
func (r *runner) startTopic(ctx context.Context, topic string, sm *client.TopicMeta) error {
	switch {
	case strings.HasPrefix(topic, "__"):
		return kafkaErr(kerr.InvalidTopicException, "topic %s: %s", topic, reasonInternal)
	case sm == nil || errors.Is(sm.Err, client.ErrTopicMissing):
		return kafkaErr(kerr.UnknownTopicOrPartition, "topic %s does not exist on the source", topic)
	case sm.Err != nil:
		return kafkaErr(kerr.UnknownServerError, "source topic %s: %v", topic, sm.Err)
	}
	if info, ok := r.m.host.LinkTopic(topic); ok && !(info.MirrorMode == "pull" && info.MirrorLink == r.name) {
		if info.MirrorMode == "" {
			return kafkaErr(kerr.TopicAlreadyExists, "topic %s: %s", topic, reasonOrdinary)
		}
		return kafkaErr(kerr.TopicAlreadyExists, "topic %s is a mirror topic of another writer (mirror.mode=%s, mirror.link=%s)", topic, info.MirrorMode, info.MirrorLink)
	}
	if err := r.update(func(lm *linkMeta) { lm.topic(topic).Added = true }); err != nil {
		return kafkaErr(kerr.KafkaStorageError, "persisting topic %s of link %s: %v", topic, r.name, err)
	}
	r.createTopics(ctx, map[string]*client.TopicMeta{topic: sm}, []string{topic})
	r.ensureTopic(ctx, topic, sm, true) // the request's broker records it, coordinator or not
	if _, ok := r.m.host.LinkTopic(topic); !ok {
		return kafkaErr(kerr.UnknownServerError, "topic %s could not be created (see the broker log)", topic)
	}
	return nil
}

// PauseMirrorTopics pauses or resumes topics of a link (all of Link's
// when none is named), persisted before it answers.
func (m *Manager) PauseMirrorTopics(ctx context.Context, principal string, req wireext.PauseMirrorTopicsRequest) ([]wireext.MirrorTopicResult, error) {
	topics := req.Topics
	if len(topics) == 0 {
		r := m.link(req.Link)
		if r == nil {
			return nil, kafkaErr(kerr.ResourceNotFound, "link %s does not exist", req.Link)
		}
		topics = r.Topics()
	}
	out := make([]wireext.MirrorTopicResult, 0, len(topics))
	for _, t := range topics {
		res := wireext.MirrorTopicResult{Topic: t}
		if err := m.pauseTopic(ctx, req.Link, t, req.Pause); err != nil {
			res.ErrorCode, res.ErrorMessage = errCode(err), err.Error()
		}
		out = append(out, res)
	}
	return out, nil
}

func (m *Manager) pauseTopic(ctx context.Context, link, topic string, pause bool) error {
	info, ok := m.host.LinkTopic(topic)
	if !ok {
		return kafkaErr(kerr.UnknownTopicOrPartition, "topic %s does not exist", topic)
	}
	if info.MirrorMode != "pull" || link != "" && info.MirrorLink != link {
		return kafkaErr(kerr.InvalidRequest, "topic %s is not a pull-mode mirror topic of link %s (mirror.mode=%s, mirror.link=%s)", topic, link, info.MirrorMode, info.MirrorLink)
	}
	r := m.link(info.MirrorLink)
	if r == nil {
		return kafkaErr(kerr.InvalidRequest, "topic %s: its link %s was deleted", topic, info.MirrorLink)
	}
	if err := r.setPaused(ctx, topic, pause); err != nil {
		return kafkaErr(kerr.KafkaStorageError, "persisting the pause of %s: %v", topic, err)
	}
	return nil
}

// DescribeLinks describes the named links, or all.
func (m *Manager) DescribeLinks(ctx context.Context, names []string) ([]wireext.LinkDescription, error) {
	if len(names) == 0 {
		for _, r := range m.Links() {
			names = append(names, r.name)
		}
	}
	out := make([]wireext.LinkDescription, 0, len(names))
	for _, n := range names {
		r := m.link(n)
		if r == nil {
			out = append(out, wireext.LinkDescription{ErrorCode: kerr.ResourceNotFound.Code, ErrorMessage: "link " + n + " does not exist",
				Config: wireext.LinkConfig{Name: n}})
			continue
		}
		out = append(out, m.describeLink(r))
	}
	return out, nil
}

func (m *Manager) describeLink(r *runner) wireext.LinkDescription {
	sts := m.linkStatuses(r, nil)
	r.mu.Lock()
	d := wireext.LinkDescription{Config: r.meta.Config, LinkID: r.id, SourceClusterID: r.srcClusterID, State: r.state, Reason: r.reason}
	skipped := make(map[string]string, len(r.skipped))
	for k, v := range r.skipped {
		skipped[k] = v
	}
	r.mu.Unlock()
	d.Config.SourceConfig = maskSecrets(d.Config.SourceConfig)
	byTopic := wireext.TopicStates(sts)
	for t, s := range byTopic {
		d.Topics = append(d.Topics, wireext.LinkTopic{Topic: t, State: s})
	}
	for t, why := range skipped {
		if _, ok := byTopic[t]; !ok {
			d.Topics = append(d.Topics, wireext.LinkTopic{Topic: t, State: wireext.StateSkipped, Reason: why})
		}
	}
	sort.Slice(d.Topics, func(i, j int) bool { return d.Topics[i].Topic < d.Topics[j].Topic })
	return d
}

// maskSecrets hides values of source properties that hold secrets.
// maskSecrets shows a link's source config with its secrets hidden
// (secret.IsSecretName), as Kafka's DescribeConfigs shows passwords.
func maskSecrets(cfg map[string]string) map[string]string { return secret.MaskConfig(cfg) }

// DescribeMirrors answers the mirror partitions' states: Link's topics,
// the named ones, or every mirror topic (push mirrors too).
func (m *Manager) DescribeMirrors(ctx context.Context, req wireext.DescribeMirrorsRequest) ([]wireext.MirrorPartitionStatus, error) {
	var want map[string]bool
	if len(req.Topics) > 0 {
		want = map[string]bool{}
		for _, t := range req.Topics {
			want[t] = true
		}
	}
	if req.Link != "" {
		r := m.link(req.Link)
		if r == nil {
			return nil, kafkaErr(kerr.ResourceNotFound, "link %s does not exist", req.Link)
		}
		return m.linkStatuses(r, want), nil
	}
	var out []wireext.MirrorPartitionStatus
	seen := map[string]bool{}
	for _, r := range m.Links() {
		for _, st := range m.linkStatuses(r, want) {
			seen[st.Topic] = true
			out = append(out, st)
		}
	}
	for _, info := range m.host.LinkTopics() {
		if seen[info.Name] || want != nil && !want[info.Name] || info.MirrorMode == "" {
			continue
		}
		out = append(out, m.orphanStatuses(info)...)
	}
	return out, nil
}

// orphanStatuses are the partitions of a mirror topic no running link
// owns: a push mirror's, or a force-deleted link's (FAILED "link
// deleted").
func (m *Manager) orphanStatuses(info broker.LinkTopicInfo) []wireext.MirrorPartitionStatus {
	out := make([]wireext.MirrorPartitionStatus, 0, info.Partitions)
	for p := int32(0); p < info.Partitions; p++ {
		st := wireext.MirrorPartitionStatus{Topic: info.Name, Partition: p, Link: info.MirrorLink, SourceHighWatermark: -1,
			LogEndOffset: -1, LastMirroredOffset: -1, LastMirroredEpoch: -1, DivergenceOffset: -1}
		if start, leo, err := m.host.MirrorLogRange(info.Name, p); err == nil {
			st.LogEndOffset = leo
			if leo > start {
				st.LastMirroredOffset = leo - 1
				st.LastMirroredEpoch, _ = m.host.LastBatchEpoch(info.Name, p)
			}
		}
		switch {
		case info.MirrorState == broker.MirrorStateStopping:
			st.State = wireext.StateStopping
		case info.MirrorMode == "pull":
			st.State, st.Reason = wireext.StateFailed, reasonLinkDeleted
		default:
			st.State = wireext.StateMirroring
		}
		out = append(out, st)
	}
	return out
}

// linkStatuses are the statuses of r's partitions (of the topics in want,
// or all), by topic and partition.
func (m *Manager) linkStatuses(r *runner, want map[string]bool) []wireext.MirrorPartitionStatus {
	r.mu.Lock()
	type entry struct {
		topic   string
		parts   []*partRun
		tm      topicMeta
		stopped bool
	}
	var es []entry
	for n, tm := range r.meta.Topics {
		if !tm.Mirrored || want != nil && !want[n] {
			continue
		}
		es = append(es, entry{topic: n, parts: append([]*partRun(nil), r.parts[n]...), tm: *tm, stopped: r.stopped[n]})
	}
	r.mu.Unlock()
	sort.Slice(es, func(i, j int) bool { return es[i].topic < es[j].topic })
	var out []wireext.MirrorPartitionStatus
	for _, e := range es {
		info, ok := m.host.LinkTopic(e.topic)
		if !ok {
			continue
		}
		for p := int32(0); p < info.Partitions; p++ {
			pr := (*partRun)(nil)
			if int(p) < len(e.parts) {
				pr = e.parts[p]
			} else {
				pr = newPartRun(r, e.topic, p) // not discovered yet: its persisted state
			}
			out = append(out, pr.status(info, &e.tm, e.stopped))
		}
	}
	return out
}

// errCode is the Kafka code of a LinkService error.
func errCode(err error) int16 {
	var ke *kerr.Error
	if errors.As(err, &ke) {
		return ke.Code
	}
	return kerr.UnknownServerError.Code
}

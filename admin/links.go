package admin

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"sort"

	"github.com/verbatim-kafka/verbatim/client"
	"github.com/verbatim-kafka/verbatim/wireext"
)

// The cluster link's commands (`verbatim link ...`, `verbatim mirror
// status|pause|resume|create|truncate`): Verbatim's link admin requests
// (wireext, docs/protocol.md "Cluster link APIs"), sent only to a broker
// that advertises the feature verbatim.mirror.link.

// ErrNoLinks is the answer of a broker that does not advertise the
// cluster link's admin requests (Apache Kafka, or a Verbatim broker
// without a link manager).
var ErrNoLinks = errors.New("the broker does not serve cluster links (ApiVersions lists no supported feature " + wireext.FeatureMirrorLink + ")")

// linkCall sends one link request to the seed broker and decodes its
// response into resp.
func linkCall(ctx context.Context, cl *client.Cluster, key int16, req, resp wireext.LinkMessage) error {
	cn, err := cl.Any(ctx)
	if err != nil {
		return err
	}
	if !cn.HasFeature(wireext.FeatureMirrorLink) {
		return fmt.Errorf("%s: %w", cn.Addr(), ErrNoLinks)
	}
	body, err := cn.RequestRaw(ctx, &client.RawRequest{APIKey: key, Version: 0, Flexible: true, Body: req.AppendTo(nil)})
	if err != nil {
		return fmt.Errorf("%s to %s: %w", wireext.LinkAPIName(key), cn.Addr(), err)
	}
	if err := resp.ReadFrom(body); err != nil {
		return fmt.Errorf("%s response from %s: %w", wireext.LinkAPIName(key), cn.Addr(), err)
	}
	return nil
}

// refusedMsg is refusal with a plain message.
func refusedMsg(resource string, code int16, msg string) error { return refusal(resource, code, &msg) }

// CreateLink creates a link (or only validates it).
func CreateLink(ctx context.Context, cl *client.Cluster, cfg wireext.LinkConfig, validateOnly bool) error {
	var resp wireext.CreateMirrorLinkResponse
	if err := linkCall(ctx, cl, wireext.APIKeyCreateMirrorLink, &wireext.CreateMirrorLinkRequest{Link: cfg, ValidateOnly: validateOnly}, &resp); err != nil {
		return err
	}
	return refusedMsg("link "+cfg.Name, resp.ErrorCode, resp.ErrorMessage)
}

// DeleteLink deletes a link; force deletes one whose topics are still
// mirrored (they go FAILED until stopped).
func DeleteLink(ctx context.Context, cl *client.Cluster, name string, force bool) error {
	var resp wireext.DeleteMirrorLinkResponse
	if err := linkCall(ctx, cl, wireext.APIKeyDeleteMirrorLink, &wireext.DeleteMirrorLinkRequest{Name: name, Force: force}, &resp); err != nil {
		return err
	}
	return refusedMsg("link "+name, resp.ErrorCode, resp.ErrorMessage)
}

// Link is a link as `link list` and `link describe` show it (secret
// source config values masked by the broker).
type Link struct {
	Name                string            `json:"name"`
	Source              string            `json:"source"`
	SourceConfig        map[string]string `json:"source_config"`
	Topics              string            `json:"topics"`
	Exclude             string            `json:"exclude"`
	Groups              string            `json:"groups"`
	SyncConfigs         bool              `json:"sync_configs"`
	SyncIntervalMs      int64             `json:"sync_interval_ms"`
	ThrottleBytesPerSec int64             `json:"throttle_bytes_per_sec"`
	LinkID              string            `json:"link_id"`
	SourceClusterID     string            `json:"source_cluster_id"`
	State               string            `json:"state"`
	Reason              string            `json:"reason"`
	MirrorTopics        []LinkTopic       `json:"mirror_topics"`
}

// LinkTopic is a topic a link's patterns match: its state, or SKIPPED
// with the reason.
type LinkTopic struct {
	Topic  string `json:"topic"`
	State  string `json:"state"`
	Reason string `json:"reason"`
}

func linkOf(d *wireext.LinkDescription) Link {
	c := d.Config
	l := Link{Name: c.Name, Source: c.SourceBootstrap, SourceConfig: c.SourceConfig, Topics: c.Topics, Exclude: c.Exclude, Groups: c.Groups,
		SyncConfigs: c.SyncConfigs, SyncIntervalMs: c.SyncIntervalMs, ThrottleBytesPerSec: c.ThrottleBytesPerSec,
		LinkID: hex.EncodeToString(d.LinkID[:]), SourceClusterID: d.SourceClusterID, State: d.State, Reason: d.Reason, MirrorTopics: []LinkTopic{}}
	if l.SourceConfig == nil {
		l.SourceConfig = map[string]string{}
	}
	for _, t := range d.Topics {
		l.MirrorTopics = append(l.MirrorTopics, LinkTopic{Topic: t.Topic, State: t.State, Reason: t.Reason})
	}
	return l
}

// describeLinks sends DescribeMirrorLinks.
func describeLinks(ctx context.Context, cl *client.Cluster, names []string) ([]wireext.LinkDescription, error) {
	var resp wireext.DescribeMirrorLinksResponse
	if err := linkCall(ctx, cl, wireext.APIKeyDescribeMirrorLinks, &wireext.DescribeMirrorLinksRequest{Names: names}, &resp); err != nil {
		return nil, err
	}
	if err := refusedMsg("links", resp.ErrorCode, resp.ErrorMessage); err != nil {
		return nil, err
	}
	return resp.Links, nil
}

// ListLinks returns every link, by name.
func ListLinks(ctx context.Context, cl *client.Cluster) ([]Link, error) {
	ds, err := describeLinks(ctx, cl, nil)
	if err != nil {
		return nil, err
	}
	out := []Link{}
	for i := range ds {
		if ds[i].ErrorCode == 0 {
			out = append(out, linkOf(&ds[i]))
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// DescribeLink returns one link.
func DescribeLink(ctx context.Context, cl *client.Cluster, name string) (*Link, error) {
	ds, err := describeLinks(ctx, cl, []string{name})
	if err != nil {
		return nil, err
	}
	for i := range ds {
		if ds[i].Config.Name != name && ds[i].ErrorCode == 0 {
			continue
		}
		if err := refusedMsg("link "+name, ds[i].ErrorCode, ds[i].ErrorMessage); err != nil {
			return nil, err
		}
		l := linkOf(&ds[i])
		return &l, nil
	}
	return nil, fmt.Errorf("link %s: the broker answered no description", name)
}

// TopicResult is one topic's outcome of `mirror create|pause|resume|truncate`.
type TopicResult struct {
	Topic     string               `json:"topic"`
	Error     string               `json:"error,omitempty"` // Kafka's error name
	Message   string               `json:"message,omitempty"`
	Truncated []TruncatedPartition `json:"truncated,omitempty"`
}

// TruncatedPartition is what a truncation removed from one partition.
type TruncatedPartition struct {
	Partition      int32  `json:"partition"`
	TruncatedTo    int64  `json:"truncated_to"`
	RemovedBatches int32  `json:"removed_batches"`
	RemovedBytes   int64  `json:"removed_bytes"`
	KeptIn         string `json:"kept_in"`
}

// topicResults converts a response's topics; err is the first refusal
// (request level first), nil when every topic succeeded.
func topicResults(code int16, msg string, ts []wireext.MirrorTopicResult) ([]TopicResult, error) {
	first := refusedMsg("request", code, msg)
	out := []TopicResult{}
	for _, t := range ts {
		r := TopicResult{Topic: t.Topic}
		if t.ErrorCode != 0 {
			r.Error, r.Message = ErrorName(t.ErrorCode), t.ErrorMessage
			if first == nil {
				first = refusedMsg("topic "+t.Topic, t.ErrorCode, t.ErrorMessage)
			}
		}
		for _, p := range t.Partitions {
			r.Truncated = append(r.Truncated, TruncatedPartition(p))
		}
		out = append(out, r)
	}
	return out, first
}

// StartMirrorTopics makes topics mirror topics of a link (`mirror
// create`); truncateToCommon converts existing topics (failback), keeping
// what it cuts in keepTopic.
func StartMirrorTopics(ctx context.Context, cl *client.Cluster, link string, topics []string, truncateToCommon bool, keepTopic string) ([]TopicResult, error) {
	var resp wireext.StartMirrorTopicsResponse
	req := &wireext.StartMirrorTopicsRequest{Link: link, Topics: topics, TruncateToCommon: truncateToCommon, KeepTopic: keepTopic}
	if err := linkCall(ctx, cl, wireext.APIKeyStartMirrorTopics, req, &resp); err != nil {
		return nil, err
	}
	return topicResults(resp.ErrorCode, resp.ErrorMessage, resp.Topics)
}

// PauseMirrorTopics pauses (or resumes) topics, or every topic of link
// when topics is empty.
func PauseMirrorTopics(ctx context.Context, cl *client.Cluster, link string, topics []string, pause bool) ([]TopicResult, error) {
	var resp wireext.PauseMirrorTopicsResponse
	if err := linkCall(ctx, cl, wireext.APIKeyPauseMirrorTopics, &wireext.PauseMirrorTopicsRequest{Link: link, Topics: topics, Pause: pause}, &resp); err != nil {
		return nil, err
	}
	return topicResults(resp.ErrorCode, resp.ErrorMessage, resp.Topics)
}

// TruncateMirrorTopics truncates FAILED-by-divergence topics to the point
// they share with the source and resumes them.
func TruncateMirrorTopics(ctx context.Context, cl *client.Cluster, topics []string, keepTopic string) ([]TopicResult, error) {
	var resp wireext.TruncateMirrorTopicsResponse
	if err := linkCall(ctx, cl, wireext.APIKeyTruncateMirrorTopics, &wireext.TruncateMirrorTopicsRequest{Topics: topics, KeepTopic: keepTopic}, &resp); err != nil {
		return nil, err
	}
	return topicResults(resp.ErrorCode, resp.ErrorMessage, resp.Topics)
}

// MirrorStatus is the answer of `mirror status`.
type MirrorStatus struct {
	Partitions []MirrorPartition `json:"partitions"`
}

// MirrorPartition is one mirror partition's state and progress.
type MirrorPartition struct {
	Topic               string `json:"topic"`
	Partition           int32  `json:"partition"`
	Link                string `json:"link"`
	State               string `json:"state"`
	Reason              string `json:"reason"`
	SourceHighWatermark int64  `json:"source_high_watermark"`
	LogEndOffset        int64  `json:"log_end_offset"`
	Lag                 int64  `json:"lag"`
	LagMs               int64  `json:"lag_ms"`
	LastMirroredOffset  int64  `json:"last_mirrored_offset"`
	LastMirroredEpoch   int32  `json:"last_mirrored_epoch"`
	BytesPerSec         int64  `json:"bytes_per_sec"`
	DivergenceOffset    int64  `json:"divergence_offset"`
}

// DescribeMirrors returns the mirror partitions of link, or of topics,
// or every one, by topic and partition.
func DescribeMirrors(ctx context.Context, cl *client.Cluster, link string, topics []string) (*MirrorStatus, error) {
	var resp wireext.DescribeMirrorsResponse
	if err := linkCall(ctx, cl, wireext.APIKeyDescribeMirrors, &wireext.DescribeMirrorsRequest{Link: link, Topics: topics}, &resp); err != nil {
		return nil, err
	}
	if err := refusedMsg("mirrors", resp.ErrorCode, resp.ErrorMessage); err != nil {
		return nil, err
	}
	st := &MirrorStatus{Partitions: []MirrorPartition{}}
	for _, p := range resp.Partitions {
		st.Partitions = append(st.Partitions, MirrorPartition(p))
	}
	sort.Slice(st.Partitions, func(i, j int) bool {
		a, b := st.Partitions[i], st.Partitions[j]
		return a.Topic < b.Topic || a.Topic == b.Topic && a.Partition < b.Partition
	})
	return st, nil
}

// LinkTopics are the topics of link's mirror partitions (`mirror stop
// --link`), sorted.
func LinkTopics(ctx context.Context, cl *client.Cluster, link string) ([]string, error) {
	st, err := DescribeMirrors(ctx, cl, link, nil)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, p := range st.Partitions {
		if len(out) == 0 || out[len(out)-1] != p.Topic {
			out = append(out, p.Topic)
		}
	}
	return out, nil
}

package admin

import (
	"context"
	"fmt"
	"sort"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/verbatim-kafka/verbatim/client"
)

// Maximum request versions the admin commands send; the connection
// negotiates down to what the broker supports.
const (
	vMetadata          = 12
	vCreateTopics      = 7
	vDeleteTopics      = 6
	vCreatePartitions  = 3
	vDescribeConfigs   = 4
	vIncrementalConfig = 1
	vDescribeGroups    = 5
	vDeleteGroups      = 2
	vOffsetFetch       = 7
)

// TopicSummary is one row of `topic list`.
type TopicSummary struct {
	Name       string `json:"name"`
	ID         string `json:"id"`
	Partitions int    `json:"partitions"`
	Replicas   int    `json:"replication_factor"`
	Internal   bool   `json:"internal"`
}

// PartitionInfo is one partition of `topic describe`.
type PartitionInfo struct {
	Partition   int32   `json:"partition"`
	Leader      int32   `json:"leader"`
	LeaderEpoch int32   `json:"leader_epoch"`
	Replicas    []int32 `json:"replicas"`
	ISR         []int32 `json:"isr"`
	Error       string  `json:"error,omitempty"`
}

// TopicDescription is the answer of `topic describe`: Metadata plus the
// configs set on the topic (DescribeConfigs source DYNAMIC_TOPIC_CONFIG).
type TopicDescription struct {
	Name       string            `json:"name"`
	ID         string            `json:"id"`
	Internal   bool              `json:"internal"`
	Partitions []PartitionInfo   `json:"partitions"`
	Configs    map[string]string `json:"configs"`
}

func metadata(ctx context.Context, cl *client.Cluster, topics []string) (*kmsg.MetadataResponse, error) {
	cn, err := cl.Any(ctx)
	if err != nil {
		return nil, err
	}
	req := kmsg.NewPtrMetadataRequest()
	if topics != nil {
		req.Topics = []kmsg.MetadataRequestTopic{}
	}
	for _, t := range topics {
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic = kmsg.StringPtr(t)
		req.Topics = append(req.Topics, rt)
	}
	resp, err := cn.Request(ctx, req, vMetadata)
	if err != nil {
		return nil, err
	}
	return resp.(*kmsg.MetadataResponse), nil
}

// CreateTopic creates one topic with partitions, replication factor and
// configs (nil: the broker's defaults).
func CreateTopic(ctx context.Context, cl *client.Cluster, name string, partitions int32, rf int16, configs map[string]string) error {
	cn, err := cl.Any(ctx)
	if err != nil {
		return err
	}
	req := kmsg.NewPtrCreateTopicsRequest()
	req.TimeoutMillis = 30000
	t := kmsg.NewCreateTopicsRequestTopic()
	t.Topic, t.NumPartitions, t.ReplicationFactor = name, partitions, rf
	for _, k := range sortedKeys(configs) {
		c := kmsg.NewCreateTopicsRequestTopicConfig()
		c.Name, c.Value = k, kmsg.StringPtr(configs[k])
		t.Configs = append(t.Configs, c)
	}
	req.Topics = append(req.Topics, t)
	resp, err := cn.Request(ctx, req, vCreateTopics)
	if err != nil {
		return err
	}
	r := resp.(*kmsg.CreateTopicsResponse)
	if len(r.Topics) != 1 {
		return fmt.Errorf("CreateTopics %s: malformed answer", name)
	}
	return refusal("topic "+name, r.Topics[0].ErrorCode, r.Topics[0].ErrorMessage)
}

// DeleteTopic deletes one topic by name.
func DeleteTopic(ctx context.Context, cl *client.Cluster, name string) error {
	cn, err := cl.Any(ctx)
	if err != nil {
		return err
	}
	req := kmsg.NewPtrDeleteTopicsRequest()
	req.TimeoutMillis = 30000
	req.TopicNames = []string{name}
	t := kmsg.NewDeleteTopicsRequestTopic()
	t.Topic = kmsg.StringPtr(name)
	req.Topics = append(req.Topics, t)
	resp, err := cn.Request(ctx, req, vDeleteTopics)
	if err != nil {
		return err
	}
	r := resp.(*kmsg.DeleteTopicsResponse)
	if len(r.Topics) != 1 {
		return fmt.Errorf("DeleteTopics %s: malformed answer", name)
	}
	return refusal("topic "+name, r.Topics[0].ErrorCode, r.Topics[0].ErrorMessage)
}

// AddPartitions raises a topic's partition count to total.
func AddPartitions(ctx context.Context, cl *client.Cluster, name string, total int32) error {
	cn, err := cl.Any(ctx)
	if err != nil {
		return err
	}
	req := kmsg.NewPtrCreatePartitionsRequest()
	req.TimeoutMillis = 30000
	t := kmsg.NewCreatePartitionsRequestTopic()
	t.Topic, t.Count = name, total
	req.Topics = append(req.Topics, t)
	resp, err := cn.Request(ctx, req, vCreatePartitions)
	if err != nil {
		return err
	}
	r := resp.(*kmsg.CreatePartitionsResponse)
	if len(r.Topics) != 1 {
		return fmt.Errorf("CreatePartitions %s: malformed answer", name)
	}
	return refusal("topic "+name, r.Topics[0].ErrorCode, r.Topics[0].ErrorMessage)
}

// AlterTopicConfig sets and deletes topic configs with one
// IncrementalAlterConfigs request.
func AlterTopicConfig(ctx context.Context, cl *client.Cluster, name string, set map[string]string, del []string) error {
	var ops []client.ConfigOp
	for _, k := range sortedKeys(set) {
		v := set[k]
		ops = append(ops, client.ConfigOp{Name: k, Value: &v})
	}
	for _, k := range del {
		ops = append(ops, client.ConfigOp{Name: k})
	}
	return asRefused("topic "+name, client.AlterTopicConfigs(ctx, cl, name, ops))
}

// ListTopics lists the cluster's topics, sorted by name.
func ListTopics(ctx context.Context, cl *client.Cluster) ([]TopicSummary, error) {
	r, err := metadata(ctx, cl, nil)
	if err != nil {
		return nil, err
	}
	out := []TopicSummary{}
	for _, t := range r.Topics {
		if t.Topic == nil || t.ErrorCode != 0 {
			continue
		}
		s := TopicSummary{Name: *t.Topic, ID: client.FormatTopicID(t.TopicID), Partitions: len(t.Partitions), Internal: t.IsInternal}
		if len(t.Partitions) > 0 {
			s.Replicas = len(t.Partitions[0].Replicas)
		}
		out = append(out, s)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// DescribeTopic describes one topic: partitions with leaders, replicas and
// ISR, and its explicitly set configs.
func DescribeTopic(ctx context.Context, cl *client.Cluster, name string) (*TopicDescription, error) {
	r, err := metadata(ctx, cl, []string{name})
	if err != nil {
		return nil, err
	}
	if len(r.Topics) != 1 || r.Topics[0].Topic == nil || *r.Topics[0].Topic != name {
		return nil, fmt.Errorf("Metadata %s: malformed answer", name)
	}
	t := r.Topics[0]
	if err := refusal("topic "+name, t.ErrorCode, nil); err != nil {
		return nil, err
	}
	d := &TopicDescription{Name: name, ID: client.FormatTopicID(t.TopicID), Internal: t.IsInternal, Partitions: []PartitionInfo{}}
	for _, p := range t.Partitions {
		pi := PartitionInfo{Partition: p.Partition, Leader: p.Leader, LeaderEpoch: p.LeaderEpoch, Replicas: sorted32(p.Replicas), ISR: sorted32(p.ISR)}
		if p.ErrorCode != 0 {
			pi.Error = ErrorName(p.ErrorCode)
		}
		d.Partitions = append(d.Partitions, pi)
	}
	sort.Slice(d.Partitions, func(i, j int) bool { return d.Partitions[i].Partition < d.Partitions[j].Partition })
	cfg, err := client.TopicConfigs(ctx, cl, name)
	if err != nil {
		return nil, asRefused("topic "+name, err)
	}
	d.Configs = cfg
	return d, nil
}

func sortedKeys(m map[string]string) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}

func sorted32(s []int32) []int32 {
	out := append([]int32{}, s...)
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

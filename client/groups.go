package client

import (
	"context"
	"fmt"
	"net"
	"regexp"
	"sort"
	"strconv"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// GroupOffset is one committed offset of a consumer group.
type GroupOffset struct {
	Group       string
	Topic       string
	Partition   int32
	Offset      int64
	LeaderEpoch int32
	Metadata    string
}

// CompileGroups compiles a consumer group pattern that must match a whole
// group name.
func CompileGroups(pattern string) (*regexp.Regexp, error) {
	re, err := regexp.Compile("^(?:" + pattern + ")$")
	if err != nil {
		return nil, fmt.Errorf("--groups %q: %v", pattern, err)
	}
	return re, nil
}

// ListGroups returns the groups of every broker of a cluster whose name
// matches re, sorted.
func ListGroups(ctx context.Context, cl *Cluster, re *regexp.Regexp) ([]string, error) {
	all, err := ListGroupStates(ctx, cl)
	if err != nil {
		return nil, err
	}
	out := []string{}
	for _, g := range all {
		if re.MatchString(g.Group) {
			out = append(out, g.Group)
		}
	}
	return out, nil
}

// GroupListing is one group of ListGroups: its name, state and protocol
// type.
type GroupListing struct {
	Group, State, ProtocolType string
}

// ListGroupStates returns every group of every broker of a cluster,
// sorted by name.
func ListGroupStates(ctx context.Context, cl *Cluster) ([]GroupListing, error) {
	if _, err := cl.Metadata(ctx, []string{}); err != nil {
		return nil, err
	}
	addrs := cl.BrokerAddrs()
	if len(addrs) == 0 {
		addrs = []string{cl.Seed()}
	}
	seen := map[string]GroupListing{}
	for _, a := range addrs {
		cn, err := cl.Conn(ctx, a)
		if err != nil {
			return nil, err
		}
		resp, err := cn.Request(ctx, kmsg.NewPtrListGroupsRequest(), 4)
		if err != nil {
			return nil, err
		}
		r := resp.(*kmsg.ListGroupsResponse)
		if err := kerr.ErrorForCode(r.ErrorCode); err != nil {
			return nil, fmt.Errorf("ListGroups on %s: %w", a, err)
		}
		for _, g := range r.Groups {
			seen[g.Group] = GroupListing{Group: g.Group, State: g.GroupState, ProtocolType: g.ProtocolType}
		}
	}
	out := make([]GroupListing, 0, len(seen))
	for _, g := range seen {
		out = append(out, g)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Group < out[j].Group })
	return out, nil
}

// Coordinator returns a connection to the group's coordinator.
func Coordinator(ctx context.Context, cl *Cluster, group string) (*Conn, error) {
	cn, err := cl.Any(ctx)
	if err != nil {
		return nil, err
	}
	req := kmsg.NewPtrFindCoordinatorRequest()
	req.CoordinatorKey, req.CoordinatorType = group, 0
	resp, err := cn.Request(ctx, req, 3)
	if err != nil {
		return nil, err
	}
	r := resp.(*kmsg.FindCoordinatorResponse)
	if err := kerr.ErrorForCode(r.ErrorCode); err != nil {
		return nil, fmt.Errorf("FindCoordinator %s on %s: %w", group, cl.Seed(), err)
	}
	return cl.Conn(ctx, net.JoinHostPort(r.Host, strconv.Itoa(int(r.Port))))
}

// FetchGroupOffsets returns a group's committed offsets for the given
// topics.
func FetchGroupOffsets(ctx context.Context, cl *Cluster, group string, topics []string) ([]GroupOffset, error) {
	cn, err := Coordinator(ctx, cl, group)
	if err != nil {
		return nil, err
	}
	want := map[string]bool{}
	for _, t := range topics {
		want[t] = true
	}
	req := kmsg.NewPtrOffsetFetchRequest()
	req.Group = group
	req.Topics = nil // every committed partition
	resp, err := cn.Request(ctx, req, 7)
	if err != nil {
		return nil, err
	}
	r := resp.(*kmsg.OffsetFetchResponse)
	if err := kerr.ErrorForCode(r.ErrorCode); err != nil {
		return nil, fmt.Errorf("OffsetFetch %s on %s: %w", group, cl.Seed(), err)
	}
	var out []GroupOffset
	for _, t := range r.Topics {
		if !want[t.Topic] {
			continue
		}
		for _, p := range t.Partitions {
			if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
				return nil, fmt.Errorf("OffsetFetch %s %s/%d on %s: %w", group, t.Topic, p.Partition, cl.Seed(), err)
			}
			if p.Offset < 0 {
				continue
			}
			md := ""
			if p.Metadata != nil {
				md = *p.Metadata
			}
			out = append(out, GroupOffset{Group: group, Topic: t.Topic, Partition: p.Partition, Offset: p.Offset, LeaderEpoch: p.LeaderEpoch, Metadata: md})
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Topic != out[j].Topic {
			return out[i].Topic < out[j].Topic
		}
		return out[i].Partition < out[j].Partition
	})
	return out, nil
}

// GroupMembers returns a group's state and member count on a cluster.
func GroupMembers(ctx context.Context, cl *Cluster, group string) (string, int, error) {
	cn, err := Coordinator(ctx, cl, group)
	if err != nil {
		return "", 0, err
	}
	req := kmsg.NewPtrDescribeGroupsRequest()
	req.Groups = []string{group}
	resp, err := cn.Request(ctx, req, 5)
	if err != nil {
		return "", 0, err
	}
	r := resp.(*kmsg.DescribeGroupsResponse)
	if len(r.Groups) != 1 {
		return "", 0, fmt.Errorf("DescribeGroups %s: malformed answer", group)
	}
	g := r.Groups[0]
	if err := kerr.ErrorForCode(g.ErrorCode); err != nil {
		return "", 0, fmt.Errorf("DescribeGroups %s on %s: %w", group, cl.Seed(), err)
	}
	return g.State, len(g.Members), nil
}

// LogRange reads a partition's log start and log end from its leader.
func LogRange(ctx context.Context, cl *Cluster, topic string, part int32) (int64, int64, error) {
	cn, _, err := cl.Leader(ctx, topic, part)
	if err != nil {
		return 0, 0, err
	}
	s, err := ListOffset(ctx, cn, topic, part, Earliest, ReadUncommitted)
	if err != nil {
		return 0, 0, err
	}
	e, err := ListOffset(ctx, cn, topic, part, Latest, ReadUncommitted)
	if err != nil {
		return 0, 0, err
	}
	return s.Offset, e.Offset, nil
}

// PartitionError is a per-partition error of a multi-partition answer.
type PartitionError struct {
	Topic     string
	Partition int32
	Err       error
}

// CommitGroupOffsets writes offs on the group coordinator cn as a
// standalone commit (generation -1, no member), keeping their leader
// epochs and metadata. It returns the negotiated OffsetCommit version and
// the partitions the coordinator refused; committed leader epochs need
// v6+, which the caller checks.
func CommitGroupOffsets(ctx context.Context, cn *Conn, group string, offs []GroupOffset) (int16, []PartitionError, error) {
	req := kmsg.NewPtrOffsetCommitRequest()
	req.Group, req.Generation, req.MemberID = group, -1, ""
	idx := map[string]int{}
	for _, o := range offs {
		i := TopicEntry(idx, &req.Topics, o.Topic, func() kmsg.OffsetCommitRequestTopic {
			t := kmsg.NewOffsetCommitRequestTopic()
			t.Topic = o.Topic
			return t
		})
		rp := kmsg.NewOffsetCommitRequestTopicPartition()
		rp.Partition, rp.Offset, rp.LeaderEpoch = o.Partition, o.Offset, o.LeaderEpoch
		rp.Metadata = kmsg.StringPtr(o.Metadata)
		req.Topics[i].Partitions = append(req.Topics[i].Partitions, rp)
	}
	resp, err := cn.Request(ctx, req, 8)
	if err != nil {
		return req.Version, nil, err
	}
	var refused []PartitionError
	for _, t := range resp.(*kmsg.OffsetCommitResponse).Topics {
		for _, p := range t.Partitions {
			if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
				refused = append(refused, PartitionError{Topic: t.Topic, Partition: p.Partition, Err: err})
			}
		}
	}
	return req.Version, refused, nil
}

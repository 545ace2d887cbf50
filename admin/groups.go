package admin

import (
	"context"
	"fmt"
	"net"
	"sort"
	"strconv"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/verbatim-kafka/verbatim/client"
)

// GroupSummary is one row of `group list`.
type GroupSummary struct {
	Group        string `json:"group"`
	State        string `json:"state"`
	ProtocolType string `json:"protocol_type"`
}

// GroupMember is one member of a described group.
type GroupMember struct {
	MemberID   string             `json:"member_id"`
	InstanceID string             `json:"instance_id,omitempty"`
	ClientID   string             `json:"client_id"`
	Host       string             `json:"host"`
	Assignment map[string][]int32 `json:"assignment"`
}

// GroupOffset is one committed offset of a described group with the
// partition's log end and the lag (log end minus committed).
type GroupOffset struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	Committed int64  `json:"committed"`
	LogEnd    int64  `json:"log_end"`
	Lag       int64  `json:"lag"`
	MemberID  string `json:"member_id"`
}

// GroupDescription is the answer of `group describe`.
type GroupDescription struct {
	Group        string        `json:"group"`
	State        string        `json:"state"`
	ProtocolType string        `json:"protocol_type"`
	Protocol     string        `json:"protocol"`
	Members      []GroupMember `json:"members"`
	Offsets      []GroupOffset `json:"offsets"`
}

// ListGroups lists the groups of every broker, sorted by name.
func ListGroups(ctx context.Context, cl *client.Cluster) ([]GroupSummary, error) {
	all, err := client.ListGroupStates(ctx, cl)
	if err != nil {
		return nil, asRefused("groups", err)
	}
	out := make([]GroupSummary, len(all))
	for i, g := range all {
		out[i] = GroupSummary{Group: g.Group, State: g.State, ProtocolType: g.ProtocolType}
	}
	return out, nil
}

// coordinator finds the group's coordinator; a refusal of FindCoordinator
// (GROUP_AUTHORIZATION_FAILED, ...) is a *Refused.
func coordinator(ctx context.Context, cl *client.Cluster, group string) (*client.Conn, error) {
	cn, err := cl.Any(ctx)
	if err != nil {
		return nil, err
	}
	req := kmsg.NewPtrFindCoordinatorRequest()
	req.CoordinatorKey, req.CoordinatorType = group, 0
	req.CoordinatorKeys = []string{group}
	resp, err := cn.Request(ctx, req, 4)
	if err != nil {
		return nil, err
	}
	r := resp.(*kmsg.FindCoordinatorResponse)
	code, msg, host, port := r.ErrorCode, r.ErrorMessage, r.Host, r.Port
	if len(r.Coordinators) == 1 {
		c := r.Coordinators[0]
		code, msg, host, port = c.ErrorCode, c.ErrorMessage, c.Host, c.Port
	}
	if err := refusal("group "+group, code, msg); err != nil {
		return nil, err
	}
	return cl.Conn(ctx, net.JoinHostPort(host, strconv.Itoa(int(port))))
}

// DescribeGroup describes a group: state, members with their assignments
// (consumer protocol), and every committed offset with its lag.
func DescribeGroup(ctx context.Context, cl *client.Cluster, group string) (*GroupDescription, error) {
	cn, err := coordinator(ctx, cl, group)
	if err != nil {
		return nil, err
	}
	req := kmsg.NewPtrDescribeGroupsRequest()
	req.Groups = []string{group}
	resp, err := cn.Request(ctx, req, vDescribeGroups)
	if err != nil {
		return nil, err
	}
	r := resp.(*kmsg.DescribeGroupsResponse)
	if len(r.Groups) != 1 {
		return nil, fmt.Errorf("DescribeGroups %s: malformed answer", group)
	}
	g := r.Groups[0]
	if err := refusal("group "+group, g.ErrorCode, g.ErrorMessage); err != nil {
		return nil, err
	}
	d := &GroupDescription{Group: group, State: g.State, ProtocolType: g.ProtocolType, Protocol: g.Protocol, Members: []GroupMember{}, Offsets: []GroupOffset{}}
	owner := map[string]map[int32]string{}
	for _, m := range g.Members {
		gm := GroupMember{MemberID: m.MemberID, ClientID: m.ClientID, Host: m.ClientHost, Assignment: map[string][]int32{}}
		if m.InstanceID != nil {
			gm.InstanceID = *m.InstanceID
		}
		if g.ProtocolType == "consumer" && len(m.MemberAssignment) > 0 {
			var a kmsg.ConsumerMemberAssignment
			if a.ReadFrom(m.MemberAssignment) == nil {
				for _, t := range a.Topics {
					gm.Assignment[t.Topic] = sorted32(t.Partitions)
					for _, p := range t.Partitions {
						if owner[t.Topic] == nil {
							owner[t.Topic] = map[int32]string{}
						}
						owner[t.Topic][p] = m.MemberID
					}
				}
			}
		}
		d.Members = append(d.Members, gm)
	}
	sort.Slice(d.Members, func(i, j int) bool { return d.Members[i].MemberID < d.Members[j].MemberID })

	ofReq := kmsg.NewPtrOffsetFetchRequest()
	ofReq.Group = group
	ofResp, err := cn.Request(ctx, ofReq, vOffsetFetch)
	if err != nil {
		return nil, err
	}
	of := ofResp.(*kmsg.OffsetFetchResponse)
	if err := refusal("group "+group, of.ErrorCode, nil); err != nil {
		return nil, err
	}
	for _, t := range of.Topics {
		for _, p := range t.Partitions {
			if err := refusal(fmt.Sprintf("group %s %s/%d", group, t.Topic, p.Partition), p.ErrorCode, nil); err != nil {
				return nil, err
			}
			if p.Offset < 0 {
				continue
			}
			_, end, err := client.LogRange(ctx, cl, t.Topic, p.Partition)
			if err != nil {
				return nil, asRefused(fmt.Sprintf("topic %s/%d", t.Topic, p.Partition), err)
			}
			lag := end - p.Offset
			if lag < 0 {
				lag = 0
			}
			d.Offsets = append(d.Offsets, GroupOffset{Topic: t.Topic, Partition: p.Partition, Committed: p.Offset, LogEnd: end, Lag: lag, MemberID: owner[t.Topic][p.Partition]})
		}
	}
	sort.Slice(d.Offsets, func(i, j int) bool {
		if d.Offsets[i].Topic != d.Offsets[j].Topic {
			return d.Offsets[i].Topic < d.Offsets[j].Topic
		}
		return d.Offsets[i].Partition < d.Offsets[j].Partition
	})
	return d, nil
}

// DeleteGroup deletes an empty group and its committed offsets.
func DeleteGroup(ctx context.Context, cl *client.Cluster, group string) error {
	cn, err := coordinator(ctx, cl, group)
	if err != nil {
		return err
	}
	req := kmsg.NewPtrDeleteGroupsRequest()
	req.Groups = []string{group}
	resp, err := cn.Request(ctx, req, vDeleteGroups)
	if err != nil {
		return err
	}
	r := resp.(*kmsg.DeleteGroupsResponse)
	if len(r.Groups) != 1 {
		return fmt.Errorf("DeleteGroups %s: malformed answer", group)
	}
	return refusal("group "+group, r.Groups[0].ErrorCode, nil)
}

package admin

import (
	"context"
	"errors"
	"fmt"
	"sort"

	"github.com/verbatim-kafka/verbatim/client"
)

// ResetTo is where `group reset-offsets` moves a group's offsets.
type ResetTo struct {
	Earliest, Latest bool
	Offset           int64 // when neither: this offset, clamped to the log's range as Kafka's tool does
}

// ResetOffset is one partition of a reset plan.
type ResetOffset struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	Previous  int64  `json:"previous"` // -1: nothing committed
	NewOffset int64  `json:"new_offset"`
}

// ResetPlan is the answer of `group reset-offsets`: the offsets the group
// gets, and whether they were committed (--execute) or only computed.
type ResetPlan struct {
	Group    string        `json:"group"`
	Executed bool          `json:"executed"`
	Offsets  []ResetOffset `json:"offsets"`
}

// ErrGroupActive refuses a reset of a group with members: as Kafka's
// tool, offsets are reset only for an inactive (Empty or Dead) group.
var ErrGroupActive = errors.New("offsets can only be reset while the group is inactive")

// ResetOffsets computes (and with execute commits, as a standalone commit)
// the group's new offsets for topics: name -> partitions (nil: every
// partition of the topic); an empty topics map means every topic the group
// has committed offsets for.
func ResetOffsets(ctx context.Context, cl *client.Cluster, group string, topics map[string][]int32, to ResetTo, execute bool) (*ResetPlan, error) {
	d, err := DescribeGroup(ctx, cl, group)
	if err != nil {
		return nil, err
	}
	if d.State != "Empty" && d.State != "Dead" {
		return nil, fmt.Errorf("group %s: %w, but its state is %s", group, ErrGroupActive, d.State)
	}
	prev := map[string]map[int32]int64{}
	for _, o := range d.Offsets {
		if prev[o.Topic] == nil {
			prev[o.Topic] = map[int32]int64{}
		}
		prev[o.Topic][o.Partition] = o.Committed
	}
	if len(topics) == 0 {
		topics = map[string][]int32{}
		for t, ps := range prev {
			for p := range ps {
				topics[t] = append(topics[t], p)
			}
		}
		if len(topics) == 0 {
			return nil, fmt.Errorf("group %s has no committed offsets: name the topics with --topic", group)
		}
	}
	plan := &ResetPlan{Group: group, Executed: execute, Offsets: []ResetOffset{}}
	for _, t := range sortedTopics(topics) {
		parts := topics[t]
		if parts == nil {
			td, err := DescribeTopic(ctx, cl, t)
			if err != nil {
				return nil, err
			}
			for _, p := range td.Partitions {
				parts = append(parts, p.Partition)
			}
		}
		for _, p := range sorted32(parts) {
			start, end, err := client.LogRange(ctx, cl, t, p)
			if err != nil {
				return nil, asRefused(fmt.Sprintf("topic %s/%d", t, p), err)
			}
			n := to.Offset
			switch {
			case to.Earliest:
				n = start
			case to.Latest:
				n = end
			case n < start:
				n = start
			case n > end:
				n = end
			}
			was, ok := prev[t][p]
			if !ok {
				was = -1
			}
			plan.Offsets = append(plan.Offsets, ResetOffset{Topic: t, Partition: p, Previous: was, NewOffset: n})
		}
	}
	if !execute {
		return plan, nil
	}
	cn, err := coordinator(ctx, cl, group)
	if err != nil {
		return nil, err
	}
	offs := make([]client.GroupOffset, 0, len(plan.Offsets))
	for _, o := range plan.Offsets {
		offs = append(offs, client.GroupOffset{Group: group, Topic: o.Topic, Partition: o.Partition, Offset: o.NewOffset, LeaderEpoch: -1})
	}
	_, refused, err := client.CommitGroupOffsets(ctx, cn, group, offs)
	if err != nil {
		return nil, err
	}
	if len(refused) > 0 {
		sort.Slice(refused, func(i, j int) bool { return refused[i].Partition < refused[j].Partition })
		r := refused[0]
		return nil, asRefused(fmt.Sprintf("group %s %s/%d", group, r.Topic, r.Partition), r.Err)
	}
	return plan, nil
}

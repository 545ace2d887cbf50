package mirror

import (
	"context"
	"regexp"

	"github.com/verbatim-kafka/verbatim/client"
)

// CompileGroups compiles a --groups pattern (client.CompileGroups); a bad
// pattern is a usage error.
func CompileGroups(pattern string) (*regexp.Regexp, error) {
	re, err := client.CompileGroups(pattern)
	if err != nil {
		return nil, Usage("%v", err)
	}
	return re, nil
}

// clampOffset is the clamp copyGroups applies. It is a variable only so a
// test can make the pusher wrong and show that verify, which clamps on its
// own, notices.
var clampOffset = Clamp

// Clamp puts a committed offset into the destination's range
// [logStart, logEnd] (KIP-1279's rule).
func Clamp(offset, logStart, logEnd int64) int64 {
	return max(logStart, min(offset, logEnd))
}

// ExpectedGroupOffsets maps source commits to what the destination should
// hold: the same leader epoch and metadata, the offset clamped into the
// destination partition's range.
func ExpectedGroupOffsets(ctx context.Context, dst *client.Cluster, src []client.GroupOffset) ([]client.GroupOffset, error) {
	out := make([]client.GroupOffset, len(src))
	for i, o := range src {
		start, end, err := client.LogRange(ctx, dst, o.Topic, o.Partition)
		if err != nil {
			return nil, err
		}
		o.Offset = clampOffset(o.Offset, start, end)
		out[i] = o
	}
	return out, nil
}

// copyGroups copies the committed offsets of the matching source groups
// for the mirrored topics, skipping groups with members on the
// destination.
func (p *Pusher) copyGroups(ctx context.Context) error {
	groups, err := client.ListGroups(ctx, p.src, p.o.Groups)
	if err != nil {
		return Usage("listing source groups: %v", err)
	}
	for _, g := range groups {
		state, members, err := client.GroupMembers(ctx, p.dst, g)
		if err != nil {
			return Usage("group %s on the destination: %v", g, err)
		}
		if members > 0 {
			p.log.Warn("group has active members on the destination; offsets not copied", "group", g, "state", state, "members", members)
			continue
		}
		src, err := client.FetchGroupOffsets(ctx, p.src, g, p.o.Topics)
		if err != nil {
			return Usage("group %s offsets on the source: %v", g, err)
		}
		if len(src) == 0 {
			continue
		}
		want, err := ExpectedGroupOffsets(ctx, p.dst, src)
		if err != nil {
			return Usage("group %s: destination ranges: %v", g, err)
		}
		if err := commitGroupOffsets(ctx, p.dst, g, want); err != nil {
			return err
		}
		p.log.Info("copied group offsets", "group", g, "partitions", len(want))
	}
	return nil
}

// commitGroupOffsets writes offsets as a standalone commit (generation -1,
// no member), keeping leader epochs and metadata.
func commitGroupOffsets(ctx context.Context, cl *client.Cluster, group string, offs []client.GroupOffset) error {
	cn, err := client.Coordinator(ctx, cl, group)
	if err != nil {
		return Usage("group %s on the destination: %v", group, err)
	}
	version, refused, err := client.CommitGroupOffsets(ctx, cn, group, offs)
	if err != nil {
		return Usage("committing group %s on the destination: %v", group, err)
	}
	if version < 6 {
		return Usage("destination negotiated OffsetCommit v%d: committed leader epochs need v6+", version)
	}
	if len(refused) > 0 {
		r := refused[0]
		return Refusal("the destination refused group %s's offset for %s/%d: %v", group, r.Topic, r.Partition, r.Err)
	}
	return nil
}

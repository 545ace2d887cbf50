package verify

import (
	"context"

	"github.com/verbatim-kafka/verbatim/client"
)

// compareGroups compares the committed offsets of the matching source
// groups with the destination's: same leader epoch and metadata, the
// offset clamped into the destination's range (expectedOffset), each
// computed here from what both clusters answer.
func compareGroups(ctx context.Context, src, dst *client.Cluster, o Options, rep *Report) error {
	groups, err := client.ListGroups(ctx, src, o.Groups)
	if err != nil {
		return err
	}
	for _, g := range groups {
		so, err := client.FetchGroupOffsets(ctx, src, g, o.Topics)
		if err != nil {
			return err
		}
		do, err := client.FetchGroupOffsets(ctx, dst, g, o.Topics)
		if err != nil {
			return err
		}
		have := map[[2]any]client.GroupOffset{}
		for _, d := range do {
			have[[2]any{d.Topic, d.Partition}] = d
		}
		for _, s := range so {
			start, end, err := client.LogRange(ctx, dst, s.Topic, s.Partition)
			if err != nil {
				return err
			}
			want := expectedOffset(s.Offset, start, end)
			gr := GroupReport{Group: g, Topic: s.Topic, Partition: s.Partition, SourceOffset: s.Offset, Expected: want, DestOffset: -1, Status: Identical}
			d, ok := have[[2]any{s.Topic, s.Partition}]
			if ok {
				gr.DestOffset = d.Offset
			}
			switch {
			case !ok || d.Offset != want:
				gr.Field = "offset"
			case d.LeaderEpoch != s.LeaderEpoch:
				gr.Field = "leader_epoch"
			case d.Metadata != s.Metadata:
				gr.Field = "metadata"
			}
			if gr.Field != "" {
				gr.Status = Mismatch
				rep.Exact = false
			}
			rep.Groups = append(rep.Groups, gr)
		}
	}
	return nil
}

// expectedOffset is the commit a copied group must hold on the
// destination: the source's offset put into the destination partition's
// [log start, log end] (KIP-1279's rule), so a consumer re-pointed there
// neither skips data nor asks for offsets that do not exist.
func expectedOffset(offset, logStart, logEnd int64) int64 {
	if offset > logEnd {
		offset = logEnd
	}
	if offset < logStart {
		offset = logStart
	}
	return offset
}

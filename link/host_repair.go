package link

import (
	"context"

	"github.com/verbatim-kafka/verbatim/storage"
	"github.com/verbatim-kafka/verbatim/wireext"
)

// repairHost is the part of Host for divergence repair and failback:
// truncation keeping the cut records, converting a writable topic into a
// mirror (broker/link_repair.go).
type repairHost interface {
	// PartitionEpochs is the partition's leader-epoch cache, log start
	// and log end (the destination's side of the common point).
	PartitionEpochs(topic string, partition int32) (entries []storage.EpochEntry, logStart, logEnd int64, err error)
	// TruncateKeepingCut truncates the partition to offset to (whole
	// batches) after copying what it removes, verbatim at its offsets,
	// into keepTopic ("" for `<topic>.truncated`).
	TruncateKeepingCut(ctx context.Context, topic string, partition int32, to int64, keepTopic string) (wireext.TruncatedPartition, error)
	// ConvertToPullMirror makes a writable topic a pull-mode mirror of
	// link (the failback), clients' produces refused from then on.
	ConvertToPullMirror(ctx context.Context, topic, link, sourceClusterID string) error
	// MirrorStopPoint is the last offset and epoch the partition mirrored
	// before its mirror stop, as the stop persisted them.
	MirrorStopPoint(topic string, partition int32) (offset int64, epoch int32, ok bool)
}

package link

import (
	"context"
	"fmt"

	"github.com/verbatim-kafka/verbatim/client"
	"github.com/verbatim-kafka/verbatim/wireext"
)

// SourceEpochs asks the source cluster's leader of topic/partition where
// an epoch ends (OffsetForLeaderEpoch as a consumer), the ask of
// FindCommonPoint.
func SourceEpochs(ctx context.Context, src *client.Cluster, topic string, partition int32) func(epoch int32) (EpochEnd, error) {
	return func(epoch int32) (EpochEnd, error) {
		cn, _, err := src.Leader(ctx, topic, partition)
		if err != nil {
			return EpochEnd{}, err
		}
		ee, err := client.OffsetForLeaderEpoch(ctx, cn, topic, partition, epoch)
		if err != nil {
			return EpochEnd{}, err
		}
		return EpochEnd{Epoch: ee.LeaderEpoch, EndOffset: ee.EndOffset}, nil
	}
}

// CommonPointOf is the common point of the destination partition (its
// epoch cache and bounds read from the host) with the source.
func CommonPointOf(h repairHost, topic string, partition int32, ask func(epoch int32) (EpochEnd, error)) (CommonPoint, error) {
	entries, start, end, err := h.PartitionEpochs(topic, partition)
	if err != nil {
		return CommonPoint{}, err
	}
	dest := make([]EpochStart, len(entries))
	for i, e := range entries {
		dest[i] = EpochStart{Epoch: e.Epoch, StartOffset: e.StartOffset}
	}
	cp, err := FindCommonPoint(dest, start, end, ask)
	if err != nil {
		return CommonPoint{}, fmt.Errorf("%s/%d: %w", topic, partition, err)
	}
	return cp, nil
}

// TruncateToCommon truncates the destination partition to its common
// point with the source, the cut kept in keepTopic ("" for
// `<topic>.truncated`). limit, when >= 0, caps the point (a Verbatim
// source's persisted last-mirrored point: the source cannot share more
// than it mirrored before it became writable).
func TruncateToCommon(ctx context.Context, h repairHost, topic string, partition int32, keepTopic string, limit int64, ask func(epoch int32) (EpochEnd, error)) (wireext.TruncatedPartition, CommonPoint, error) {
	cp, err := CommonPointOf(h, topic, partition, ask)
	if err != nil {
		return wireext.TruncatedPartition{Partition: partition, TruncatedTo: -1}, cp, err
	}
	if limit >= 0 && cp.Offset > limit {
		cp.Offset = limit
	}
	res, err := h.TruncateKeepingCut(ctx, topic, partition, cp.Offset, keepTopic)
	return res, cp, err
}

// SourceMirroredLimits is the failback's cross-check against a Verbatim
// source: for each partition of topic that the source mirrored before it
// became writable (a stopped mirror, DescribeMirrors), the offset after
// the last one it mirrored; the two logs share nothing beyond it, whatever
// OffsetForLeaderEpoch says. A source that does not serve the link admin
// requests (Apache Kafka, an older Verbatim) answers nil.
func SourceMirroredLimits(ctx context.Context, src *client.Cluster, topic string) (map[int32]int64, error) {
	cn, err := src.Any(ctx)
	if err != nil {
		return nil, err
	}
	if !cn.HasFeature(wireext.FeatureMirrorLink) {
		return nil, nil
	}
	req := wireext.DescribeMirrorsRequest{Topics: []string{topic}}
	body, err := cn.RequestRaw(ctx, &client.RawRequest{APIKey: wireext.APIKeyDescribeMirrors, Flexible: true, Body: req.AppendTo(nil)})
	if err != nil {
		return nil, fmt.Errorf("DescribeMirrors %s on the source: %w", topic, err)
	}
	var resp wireext.DescribeMirrorsResponse
	if err := resp.ReadFrom(body); err != nil {
		return nil, fmt.Errorf("DescribeMirrors %s on the source: %w", topic, err)
	}
	if resp.ErrorCode != 0 {
		// A source that refuses to describe (authorization) gives no
		// cross-check; OffsetForLeaderEpoch alone decides.
		return nil, nil
	}
	limits := map[int32]int64{}
	for _, p := range resp.Partitions {
		if p.Topic == topic && p.State == wireext.StateStopped && p.LastMirroredOffset >= 0 {
			limits[p.Partition] = p.LastMirroredOffset + 1
		}
	}
	return limits, nil
}

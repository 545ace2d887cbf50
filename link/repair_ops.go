package link

import (
	"bytes"
	"context"
	"fmt"

	"github.com/verbatim-kafka/verbatim/client"
	"github.com/verbatim-kafka/verbatim/mirror"
	"github.com/verbatim-kafka/verbatim/wireext"
)

// SourceEpochs asks the source cluster's leader of topic/partition where
// an epoch ends (OffsetForLeaderEpoch as a consumer), the ask of
// FindCommonPoint.
func SourceEpochs(ctx context.Context, src *client.Cluster, topic string, partition int32) func(epoch int32) (EpochEnd, error) {
	return sourceEpochs(ctx, newClientSource(src), topic, partition)
}

// sourceEpochs is SourceEpochs over any sourceCluster.
func sourceEpochs(ctx context.Context, src sourceCluster, topic string, partition int32) func(epoch int32) (EpochEnd, error) {
	tp := client.TopicPartition{Topic: topic, Partition: partition}
	return func(epoch int32) (EpochEnd, error) {
		addr, _, err := leaderAddr(ctx, src, tp)
		if err != nil {
			return EpochEnd{}, err
		}
		ee, err := src.OffsetForLeaderEpoch(ctx, addr, tp, epoch)
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
// `<topic>.truncated`).
//
// limit, when >= 0, is a Verbatim source's persisted last-mirrored point
// plus one: what the source wrote itself after its failover starts there
// (with its stop's batches). The destination shares more than that only
// if it mirrored those batches from the source; sameAt (nil: never)
// reports whether the destination's batch at an offset is the source's
// byte for byte. So the point OffsetForLeaderEpoch gives is kept above
// the limit only when the batch at the limit is the source's, and is
// capped at the limit otherwise (two sides that wrote in the same epoch
// number independently would otherwise pass for one history).
func TruncateToCommon(ctx context.Context, h repairHost, topic string, partition int32, keepTopic string, limit int64,
	ask func(epoch int32) (EpochEnd, error), sameAt func(offset int64) (bool, error)) (wireext.TruncatedPartition, CommonPoint, error) {
	cp, err := CommonPointOf(h, topic, partition, ask)
	if err != nil {
		return wireext.TruncatedPartition{Partition: partition, TruncatedTo: -1}, cp, err
	}
	if limit >= 0 && cp.Offset > limit {
		same := false
		if sameAt != nil {
			if same, err = sameAt(limit); err != nil {
				return wireext.TruncatedPartition{Partition: partition, TruncatedTo: -1}, cp, err
			}
		}
		if !same {
			cp.Offset, cp.Epoch = limit, -1
		}
	}
	res, err := h.TruncateKeepingCut(ctx, topic, partition, cp.Offset, keepTopic)
	return res, cp, err
}

// SameBatchAt reports whether the destination's stored batch holding
// offset and the source's are the same bytes (read returns the
// destination's batches from the one holding an offset).
func SameBatchAt(ctx context.Context, read func(offset int64) ([]byte, error), src *client.Cluster, topic string, partition int32, offset int64) (bool, error) {
	mine, err := read(offset)
	if err != nil {
		return false, err
	}
	cn, _, err := src.Leader(ctx, topic, partition)
	if err != nil {
		return false, err
	}
	res, err := client.FetchPartition(ctx, cn, client.FetchArgs{Topic: topic, Partition: partition, Offset: offset,
		MaxBytes: 1 << 20, CurrentEpoch: -1, LastFetchedEpoch: -1})
	if err == nil {
		err = res.Err
	}
	if err != nil {
		return false, err
	}
	a, _, _, err1 := mirror.Split(mine, offset)
	b, _, _, err2 := mirror.Split(res.Records, offset)
	if err1 != nil || err2 != nil || len(a) == 0 || len(b) == 0 {
		return false, nil
	}
	return bytes.Equal(a[0], b[0]), nil
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

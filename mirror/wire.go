package mirror

// Verbatim's wire extensions as the pusher sends them (docs/protocol.md):
// the mirror-tag (wireext.MirrorTag) values of the mirror produce, the mirror DeleteRecords and
// the CreateTopics topic id (their bytes are wireext's), and the feature
// names that announce them.

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/verbatim-kafka/verbatim/client"
	"github.com/verbatim-kafka/verbatim/wireext"
)

// Tag and feature of Verbatim's mirror produce (docs/protocol.md).
const (
	mirrorTag     = wireext.MirrorTag
	mirrorFeature = wireext.FeatureMirrorProduce
)

// topicIDFeature is the destination feature for the CreateTopics topic-id
// tag; mirrorFeature version assignedFeatureVers (2) assigns writer
// epochs, which this pusher needs.
const (
	topicIDFeature      = wireext.FeatureMirrorTopicID
	assignedFeatureVers = wireext.FeatureMirrorProduceAssigned
)

// writerTag is the request-level MirrorProduce value: version 0, the
// writer epoch (RegisterEpoch: a registration), and the WriterID in the
// struct's tagged field 0.
func writerTag(w Writer) []byte {
	return (&wireext.MirrorProduce{WriterEpoch: w.Epoch, WriterID: w.ID}).AppendTo(nil)
}

// topicIDTag is the CreateTopics topic entry's MirrorTopicID value.
func topicIDTag(id [16]byte) []byte {
	return (&wireext.MirrorTopicID{TopicID: id}).AppendTo(nil)
}

func partitionTag(expect int64, epoch int32, sourceHW int64) []byte {
	return (&wireext.MirrorPartition{ExpectedLogEndOffset: expect, CurrentLeaderEpoch: epoch, SourceHighWatermark: max(sourceHW, 0)}).AppendTo(nil)
}

func (d *destConn) produceRequest(w Writer, set []byte, expect int64, epoch int32, sourceHW int64) *kmsg.ProduceRequest {
	req := kmsg.NewPtrProduceRequest()
	req.Acks = -1
	req.TimeoutMillis = 30000
	req.UnknownTags.Set(mirrorTag, writerTag(w))
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = d.topic
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Partition, rp.Records = d.partition, set
	rp.UnknownTags.Set(mirrorTag, partitionTag(expect, epoch, sourceHW))
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	return req
}

// deleteRecords forwards the source's log start, or registers (offset 0,
// w.Epoch RegisterEpoch): a DeleteRecords carrying the mirror tag
// (docs/mirroring.md), which Verbatim accepts on mirror topics only from
// a pusher. It returns the epoch a registration was assigned (-1 when
// the answer carries none).
func (d *destConn) deleteRecords(ctx context.Context, w Writer, offset int64) (int32, error) {
	got, err := mirrorDeleteRecords(ctx, d.cn, w, map[string][]int32{d.topic: {d.partition}}, offset)
	if err != nil {
		return -1, err
	}
	a, ok := got[tp{d.topic, d.partition}]
	if !ok {
		return -1, fmt.Errorf("DeleteRecords %s/%d: malformed answer", d.topic, d.partition)
	}
	return a.epoch, a.err
}

// deleteAnswer is one partition's answer to a mirror DeleteRecords: its
// error and the writer epoch assigned (-1: none in the answer).
type deleteAnswer struct {
	epoch int32
	err   error
}

// mirrorDeleteRecords sends one mirror DeleteRecords as w for the
// partitions parts, all to offset, and returns each partition's answer.
func mirrorDeleteRecords(ctx context.Context, cn *client.Conn, w Writer, parts map[string][]int32, offset int64) (map[tp]deleteAnswer, error) {
	req := DeleteRecordsRequest(w, parts, offset)
	resp, err := cn.Request(ctx, req, 2)
	if err != nil {
		return nil, err
	}
	if req.Version < 2 {
		return nil, fmt.Errorf("destination negotiated DeleteRecords v%d, the mirror tag needs v2", req.Version)
	}
	out := map[tp]deleteAnswer{}
	for _, rt := range resp.(*kmsg.DeleteRecordsResponse).Topics {
		for _, rp := range rt.Partitions {
			e, err := AssignedEpoch(&rp)
			if err != nil {
				return nil, fmt.Errorf("DeleteRecords %s/%d: %w", rt.Topic, rp.Partition, err)
			}
			out[tp{rt.Topic, rp.Partition}] = deleteAnswer{epoch: e, err: kerr.ErrorForCode(rp.ErrorCode)}
		}
	}
	return out, nil
}

// DeleteRecordsRequest is a mirror DeleteRecords (v2, the request-level
// mirror tag) as writer w of the partitions parts, all to offset: with
// w.Epoch RegisterEpoch and offset 0, a writer registration
// (docs/protocol.md "Writer epoch").
func DeleteRecordsRequest(w Writer, parts map[string][]int32, offset int64) *kmsg.DeleteRecordsRequest {
	req := kmsg.NewPtrDeleteRecordsRequest()
	req.Version = 2
	req.TimeoutMillis = 30000
	req.UnknownTags.Set(mirrorTag, writerTag(w))
	for topic, ps := range parts {
		rt := kmsg.NewDeleteRecordsRequestTopic()
		rt.Topic = topic
		for _, p := range ps {
			rp := kmsg.NewDeleteRecordsRequestTopicPartition()
			rp.Partition, rp.Offset = p, offset
			rt.Partitions = append(rt.Partitions, rp)
		}
		req.Topics = append(req.Topics, rt)
	}
	return req
}

// AssignedEpoch is the writer epoch a DeleteRecords response partition
// carries (wireext.MirrorWriterEpoch), -1 when it carries none.
func AssignedEpoch(rp *kmsg.DeleteRecordsResponseTopicPartition) (int32, error) {
	epoch := int32(-1)
	var err error
	rp.UnknownTags.Each(func(tag uint32, v []byte) {
		if tag == mirrorTag {
			var m wireext.MirrorWriterEpoch
			if err = m.ReadFrom(v); err == nil {
				epoch = m.WriterEpoch
			}
		}
	})
	return epoch, err
}

// ErrStartEpochUnsupported is the answer of a DestConn.ForwardStartEpoch
// to a destination below feature version
// wireext.FeatureMirrorProduceStartEpoch: it would ignore the value.
var ErrStartEpochUnsupported = fmt.Errorf("the destination does not take the source's leader epoch at its log start (%s below version %d)", mirrorFeature, wireext.FeatureMirrorProduceStartEpoch)

func (d *destConn) ForwardStartEpoch(ctx context.Context, w Writer, offset int64, epoch int32) error {
	if d.cn.FeatureMaxVersion(mirrorFeature) < wireext.FeatureMirrorProduceStartEpoch {
		return ErrStartEpochUnsupported
	}
	req := StartEpochRequest(w, d.topic, d.partition, offset, epoch)
	resp, err := d.cn.Request(ctx, req, 2)
	if err != nil {
		return err
	}
	r := resp.(*kmsg.DeleteRecordsResponse)
	if len(r.Topics) != 1 || len(r.Topics[0].Partitions) != 1 {
		return fmt.Errorf("DeleteRecords %s/%d: malformed answer", d.topic, d.partition)
	}
	return kerr.ErrorForCode(r.Topics[0].Partitions[0].ErrorCode)
}

// StartEpochRequest is a mirror DeleteRecords of one partition to offset
// as writer w, carrying the source's leader epoch at offset
// (wireext.MirrorStartEpoch, feature version 3).
func StartEpochRequest(w Writer, topic string, partition int32, offset int64, epoch int32) *kmsg.DeleteRecordsRequest {
	req := DeleteRecordsRequest(w, map[string][]int32{topic: {partition}}, offset)
	req.Topics[0].Partitions[0].UnknownTags.Set(mirrorTag, (&wireext.MirrorStartEpoch{LeaderEpoch: epoch}).AppendTo(nil))
	return req
}

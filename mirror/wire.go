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

	"github.com/verbatim-kafka/verbatim/wireext"
)

// Tag and feature of Verbatim's mirror produce (docs/protocol.md).
const (
	mirrorTag     = wireext.MirrorTag
	mirrorFeature = wireext.FeatureMirrorProduce
)

// topicIDFeature is the destination feature for the CreateTopics topic-id
// tag; mirrorFeature version 1 adds the WriterID.
const (
	topicIDFeature      = wireext.FeatureMirrorTopicID
	writerIDFeatureVers = wireext.FeatureMirrorProduceWriterID
)

// writerTag is the request-level MirrorProduce value: version 0, the
// writer epoch, and the WriterID in the struct's tagged field 0.
func writerTag(epoch int32, id [16]byte) []byte {
	return (&wireext.MirrorProduce{WriterEpoch: epoch, WriterID: id}).AppendTo(nil)
}

// topicIDTag is the CreateTopics topic entry's MirrorTopicID value.
func topicIDTag(id [16]byte) []byte {
	return (&wireext.MirrorTopicID{TopicID: id}).AppendTo(nil)
}

func partitionTag(expect int64, epoch int32) []byte {
	return (&wireext.MirrorPartition{ExpectedLogEndOffset: expect, CurrentLeaderEpoch: epoch}).AppendTo(nil)
}

func (d *destConn) requestTag() []byte { return writerTag(d.writer.Epoch, d.writer.ID) }

func (d *destConn) produceRequest(set []byte, expect int64, epoch int32) *kmsg.ProduceRequest {
	req := kmsg.NewPtrProduceRequest()
	req.Acks = -1
	req.TimeoutMillis = 30000
	req.UnknownTags.Set(mirrorTag, d.requestTag())
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = d.topic
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Partition, rp.Records = d.partition, set
	rp.UnknownTags.Set(mirrorTag, partitionTag(expect, epoch))
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	return req
}

// deleteRecords forwards the source's log start: a DeleteRecords carrying
// the mirror tag (docs/mirroring.md), which Verbatim accepts on mirror
// topics only from a pusher.
func (d *destConn) deleteRecords(ctx context.Context, offset int64) error {
	req := kmsg.NewPtrDeleteRecordsRequest()
	req.TimeoutMillis = 30000
	req.UnknownTags.Set(mirrorTag, d.requestTag())
	rt := kmsg.NewDeleteRecordsRequestTopic()
	rt.Topic = d.topic
	rp := kmsg.NewDeleteRecordsRequestTopicPartition()
	rp.Partition, rp.Offset = d.partition, offset
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := d.cn.Request(ctx, req, 2)
	if err != nil {
		return err
	}
	if req.Version < 2 {
		return fmt.Errorf("destination negotiated DeleteRecords v%d, the mirror tag needs v2", req.Version)
	}
	r := resp.(*kmsg.DeleteRecordsResponse)
	if len(r.Topics) != 1 || len(r.Topics[0].Partitions) != 1 {
		return fmt.Errorf("DeleteRecords %s/%d: malformed answer", d.topic, d.partition)
	}
	return kerr.ErrorForCode(r.Topics[0].Partitions[0].ErrorCode)
}

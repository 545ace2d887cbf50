package mirror

// Verbatim's wire extensions as the pusher sends them (docs/protocol.md):
// the tag-22082 values of the mirror produce, the mirror DeleteRecords and
// the CreateTopics topic id, and the feature names that announce them.

import (
	"context"
	"encoding/binary"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Tag and feature of Verbatim's mirror produce (docs/protocol.md).
const (
	mirrorTag     = 22082
	mirrorFeature = "verbatim.mirror.produce"
)

// topicIDFeature is the destination feature for the CreateTopics topic-id
// tag; mirrorFeature version 1 adds the WriterID.
const (
	topicIDFeature      = "verbatim.mirror.topic.id"
	writerIDFeatureVers = 1
	writerIDTag         = 0
)

// writerTag is the request-level MirrorProduce value: version 0, the
// writer epoch, and the WriterID in the struct's tagged field 0.
func writerTag(epoch int32, id [16]byte) []byte {
	v := binary.BigEndian.AppendUint16(nil, 0)
	v = binary.BigEndian.AppendUint32(v, uint32(epoch))
	v = append(v, 1, writerIDTag, byte(len(id)))
	return append(v, id[:]...)
}

// topicIDTag is the CreateTopics topic entry's MirrorTopicID value.
func topicIDTag(id [16]byte) []byte {
	v := binary.BigEndian.AppendUint16(nil, 0)
	v = append(v, id[:]...)
	return append(v, 0)
}

func partitionTag(expect int64, epoch int32) []byte {
	v := binary.BigEndian.AppendUint16(nil, 0)
	v = binary.BigEndian.AppendUint64(v, uint64(expect))
	v = binary.BigEndian.AppendUint32(v, uint32(epoch))
	return append(v, 0)
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

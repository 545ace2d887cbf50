package benchmarks

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/verbatim-kafka/verbatim/wireext"
)

// RegisterMirrorWriter registers id as the mirror writer of partitions
// parts of topic on the Verbatim at addr (a mirror DeleteRecords with
// writer epoch -1, docs/protocol.md "Writer epoch") and returns the
// writer epoch assigned, which every mirror produce must then carry.
func RegisterMirrorWriter(ctx context.Context, addr, topic string, id [16]byte, parts []int32) (int32, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		return -1, err
	}
	defer cl.Close()
	req := kmsg.NewPtrDeleteRecordsRequest()
	req.TimeoutMillis = 30000
	req.UnknownTags.Set(wireext.MirrorTag, (&wireext.MirrorProduce{WriterEpoch: wireext.RegisterWriterEpoch, WriterID: id}).AppendTo(nil))
	rt := kmsg.NewDeleteRecordsRequestTopic()
	rt.Topic = topic
	for _, p := range parts {
		rp := kmsg.NewDeleteRecordsRequestTopicPartition()
		rp.Partition = p
		rt.Partitions = append(rt.Partitions, rp)
	}
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return -1, fmt.Errorf("registering the mirror writer: %w", err)
	}
	epoch := int32(-1)
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
				return -1, fmt.Errorf("registering the mirror writer on %s/%d: %w", topic, p.Partition, err)
			}
			var bad error
			p.UnknownTags.Each(func(tag uint32, v []byte) {
				if tag == wireext.MirrorTag {
					var m wireext.MirrorWriterEpoch
					bad = m.ReadFrom(v)
					epoch = m.WriterEpoch
				}
			})
			if bad != nil {
				return -1, bad
			}
		}
	}
	if epoch < 0 {
		return -1, fmt.Errorf("registering the mirror writer on %s: no writer epoch assigned (the destination lacks %s version %d)", topic, wireext.FeatureMirrorProduce, wireext.FeatureMirrorProduceAssigned)
	}
	return epoch, nil
}

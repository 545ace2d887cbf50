package benchmarks

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/verbatim-kafka/verbatim/client"
	"github.com/verbatim-kafka/verbatim/mirror"
	"github.com/verbatim-kafka/verbatim/wireext"
)

// RegisterMirrorWriter registers id as the mirror writer of partitions
// parts of topic on the Verbatim at addr (a mirror DeleteRecords with
// writer epoch -1, docs/protocol.md "Writer epoch") and returns the
// writer epoch assigned, which every mirror produce must then carry.
// co secures and authenticates the connection (a zero ClientID is
// "verbatim-bench"). A destination older than assigned writer epochs
// (feature version below wireext.FeatureMirrorProduceAssigned: an older
// build run as bench-ingest's -baseline) registers nothing and admits the
// epoch the load generator of its day sent, 0, which is returned.
func RegisterMirrorWriter(ctx context.Context, addr string, co client.Options, topic string, id [16]byte, parts []int32) (int32, error) {
	// Not kgo: it splits DeleteRecords by leader into new requests,
	// without the request's tags.
	if co.ClientID == "" {
		co.ClientID = "verbatim-bench"
	}
	cn, err := client.Dial(ctx, addr, co)
	if err != nil {
		return -1, err
	}
	defer cn.Close()
	if cn.FeatureMaxVersion(wireext.FeatureMirrorProduce) < wireext.FeatureMirrorProduceAssigned {
		return 0, nil
	}
	req := mirror.DeleteRecordsRequest(mirror.Writer{Epoch: mirror.RegisterEpoch, ID: id}, map[string][]int32{topic: parts}, 0)
	r, err := cn.Request(ctx, req, 2)
	if err != nil {
		return -1, fmt.Errorf("registering the mirror writer: %w", err)
	}
	resp := r.(*kmsg.DeleteRecordsResponse)
	epoch := int32(-1)
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
				return -1, fmt.Errorf("registering the mirror writer on %s/%d: %w", topic, p.Partition, err)
			}
			if epoch, err = mirror.AssignedEpoch(&p); err != nil {
				return -1, err
			}
		}
	}
	if epoch < 0 {
		return -1, fmt.Errorf("registering the mirror writer on %s: no writer epoch assigned (the destination lacks %s version %d)", topic, wireext.FeatureMirrorProduce, wireext.FeatureMirrorProduceAssigned)
	}
	return epoch, nil
}

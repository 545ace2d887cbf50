package interop

import (
	"context"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// PartitionView is one broker's Metadata answer for one partition.
type PartitionView struct {
	Leader, Epoch int32
	Replicas, ISR []int32
}

// BrokerPartitions asks broker node itself (not any broker: each answers
// from its own view of the cluster; Kafka's and Verbatim's alike) for
// topic's partitions, and returns them by partition with the number of
// brokers it knows.
func BrokerPartitions(ctx context.Context, cl *kgo.Client, node int32, topic string) ([]PartitionView, int, error) {
	req := kmsg.NewPtrMetadataRequest()
	rt := kmsg.NewMetadataRequestTopic()
	rt.Topic = kmsg.StringPtr(topic)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, cl.Broker(int(node)))
	if err != nil {
		return nil, 0, err
	}
	if len(resp.Topics) != 1 {
		return nil, 0, fmt.Errorf("node %d answered %d topics", node, len(resp.Topics))
	}
	if err := kerr.ErrorForCode(resp.Topics[0].ErrorCode); err != nil {
		return nil, 0, fmt.Errorf("node %d: %v", node, err)
	}
	out := make([]PartitionView, len(resp.Topics[0].Partitions))
	for _, p := range resp.Topics[0].Partitions {
		if p.Partition < 0 || int(p.Partition) >= len(out) {
			return nil, 0, fmt.Errorf("node %d: partition %d of %d", node, p.Partition, len(out))
		}
		out[p.Partition] = PartitionView{Leader: p.Leader, Epoch: p.LeaderEpoch, Replicas: p.Replicas, ISR: p.ISR}
	}
	return out, len(resp.Brokers), nil
}

// WaitInSync polls (every 200 ms, until ctx ends) until every broker of
// nodes answers Metadata for topic with its partitions count, all of
// nodes as brokers, rf replicas and rf in sync per partition, and the same
// leader and leader epoch as the others, and returns that view.
func WaitInSync(ctx context.Context, cl *kgo.Client, nodes []int32, topic string, partitions, rf int) ([]PartitionView, error) {
	var last string
	for {
		var first []PartitionView
		ok := true
		for _, id := range nodes {
			rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			v, brokers, err := BrokerPartitions(rctx, cl, id, topic)
			cancel()
			switch {
			case err != nil:
				last, ok = err.Error(), false
			case brokers != len(nodes) || len(v) != partitions:
				last, ok = fmt.Sprintf("node %d knows %d brokers and %d partitions", id, brokers, len(v)), false
			default:
				for p, pv := range v {
					if len(pv.Replicas) != rf || len(pv.ISR) != rf || pv.Leader < 0 {
						last, ok = fmt.Sprintf("node %d: partition %d leader %d replicas %v isr %v", id, p, pv.Leader, pv.Replicas, pv.ISR), false
					} else if first != nil && (first[p].Leader != pv.Leader || first[p].Epoch != pv.Epoch) {
						last, ok = fmt.Sprintf("node %d: partition %d leader %d epoch %d, another broker says %d epoch %d", id, p, pv.Leader, pv.Epoch, first[p].Leader, first[p].Epoch), false
					}
				}
				if first == nil {
					first = v
				}
			}
			if !ok {
				break
			}
		}
		if ok {
			return first, nil
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("the brokers never agreed on %d partitions with %d replicas in sync: %s", partitions, rf, last)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

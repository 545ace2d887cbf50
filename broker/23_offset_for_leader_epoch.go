package broker

// OffsetForLeaderEpoch (key 23), versions 2-4 (Kafka 4.x serves 2 and up).
//
// Behaviour: for each partition, the largest epoch <= the requested one
// that has batches in the log and its end offset (the start offset of the
// next epoch, or the log end for the latest), from storage's leader-epoch
// cache (Kafka's endOffsetFor semantics; -1/-1 when the requested epoch is
// older than every stored epoch). CurrentLeaderEpoch (KIP-320) fences
// stale (FENCED_LEADER_EPOCH) and future (UNKNOWN_LEADER_EPOCH) callers.
// Consumers (ReplicaID -1) and replicas are answered alike; a single node
// has no followers.
//
// For mirror topics the cache is built from the mirrored batches, so the
// answer equals the source's for every epoch that has batches (BRIEF I3).
//
// Deviations from Apache Kafka: none known.

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func init() { register(kmsg.OffsetForLeaderEpoch.Int16(), 2, 4, handleOffsetForLeaderEpoch) }

func handleOffsetForLeaderEpoch(_ context.Context, s *Server, r *Request) (Reply, error) {
	req := r.Msg.(*kmsg.OffsetForLeaderEpochRequest)
	resp := req.ResponseKind().(*kmsg.OffsetForLeaderEpochResponse)
	for _, rt := range req.Topics {
		ot := kmsg.NewOffsetForLeaderEpochResponseTopic()
		ot.Topic = rt.Topic
		t := s.cluster.topic(rt.Topic)
		for _, rp := range rt.Partitions {
			op := kmsg.NewOffsetForLeaderEpochResponseTopicPartition()
			op.Partition = rp.Partition
			op.LeaderEpoch, op.EndOffset = -1, -1
			var p *Partition
			if t != nil {
				p = t.Partition(rp.Partition)
			}
			if p == nil {
				op.ErrorCode = kerr.UnknownTopicOrPartition.Code
			} else if err := endOffsetForEpoch(p, rp.CurrentLeaderEpoch, rp.LeaderEpoch, &op); err != nil {
				op.ErrorCode, _ = dataErrorToKafka(err)
				op.LeaderEpoch, op.EndOffset = -1, -1
			}
			ot.Partitions = append(ot.Partitions, op)
		}
		resp.Topics = append(resp.Topics, ot)
	}
	return resp, nil
}

func endOffsetForEpoch(p *Partition, current, epoch int32, op *kmsg.OffsetForLeaderEpochResponseTopicPartition) error {
	l, err := partitionLog(p)
	if err != nil {
		return err
	}
	if err := checkLeaderEpoch(p, current); err != nil {
		return err
	}
	e, end, err := l.EndOffsetForEpoch(epoch)
	if err != nil {
		return err
	}
	op.LeaderEpoch, op.EndOffset = e, end
	return nil
}

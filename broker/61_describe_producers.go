package broker

// DescribeProducers (key 61), version 0.
//
// Behaviour: the active producers of each partition from its log's
// producer state (storage): producer id, epoch, last sequence, last
// timestamp, coordinator epoch and the first offset of its open
// transaction (-1 without one) — mirrored producers included, kept
// verbatim. UNKNOWN_TOPIC_OR_PARTITION for missing partitions,
// KAFKA_STORAGE_ERROR for offline logs.
//
// Authorization (with the authorizer on, authorize.go): READ on the topic
// (TOPIC_AUTHORIZATION_FAILED).
//
// Deviations from Apache Kafka: none known.

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/verbatim-kafka/verbatim/authz"
)

func init() { register(kmsg.DescribeProducers.Int16(), 0, 0, handleDescribeProducers) }

func handleDescribeProducers(_ context.Context, s *Server, r *Request) (Reply, error) {
	req := r.Msg.(*kmsg.DescribeProducersRequest)
	resp := req.ResponseKind().(*kmsg.DescribeProducersResponse)
	for _, t := range req.Topics {
		rt := kmsg.NewDescribeProducersResponseTopic()
		rt.Topic = t.Topic
		topic := s.cluster.topic(t.Topic)
		denied := !s.authorized(r, authz.OpRead, authz.ResourceTopic, t.Topic)
		for _, pi := range t.Partitions {
			rp := kmsg.NewDescribeProducersResponseTopicPartition()
			rp.Partition = pi
			if denied {
				rp.ErrorCode = kerr.TopicAuthorizationFailed.Code
				rt.Partitions = append(rt.Partitions, rp)
				continue
			}
			p := topic.Partition(pi)
			if p == nil {
				rp.ErrorCode = kerr.UnknownTopicOrPartition.Code
				rt.Partitions = append(rt.Partitions, rp)
				continue
			}
			l, err := partitionLog(p)
			if err != nil {
				rp.ErrorCode, rp.ErrorMessage = errorToKafka(err)
				rt.Partitions = append(rt.Partitions, rp)
				continue
			}
			for _, info := range l.Producers() {
				ap := kmsg.NewDescribeProducersResponseTopicPartitionActiveProducer()
				ap.ProducerID, ap.ProducerEpoch = info.ProducerID, int32(info.Epoch)
				ap.LastSequence, ap.LastTimestamp = info.LastSequence, info.LastTimestamp
				ap.CoordinatorEpoch, ap.CurrentTxnStartOffset = info.CoordinatorEpoch, info.CurrentTxnFirstOffset
				rp.ActiveProducers = append(rp.ActiveProducers, ap)
			}
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp, nil
}

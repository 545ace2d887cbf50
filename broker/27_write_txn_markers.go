package broker

// WriteTxnMarkers (key 27), version 1.
//
// Behaviour: a transaction coordinator on another broker of the cluster
// sends the COMMIT/ABORT markers of the partitions this broker leads
// (coordinators_peers.go sends them); each is written through the path
// the local coordinator's markers take (storage AppendCoordinator with the
// producer and coordinator epoch checks, acks=all in cluster mode), and a
// marker in __consumer_offsets settles the producer's transactional
// offsets in the group coordinator. Per partition: NONE once written
// (replicated), UNKNOWN_TOPIC_OR_PARTITION for a partition this broker
// does not have, NOT_LEADER_OR_FOLLOWER when it does not lead it,
// INVALID_PRODUCER_EPOCH or TRANSACTION_COORDINATOR_FENCED for a stale
// marker, NOT_ENOUGH_REPLICAS_AFTER_APPEND, KAFKA_STORAGE_ERROR as the
// append answers.
//
// Authorization (with the authorizer on, authorize.go): CLUSTER_ACTION on
// CLUSTER (else every partition CLUSTER_AUTHORIZATION_FAILED), as Kafka.
//
// Deviations from Apache Kafka: v2 (the markers' transaction version,
// KIP-890 part 2) is not served: transaction version 2 is not offered
// (docs/compat.md); v0 is gone from Kafka 4.0 as here.

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/verbatim-kafka/verbatim/authz"
)

// writeTxnMarkersMaxVersion is the version served and sent.
const writeTxnMarkersMaxVersion = 1

func init() {
	register(kmsg.WriteTxnMarkers.Int16(), 1, writeTxnMarkersMaxVersion, handleWriteTxnMarkers)
}

func handleWriteTxnMarkers(_ context.Context, s *Server, r *Request) (Reply, error) {
	req := r.Msg.(*kmsg.WriteTxnMarkersRequest)
	resp := req.ResponseKind().(*kmsg.WriteTxnMarkersResponse)
	allowed := s.authorizedCluster(r, authz.OpClusterAction)
	for _, m := range req.Markers {
		rm := kmsg.NewWriteTxnMarkersResponseMarker()
		rm.ProducerID = m.ProducerID
		for _, t := range m.Topics {
			rt := kmsg.NewWriteTxnMarkersResponseMarkerTopic()
			rt.Topic = t.Topic
			for _, part := range t.Partitions {
				rp := kmsg.NewWriteTxnMarkersResponseMarkerTopicPartition()
				rp.Partition = part
				if !allowed {
					rp.ErrorCode = kerr.ClusterAuthorizationFailed.Code
				} else {
					rp.ErrorCode = s.writeMarkerServed(t.Topic, part, m)
				}
				rt.Partitions = append(rt.Partitions, rp)
			}
			rm.Topics = append(rm.Topics, rt)
		}
		resp.Markers = append(resp.Markers, rm)
	}
	return resp, nil
}

// writeMarkerServed writes one requested marker and returns its code.
func (s *Server) writeMarkerServed(topic string, partition int32, m kmsg.WriteTxnMarkersRequestMarker) int16 {
	t := s.cluster.topic(topic)
	if t == nil || t.Deleted() {
		return kerr.UnknownTopicOrPartition.Code
	}
	p := t.Partition(partition)
	if p == nil {
		return kerr.UnknownTopicOrPartition.Code
	}
	err := s.writeMarkerLocal(p, m.ProducerID, m.ProducerEpoch, m.Committed, m.CoordinatorEpoch, newCoordClock().Now())
	code, _ := dataErrorToKafka(err)
	return code
}

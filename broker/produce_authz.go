package broker

// Produce's authorization, as Kafka's KafkaApis checks it: a request with
// transactional batches needs WRITE on its TRANSACTIONAL_ID (else every
// partition TRANSACTIONAL_ID_AUTHORIZATION_FAILED); each topic needs WRITE
// (TOPIC_AUTHORIZATION_FAILED, checked before the topic's existence); a
// mirror produce also needs the mirror permission (every partition
// CLUSTER_AUTHORIZATION_FAILED, naming the missing ACL). Idempotent
// batches need nothing more than WRITE on the topic (Kafka 3.0 dropped
// IDEMPOTENT_WRITE from Produce; InitProducerId checks it).

import (
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/verbatim-kafka/verbatim/authz"
	"github.com/verbatim-kafka/verbatim/hotpath"
	"github.com/verbatim-kafka/verbatim/kbatch"
)

// produceRequestRefusal is the request-wide refusal of a produce, or nil.
// Only called with the authorizer on.
func (s *Server) produceRequestRefusal(r *Request, req *hotpath.ProduceRequest) error {
	if req.HasMirror {
		if !s.mirrorPermitted(r) {
			return errMirrorPermission(r, "mirror produce")
		}
		return nil
	}
	if !hasTransactionalBatches(req) {
		return nil
	}
	if req.TransactionalID == nil || !s.authorized(r, authz.OpWrite, authz.ResourceTransactionalID, string(req.TransactionalID)) {
		return kafkaErr(kerr.TransactionalIDAuthorizationFailed, kerr.TransactionalIDAuthorizationFailed.Message)
	}
	return nil
}

// hasTransactionalBatches reports whether a partition's first batch is
// transactional (Kafka looks at the first batch of each partition).
func hasTransactionalBatches(req *hotpath.ProduceRequest) bool {
	for ti := range req.Topics {
		for pi := range req.Topics[ti].Partitions {
			set := req.Topics[ti].Partitions[pi].Records
			if len(set) >= kbatch.HeaderSize && kbatch.Attributes(set)&kbatch.TransactionalBit != 0 {
				return true
			}
		}
	}
	return false
}

// produceTopicAuthorized reports whether the request may WRITE the topic
// named name.
func (s *Server) produceTopicAuthorized(r *Request, name string) bool {
	return s.authorized(r, authz.OpWrite, authz.ResourceTopic, name)
}

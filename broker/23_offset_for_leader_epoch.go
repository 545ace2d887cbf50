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
// has no followers. In cluster mode only the leader answers, consumers
// and followers alike (NOT_LEADER_OR_FOLLOWER elsewhere). An epoch newer than every stored one but not newer
// than the partition's current epoch ends at the log end, as on a Kafka
// leader, whose cache holds its own epoch from its election on.
//
// For mirror topics the cache is built from the mirrored batches, so the
// answer equals the source's for every epoch that has batches (invariant
// I3, docs/mirroring.md).
//
// Authorization (with the authorizer on, authorize.go): DESCRIBE on the
// topic; replicas CLUSTER_ACTION on CLUSTER.
//
// Deviations from Apache Kafka: none known.

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/verbatim-kafka/verbatim/authz"
	"github.com/verbatim-kafka/verbatim/storage"
)

func init() { register(kmsg.OffsetForLeaderEpoch.Int16(), 2, 4, handleOffsetForLeaderEpoch) }

func handleOffsetForLeaderEpoch(_ context.Context, s *Server, r *Request) (Reply, error) {
	req := r.Msg.(*kmsg.OffsetForLeaderEpochRequest)
	resp := req.ResponseKind().(*kmsg.OffsetForLeaderEpochResponse)
	// Kafka's checks: a replica (ReplicaID >= 0, v3+) needs CLUSTER_ACTION
	// on CLUSTER (every partition CLUSTER_AUTHORIZATION_FAILED), a
	// consumer DESCRIBE on each topic.
	replicaDenied := req.Version >= 3 && req.ReplicaID >= 0 && !s.authorizedCluster(r, authz.OpClusterAction)
	for _, rt := range req.Topics {
		ot := kmsg.NewOffsetForLeaderEpochResponseTopic()
		ot.Topic = rt.Topic
		t := s.cluster.topic(rt.Topic)
		denied := !replicaDenied && !s.authorized(r, authz.OpDescribe, authz.ResourceTopic, rt.Topic)
		for _, rp := range rt.Partitions {
			op := kmsg.NewOffsetForLeaderEpochResponseTopicPartition()
			op.Partition = rp.Partition
			op.LeaderEpoch, op.EndOffset = -1, -1
			p := t.Partition(rp.Partition)
			if replicaDenied {
				op.ErrorCode = kerr.ClusterAuthorizationFailed.Code
			} else if denied {
				op.ErrorCode = kerr.TopicAuthorizationFailed.Code
			} else if p == nil {
				op.ErrorCode = kerr.UnknownTopicOrPartition.Code
			} else if err := s.endOffsetForEpochLeader(p, rp.CurrentLeaderEpoch, rp.LeaderEpoch, &op); err != nil {
				op.ErrorCode, _ = dataErrorToKafka(err)
				op.LeaderEpoch, op.EndOffset = -1, -1
				s.logDataFailure("offset for leader epoch", p.Topic.Name, p.Index, op.ErrorCode, err, clientOf(r), "leader_epoch", rp.LeaderEpoch)
			}
			ot.Partitions = append(ot.Partitions, op)
		}
		resp.Topics = append(resp.Topics, ot)
	}
	return resp, nil
}

// endOffsetForEpochLeader is endOffsetForEpoch on the partition's leader
// in cluster mode: consumers and followers alike ask the leader, as
// Kafka's ReplicaManager requires.
func (s *Server) endOffsetForEpochLeader(p *Partition, current, epoch int32, op *kmsg.OffsetForLeaderEpochResponseTopicPartition) error {
	if _, err := s.leaderCheck(p, current); err != nil {
		return err
	}
	return endOffsetForEpoch(p, current, epoch, op)
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
	if e == storage.UndefinedEpoch && epoch >= 0 && epoch <= p.LeaderEpoch() {
		// Kafka's leader puts its own epoch in the cache when elected,
		// so an epoch between the latest stored one and the current one
		// ends at the log end. Here the current epoch enters the cache
		// with its first batch (a mirror's cache holds only the source's
		// epochs), so answer as Kafka's cache would.
		latest, ok := l.EpochCache().LatestEpoch()
		if !ok || epoch >= latest {
			e, end = epoch, l.LogEndOffset()
			if ok && epoch != p.LeaderEpoch() {
				e = latest
			}
		}
	}
	op.LeaderEpoch, op.EndOffset = e, end
	return nil
}

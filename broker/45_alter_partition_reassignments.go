package broker

// AlterPartitionReassignments (key 45), versions 0-1 (KIP-455; v1:
// KIP-860's AllowReplicationFactorChange).
//
// Behaviour:
//   - Each partition's Replicas is the target assignment; null cancels the
//     reassignment in progress (NO_REASSIGNMENT_IN_PROGRESS when there is
//     none). Unknown topics and partitions are UNKNOWN_TOPIC_OR_PARTITION;
//     an empty target, a broker named twice or one not registered is
//     INVALID_REPLICA_ASSIGNMENT; with AllowReplicationFactorChange false a
//     target of another size than the current replicas is
//     INVALID_REPLICATION_FACTOR.
//   - In cluster mode (cluster_mode_reassign.go) the target is written
//     into the partition's state in the cluster store with
//     compare-and-swap (controller.Reassign: Replicas the union,
//     AddingReplicas, RemovingReplicas); the controller completes the move
//     once every added replica is in the ISR. The answer comes once this
//     broker has applied the write.
//   - On a single node the only possible assignment is this node, which
//     is already every partition's: it succeeds and changes nothing.
//
// Authorization (with the authorizer on, authorize.go): ALTER on the
// CLUSTER; otherwise CLUSTER_AUTHORIZATION_FAILED for the request and
// every partition.
//
// Deviations from Apache Kafka: none known.

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/verbatim-kafka/verbatim/authz"
)

func init() {
	register(kmsg.AlterPartitionAssignments.Int16(), 0, 1, handleAlterPartitionReassignments)
}

func handleAlterPartitionReassignments(_ context.Context, s *Server, r *Request) (Reply, error) {
	req := r.Msg.(*kmsg.AlterPartitionAssignmentsRequest)
	resp := req.ResponseKind().(*kmsg.AlterPartitionAssignmentsResponse)
	allowRF := req.Version < 1 || req.AllowReplicationFactorChange
	var items []reassignItem
	for _, rt := range req.Topics {
		for _, rp := range rt.Partitions {
			items = append(items, reassignItem{topic: rt.Topic, partition: rp.Partition, target: rp.Replicas, cancel: rp.Replicas == nil})
		}
	}
	var errs []error
	if !s.authorizedCluster(r, authz.OpAlter) {
		resp.ErrorCode = kerr.ClusterAuthorizationFailed.Code
		errs = make([]error, len(items))
		for i := range errs {
			errs[i] = kerr.ClusterAuthorizationFailed
		}
	} else {
		errs = s.reassign(items, allowRF)
	}
	i := 0
	for _, rt := range req.Topics {
		st := kmsg.NewAlterPartitionAssignmentsResponseTopic()
		st.Topic = rt.Topic
		for _, rp := range rt.Partitions {
			sp := kmsg.NewAlterPartitionAssignmentsResponseTopicPartition()
			sp.Partition = rp.Partition
			sp.ErrorCode, sp.ErrorMessage = errorToKafka(errs[i])
			if errs[i] != nil {
				s.logAdminFailure("alter partition reassignment", rt.Topic, sp.ErrorCode, errs[i], clientOf(r))
			}
			s.auditRecord(r, "alter partition reassignment", "TOPIC", rt.Topic, sp.ErrorCode, "partition", rp.Partition, "replicas", rp.Replicas)
			st.Partitions = append(st.Partitions, sp)
			i++
		}
		resp.Topics = append(resp.Topics, st)
	}
	return resp, nil
}

package broker

// ListPartitionReassignments (key 46), version 0 (KIP-455).
//
// Behaviour: the partitions with a reassignment in progress, each with
// its replicas (the union), the replicas being added and those being
// removed; all of them when Topics is null, else those of the listed
// partitions (partitions without a reassignment, and unknown topics or
// partitions, are left out, as Kafka's controller leaves them out). A
// single node never has a reassignment in progress.
//
// Authorization (with the authorizer on, authorize.go): DESCRIBE on the
// CLUSTER; otherwise CLUSTER_AUTHORIZATION_FAILED.
//
// Deviations from Apache Kafka: none known.

import (
	"context"
	"maps"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/verbatim-kafka/verbatim/authz"
	"github.com/verbatim-kafka/verbatim/clustermeta"
	"github.com/verbatim-kafka/verbatim/controller"
)

func init() {
	register(kmsg.ListPartitionReassignments.Int16(), 0, 0, handleListPartitionReassignments)
}

func handleListPartitionReassignments(_ context.Context, s *Server, r *Request) (Reply, error) {
	req := r.Msg.(*kmsg.ListPartitionReassignmentsRequest)
	resp := req.ResponseKind().(*kmsg.ListPartitionReassignmentsResponse)
	if !s.authorizedCluster(r, authz.OpDescribe) {
		resp.ErrorCode = kerr.ClusterAuthorizationFailed.Code
		return resp, nil
	}
	snap := s.clusterSnapshot()
	if snap == nil {
		return resp, nil
	}
	add := func(topic string, states []clustermeta.PartitionState) {
		rt := kmsg.NewListPartitionReassignmentsResponseTopic()
		rt.Topic = topic
		for _, st := range states {
			rp := kmsg.NewListPartitionReassignmentsResponseTopicPartition()
			rp.Partition = st.Partition
			rp.Replicas = slices.Clone(st.Replicas)
			rp.AddingReplicas = append([]int32{}, st.AddingReplicas...)
			rp.RemovingReplicas = append([]int32{}, st.RemovingReplicas...)
			rt.Partitions = append(rt.Partitions, rp)
		}
		if len(rt.Partitions) > 0 {
			resp.Topics = append(resp.Topics, rt)
		}
	}
	inProgress := func(states []clustermeta.PartitionState, want func(int32) bool) []clustermeta.PartitionState {
		var out []clustermeta.PartitionState
		for _, st := range states {
			if controller.Reassigning(st) && want(st.Partition) {
				out = append(out, st)
			}
		}
		return out
	}
	if req.Topics == nil {
		for _, name := range slices.Sorted(maps.Keys(snap.Partitions)) {
			add(name, inProgress(snap.Partitions[name], func(int32) bool { return true }))
		}
		return resp, nil
	}
	for _, rt := range req.Topics {
		add(rt.Topic, inProgress(snap.Partitions[rt.Topic], func(p int32) bool { return slices.Contains(rt.Partitions, p) }))
	}
	return resp, nil
}

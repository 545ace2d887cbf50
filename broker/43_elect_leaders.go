package broker

// ElectLeaders (key 43), versions 0-2 (KIP-460: v1 adds the election
// type, v2 is flexible).
//
// Behaviour:
//   - ElectionType 0 (PREFERRED; v0 always) makes each partition's first
//     replica its leader when it is live and in the ISR; 1 (UNCLEAN)
//     elects a leader for partitions that have no live one, from the ISR
//     when a member is live, else the first live replica. Per-partition
//     errors are Kafka's: ELECTION_NOT_NEEDED (the preferred replica leads
//     already; a live leader for unclean), PREFERRED_LEADER_NOT_AVAILABLE,
//     ELIGIBLE_LEADERS_NOT_AVAILABLE, UNKNOWN_TOPIC_OR_PARTITION.
//   - Topics null: every partition of the cluster; as Kafka's controller
//     does, partitions whose election was not needed are then left out of
//     the answer.
//   - On a single node every partition has one replica, which leads:
//     every election is ELECTION_NOT_NEEDED.
//
// In cluster mode (cluster_elect.go) the decisions are controller.Elect's
// on a fresh read of the cluster store, written by this broker with one
// compare-and-swap per batch fenced by its own registration (a broker
// whose lease ended writes nothing; a decision another writer overtook
// is decided again on the newer state). The answer comes once this
// broker has applied the new states, so its next Metadata shows the new
// leaders.
//
// Authorization (with the authorizer on, authorize.go): ALTER on CLUSTER;
// refused, the top-level error (v1+) and every partition asked for are
// CLUSTER_AUTHORIZATION_FAILED.
//
// Deviations from Apache Kafka: a partition named twice is elected once
// and answered twice; TimeoutMillis bounds nothing beyond the broker's
// own bound on store writes (half the request timeout, at least 1 s).

import (
	"context"
	"errors"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/verbatim-kafka/verbatim/authz"
	"github.com/verbatim-kafka/verbatim/controller"
)

func init() { register(kmsg.ElectLeaders.Int16(), 0, 2, handleElectLeaders) }

func handleElectLeaders(_ context.Context, s *Server, r *Request) (Reply, error) {
	req := r.Msg.(*kmsg.ElectLeadersRequest)
	resp := req.ResponseKind().(*kmsg.ElectLeadersResponse)
	kind := controller.PreferredElection
	if req.Version >= 1 {
		kind = controller.ElectionType(req.ElectionType)
	}
	var refs []controller.PartitionRef
	if req.Topics != nil {
		refs = []controller.PartitionRef{}
		for _, t := range req.Topics {
			for _, p := range t.Partitions {
				refs = append(refs, controller.PartitionRef{Topic: t.Topic, Partition: p})
			}
		}
	}
	var results []controller.Election
	switch {
	case !s.authorizedCluster(r, authz.OpAlter):
		resp.ErrorCode = kerr.ClusterAuthorizationFailed.Code
		for _, ref := range refs {
			results = append(results, controller.Election{PartitionRef: ref, Err: kerr.ClusterAuthorizationFailed})
		}
	case kind != controller.PreferredElection && kind != controller.UncleanElection:
		resp.ErrorCode = kerr.InvalidRequest.Code
	case s.cm != nil:
		var err error
		if results, err = s.cm.electLeaders(refs, kind); err != nil {
			code, _ := errorToKafka(err)
			resp.ErrorCode = code
			for _, ref := range refs {
				results = append(results, controller.Election{PartitionRef: ref, Err: err})
			}
		}
	default:
		results = s.electLocal(refs)
	}
	if req.Version == 0 && resp.ErrorCode != 0 && len(results) == 0 {
		// v0 has no top-level error: an invalid election type cannot be
		// asked for in v0, a refusal is carried by the partitions.
		resp.ErrorCode = 0
	}
	resp.Topics = electionResponse(results, req.Topics == nil)
	s.auditRecord(r, "elect leaders", "CLUSTER", authz.ClusterName, resp.ErrorCode, "election_type", int8(kind), "partitions", len(results))
	return resp, nil
}

// electLocal is the single node's answer: the one replica leads every
// partition.
func (s *Server) electLocal(refs []controller.PartitionRef) []controller.Election {
	if refs == nil {
		return nil // all partitions, none needing an election
	}
	out := make([]controller.Election, len(refs))
	for i, ref := range refs {
		out[i].PartitionRef = ref
		if t := s.cluster.topic(ref.Topic); t == nil || t.Partition(ref.Partition) == nil {
			out[i].Err = controller.ErrUnknownPartition
		} else {
			out[i].Err = controller.ErrElectionNotNeeded
		}
	}
	return out
}

// electionResponse groups the results by topic in the order asked; with
// all partitions asked for (Topics null) those whose election was not
// needed are left out, as Kafka's controller answers.
func electionResponse(results []controller.Election, all bool) []kmsg.ElectLeadersResponseTopic {
	var out []kmsg.ElectLeadersResponseTopic
	index := map[string]int{}
	for _, e := range results {
		if all && errors.Is(e.Err, controller.ErrElectionNotNeeded) {
			continue
		}
		i, ok := index[e.Topic]
		if !ok {
			t := kmsg.NewElectLeadersResponseTopic()
			t.Topic = e.Topic
			out = append(out, t)
			i = len(out) - 1
			index[e.Topic] = i
		}
		p := kmsg.NewElectLeadersResponseTopicPartition()
		p.Partition = e.Partition
		p.ErrorCode, p.ErrorMessage = electionError(e.Err)
		out[i].Partitions = append(out[i].Partitions, p)
	}
	return out
}

// electionError is one partition's error code and message.
func electionError(err error) (int16, *string) {
	switch {
	case err == nil:
		return 0, nil
	case errors.Is(err, controller.ErrElectionNotNeeded):
		return kerr.ElectionNotNeeded.Code, kmsg.StringPtr("Leader election not needed for topic partition.")
	case errors.Is(err, controller.ErrPreferredLeaderNotAvailable):
		return kerr.PreferredLeaderNotAvailable.Code, kmsg.StringPtr("Failed to elect leader for partition: the preferred replica is not live or not in the ISR.")
	case errors.Is(err, controller.ErrEligibleLeadersNotAvailable):
		return kerr.EligibleLeadersNotAvailable.Code, kmsg.StringPtr("Failed to elect leader for partition: no live replica can lead.")
	case errors.Is(err, controller.ErrUnknownPartition):
		return kerr.UnknownTopicOrPartition.Code, kmsg.StringPtr("This server does not host this topic-partition.")
	}
	return errorToKafka(err)
}

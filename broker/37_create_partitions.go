package broker

// CreatePartitions (key 37), versions 0-3.
//
// Behaviour:
//   - Grows a topic to Count partitions; new partitions start at leader
//     epoch 0. A count equal to or below the current one is
//     INVALID_PARTITIONS with Kafka's messages.
//   - A manual assignment must list exactly the new partitions, each on
//     this node alone (INVALID_REPLICA_ASSIGNMENT otherwise).
//   - ValidateOnly runs the checks and changes nothing.
//   - A topic repeated in one request is INVALID_REQUEST for every
//     occurrence; unknown topics UNKNOWN_TOPIC_OR_PARTITION.
//
// In cluster mode (cluster_mode_admin.go) the new partitions are written
// to the cluster store with the topic's replication factor, placed over
// the registered brokers, or as the request assigns them (checked as
// Kafka's controller checks them).
//
// Authorization (with the authorizer on, authorize.go): ALTER on the
// topic; mirror topics the mirror lifecycle permission too.
//
// Deviations from Apache Kafka: the internal topics (__consumer_offsets,
// __transaction_state) keep their partition count (INVALID_REQUEST): the
// coordinators map keys to partitions by that count.

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/verbatim-kafka/verbatim/authz"
)

func init() { register(kmsg.CreatePartitions.Int16(), 0, 3, handleCreatePartitions) }

func handleCreatePartitions(_ context.Context, s *Server, r *Request) (Reply, error) {
	req := r.Msg.(*kmsg.CreatePartitionsRequest)
	resp := req.ResponseKind().(*kmsg.CreatePartitionsResponse)
	seen := map[string]int{}
	for _, rt := range req.Topics {
		seen[rt.Topic]++
	}
	for _, rt := range req.Topics {
		st := kmsg.NewCreatePartitionsResponseTopic()
		st.Topic = rt.Topic
		var err error
		if seen[rt.Topic] > 1 {
			err = kafkaErr(kerr.InvalidRequest, "Duplicate topic in request.")
		} else if err = s.alterTopicRefusal(r, rt.Topic, authz.OpAlter, "adding partitions to mirror topic "); err == nil {
			err = s.createPartitions(&rt, req.ValidateOnly)
		}
		st.ErrorCode, st.ErrorMessage = errorToKafka(err)
		if err != nil {
			s.logAdminFailure("create partitions", rt.Topic, st.ErrorCode, err, clientOf(r))
		}
		if !req.ValidateOnly {
			s.auditRecord(r, "create partitions", "TOPIC", rt.Topic, st.ErrorCode, "count", rt.Count)
		}
		resp.Topics = append(resp.Topics, st)
	}
	return resp, nil
}

func (s *Server) createPartitions(rt *kmsg.CreatePartitionsRequestTopic, validateOnly bool) error {
	t := s.cluster.topic(rt.Topic)
	if t == nil {
		return fmt.Errorf("%w: This server does not host this topic-partition.", errUnknownTopic)
	}
	if isInternalTopic(t.Name) {
		return kafkaErr(kerr.InvalidRequest, fmt.Sprintf("The partition count of internal topic %s cannot change: the coordinators map keys to its partitions.", t.Name))
	}
	if s.cm != nil {
		var manual [][]int32
		if rt.Assignment != nil {
			manual = make([][]int32, 0, len(rt.Assignment))
			for _, a := range rt.Assignment {
				manual = append(manual, a.Replicas)
			}
		}
		if err := s.cm.addPartitions(t, rt.Count, validateOnly, manual); err != nil {
			return err
		}
		if !validateOnly {
			s.log.Info("added partitions", "topic", t.Name, "partitions", rt.Count)
		}
		return nil
	}
	if rt.Assignment != nil {
		want := int(rt.Count) - len(t.Partitions())
		if len(rt.Assignment) != want {
			return fmt.Errorf("%w: Attempted to add %d additional partition(s), but only %d assignment(s) were specified.", errInvalidReplicaAsg, want, len(rt.Assignment))
		}
		for _, a := range rt.Assignment {
			if len(a.Replicas) != 1 || a.Replicas[0] != s.cfg.NodeID {
				return fmt.Errorf("%w: Replica assignment %v is not possible on this single-node cluster: the only broker is %d", errInvalidReplicaAsg, a.Replicas, s.cfg.NodeID)
			}
		}
	}
	if err := s.cluster.addPartitions(t, rt.Count, validateOnly); err != nil {
		return err
	}
	if !validateOnly {
		s.log.Info("added partitions", "topic", t.Name, "partitions", rt.Count)
	}
	return nil
}

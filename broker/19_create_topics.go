package broker

// CreateTopics (key 19), versions 0-7.
//
// Behaviour:
//   - NumPartitions -1 (v4+) means --num-partitions; ReplicationFactor must
//     be 1 or -1 (default): this is a single node, so anything else is
//     INVALID_REPLICATION_FACTOR, with Kafka's message. A manual replica
//     assignment must place every partition 0..n-1 on this node alone, and
//     excludes NumPartitions/ReplicationFactor (INVALID_REQUEST otherwise).
//   - Configs are Kafka topic configs (topicconfig.go): unknown names and
//     invalid values are INVALID_CONFIG, null values INVALID_REQUEST.
//     mirror.mode=push (and mirror.source.cluster.id) are accepted only
//     here, at creation.
//   - Verbatim extension (v5+, mirror_topic_id.go, docs/protocol.md): the
//     topic entry's tagged field wireext.MirrorTag gives a
//     mirror.mode=push topic its source's topic id; refused (INVALID_REQUEST) on other topics, for
//     the zero or reserved id, or malformed; an id another topic has is
//     TOPIC_ALREADY_EXISTS.
//   - ValidateOnly (v1+) runs every check and creates nothing.
//   - v5+ responses carry the partition count, replication factor and the
//     effective configs; v7+ the topic id.
//   - A topic name repeated in one request fails with INVALID_REQUEST for
//     every occurrence, as in Kafka.
//   - Each topic is answered on its own: one bad topic never fails the rest.
//
// In cluster mode (cluster_mode_admin.go) the topic is written to the
// cluster store: ReplicationFactor (-1: default.replication.factor)
// replicas per partition placed rack-aware over the registered brokers,
// or the request's assignment, checked as Kafka's controller checks it
// (INVALID_REPLICATION_FACTOR, INVALID_REPLICA_ASSIGNMENT); the response
// is sent once this broker has applied the creation.
//
// Authorization (with the authorizer on, authorize.go): CREATE on CLUSTER
// or the topic; configs withheld without DESCRIBE_CONFIGS; mirror topics
// the mirror permission too.
//
// Deviations from Apache Kafka: topic creation policies
// (create.topic.policy.class.name) do not exist; a topic is durable in the
// data dir's metadata when the response is sent (TimeoutMillis is not
// needed: there is no controller to wait for).

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/verbatim-kafka/verbatim/authz"
)

func init() { register(kmsg.CreateTopics.Int16(), 0, 7, handleCreateTopics) }

func handleCreateTopics(_ context.Context, s *Server, r *Request) (Reply, error) {
	req := r.Msg.(*kmsg.CreateTopicsRequest)
	resp := req.ResponseKind().(*kmsg.CreateTopicsResponse)
	seen := map[string]int{}
	for _, rt := range req.Topics {
		seen[rt.Topic]++
	}
	clusterCreate := s.authorizedCluster(r, authz.OpCreate)
	for _, rt := range req.Topics {
		st := kmsg.NewCreateTopicsResponseTopic()
		st.Topic = rt.Topic
		st.NumPartitions, st.ReplicationFactor = -1, -1
		fail := func(err error) {
			st.ErrorCode, st.ErrorMessage = errorToKafka(err)
			s.logAdminFailure("create topics", rt.Topic, st.ErrorCode, err, clientOf(r))
			if !req.ValidateOnly {
				s.auditRecord(r, "create topic", "TOPIC", rt.Topic, st.ErrorCode)
			}
			if req.Version < 1 {
				st.ErrorMessage = nil
			}
		}
		if seen[rt.Topic] > 1 {
			fail(kafkaErr(kerr.InvalidRequest, fmt.Sprintf("Create topics request from client `%s` contains multiple entries for the following topics: %s", r.ClientID, rt.Topic)))
			resp.Topics = append(resp.Topics, st)
			continue
		}
		if err := s.createTopicRefusal(r, &rt, clusterCreate); err != nil {
			fail(err)
			resp.Topics = append(resp.Topics, st)
			continue
		}
		t, err := s.createTopicFromRequest(&rt, req.ValidateOnly)
		if err != nil {
			fail(err)
			resp.Topics = append(resp.Topics, st)
			continue
		}
		if !req.ValidateOnly {
			s.log.Info("created topic", "topic", t.Name, "partitions", len(t.Partitions()), "configs", t.Config().Overrides())
			s.auditRecord(r, "create topic", "TOPIC", t.Name, 0, "partitions", len(t.Partitions()))
			st.TopicID = t.ID
		}
		if !s.authorized(r, authz.OpDescribeConfigs, authz.ResourceTopic, t.Name) {
			// Created, but its configs are not the principal's to see.
			st.ConfigErrorCode = kerr.TopicAuthorizationFailed.Code
			resp.Topics = append(resp.Topics, st)
			continue
		}
		st.NumPartitions = int32(len(t.Partitions()))
		st.ReplicationFactor = replicationFactor(t)
		for _, e := range t.Config().describe() {
			c := kmsg.NewCreateTopicsResponseTopicConfig()
			c.Name, c.Value, c.Source = e.def.name, e.value, int8(e.source)
			c.ReadOnly = e.readOnly
			st.Configs = append(st.Configs, c)
		}
		resp.Topics = append(resp.Topics, st)
	}
	return resp, nil
}

func (s *Server) createTopicFromRequest(rt *kmsg.CreateTopicsRequestTopic, validateOnly bool) (*Topic, error) {
	if err := validateTopicName(rt.Topic); err != nil {
		return nil, err
	}
	partitions := rt.NumPartitions
	var pl placement // cluster mode's
	if len(rt.ReplicaAssignment) > 0 {
		if rt.NumPartitions != -1 || rt.ReplicationFactor != -1 {
			return nil, kafkaErr(kerr.InvalidRequest, "Both numPartitions or replicationFactor and replicasAssignments were set. Both cannot be used at the same time.")
		}
		seen := make(map[int32]bool, len(rt.ReplicaAssignment))
		for _, a := range rt.ReplicaAssignment {
			if a.Partition < 0 || int(a.Partition) >= len(rt.ReplicaAssignment) || seen[a.Partition] {
				return nil, fmt.Errorf("%w: Partitions should be a consecutive 0-based integer sequence", errInvalidReplicaAsg)
			}
			seen[a.Partition] = true
			if s.cm != nil {
				continue
			}
			if len(a.Replicas) != 1 || a.Replicas[0] != s.cfg.NodeID {
				return nil, fmt.Errorf("%w: Replica assignment %v of partition %d is not possible on this single-node cluster: the only broker is %d", errInvalidReplicaAsg, a.Replicas, a.Partition, s.cfg.NodeID)
			}
		}
		partitions = int32(len(rt.ReplicaAssignment))
		if s.cm != nil {
			pl.manual = make([][]int32, partitions)
			for _, a := range rt.ReplicaAssignment {
				pl.manual[a.Partition] = a.Replicas
			}
		}
	} else {
		switch rf := rt.ReplicationFactor; {
		case rf == -1:
		case rf < 1:
			return nil, fmt.Errorf("%w: Replication factor must be larger than 0, or -1 to use the default value.", errInvalidReplicas)
		case s.cm != nil:
			pl.rf = rf // placed over the registered brokers
		case rf != 1:
			return nil, fmt.Errorf("%w: Unable to replicate the partition %d time(s): The target replication factor of %d cannot be reached because only 1 broker(s) are registered.", errInvalidReplicas, rt.ReplicationFactor, rt.ReplicationFactor)
		}
		if partitions == -1 {
			partitions = s.cfg.DefaultPartitions
		}
		if partitions < 1 {
			return nil, fmt.Errorf("%w: Number of partitions was set to an invalid non-positive value.", errInvalidPartitions)
		}
	}
	overrides := make(map[string]string, len(rt.Configs))
	for _, c := range rt.Configs {
		if c.Value == nil {
			return nil, kafkaErr(kerr.InvalidRequest, fmt.Sprintf("Null value not supported for topic configs: %s", c.Name))
		}
		if _, dup := overrides[c.Name]; dup {
			return nil, kafkaErr(kerr.InvalidRequest, fmt.Sprintf("Duplicate config name %s", c.Name))
		}
		overrides[c.Name] = *c.Value
	}
	cfg, err := s.topicConfig(overrides)
	if err != nil {
		return nil, err
	}
	if err := s.checkTopicPolicies(cfg); err != nil {
		return nil, err
	}
	id, pinned, err := requestedTopicID(rt, cfg)
	if err != nil {
		return nil, err
	}
	if pinned {
		return s.createMirrorTopicWithID(rt.Topic, partitions, cfg, validateOnly, id)
	}
	if s.cm != nil {
		return s.cm.createTopic(rt.Topic, partitions, cfg, validateOnly, [16]byte{}, pl)
	}
	return s.cluster.createTopic(rt.Topic, partitions, cfg, validateOnly)
}

// createTopicRefusal is CreateTopics' authorization: CREATE on CLUSTER or
// on the topic (TOPIC_AUTHORIZATION_FAILED), and for a mirror topic
// (mirror.mode among its configs) the mirror permission too.
func (s *Server) createTopicRefusal(r *Request, rt *kmsg.CreateTopicsRequestTopic, clusterCreate bool) error {
	if !clusterCreate && !s.authorized(r, authz.OpCreate, authz.ResourceTopic, rt.Topic) {
		return kafkaErr(kerr.TopicAuthorizationFailed, kerr.TopicAuthorizationFailed.Message)
	}
	for _, c := range rt.Configs {
		if c.Name == "mirror.mode" && !s.mirrorPermitted(r) {
			return errMirrorPermission(r, "creating mirror topic "+rt.Topic)
		}
	}
	return nil
}

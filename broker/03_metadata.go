package broker

// Metadata (key 3), versions 0-13.
//
// Behaviour:
//   - This single node is the only broker, the controller, and the leader
//     of every partition (replicas = ISR = [node id]). Each partition
//     reports its persisted leader epoch (v7+) and each topic its id
//     (v10+). The cluster id (v2+) is the one persisted in meta.properties.
//   - A null topic list (v1+) or an empty one (v0) lists every topic;
//     topics may be named or (v10+) given by id.
//   - Unknown topics get UNKNOWN_TOPIC_OR_PARTITION (UNKNOWN_TOPIC_ID when
//     looked up by id), invalid names INVALID_TOPIC_EXCEPTION. Auto-create
//     is off by default (--auto-create-topics turns it on; then
//     AllowAutoTopicCreation, always true before v4, is honoured) and
//     creates the topic with --num-partitions partitions and default
//     configs; the topic is returned ready, with no error.
//   - Authorization (with the authorizer on, authorize.go), as Kafka's:
//     DESCRIBE on each topic; a named topic the principal may not
//     describe is TOPIC_AUTHORIZATION_FAILED (by id: without its name),
//     and left out of an all-topics answer; auto-creation needs CREATE on
//     CLUSTER or on the topic (else TOPIC_AUTHORIZATION_FAILED).
//   - Authorized operations (v8+) are reported when asked for: the
//     principal's, as the authorizer computes them (without an authorizer
//     every operation of the resource type).
//
// In cluster mode (cluster_mode_describe.go) the brokers are the
// registered ones with their endpoint on the request's listener, the
// controller the elected one, and each partition is as the cluster store
// has it: leader (LEADER_NOT_AVAILABLE, leader -1, when none is
// registered; LISTENER_NOT_FOUND from v6 when the leader lacks the
// listener), leader epoch, replicas, ISR, offline replicas. Auto-created
// topics get default.replication.factor replicas.
//
// Deviations from Apache Kafka: Kafka answers a freshly auto-created topic
// with LEADER_NOT_AVAILABLE until its leader is elected; here it is ready at
// once. Lookups by topic id are served (Kafka 4.x answers them with
// UNKNOWN_TOPIC_ID).

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/verbatim-kafka/verbatim/authz"
)

func init() { register(kmsg.Metadata.Int16(), 0, 13, handleMetadata) }

// Authorized-operation bit sets (bit n = AclOperation n) for a broker
// without ACLs: every operation that applies to the resource type.
const (
	// READ 3, WRITE 4, CREATE 5, DELETE 6, ALTER 7, DESCRIBE 8,
	// DESCRIBE_CONFIGS 10, ALTER_CONFIGS 11.
	topicAllOps = 1<<3 | 1<<4 | 1<<5 | 1<<6 | 1<<7 | 1<<8 | 1<<10 | 1<<11
	// CREATE 5, ALTER 7, DESCRIBE 8, CLUSTER_ACTION 9, DESCRIBE_CONFIGS 10,
	// ALTER_CONFIGS 11, IDEMPOTENT_WRITE 12, CREATE_TOKENS 13,
	// DESCRIBE_TOKENS 14.
	clusterAllOps = 1<<5 | 1<<7 | 1<<8 | 1<<9 | 1<<10 | 1<<11 | 1<<12 | 1<<13 | 1<<14
)

func handleMetadata(_ context.Context, s *Server, r *Request) (Reply, error) {
	req := r.Msg.(*kmsg.MetadataRequest)
	resp := req.ResponseKind().(*kmsg.MetadataResponse)
	host, port := s.advertised(r.Listener)
	b := kmsg.NewMetadataResponseBroker()
	b.NodeID, b.Host, b.Port = s.cfg.NodeID, host, port
	resp.Brokers = []kmsg.MetadataResponseBroker{b}
	cid := s.clusterID
	resp.ClusterID = &cid
	resp.ControllerID = s.cfg.NodeID
	if snap := s.clusterSnapshot(); snap != nil {
		resp.Brokers, resp.ControllerID = metadataBrokers(snap, r.Listener), s.clusterControllerID(snap)
	}
	if req.IncludeClusterAuthorizedOperations {
		resp.AuthorizedOperations = s.authorizedOps(r, authz.ResourceCluster, authz.ClusterName, clusterAllOps)
	}

	all := req.Topics == nil || req.Version == 0 && len(req.Topics) == 0
	if all {
		for _, t := range s.cluster.topics() {
			// Topics the principal may not describe are left out.
			if s.authorized(r, authz.OpDescribe, authz.ResourceTopic, t.Name) {
				resp.Topics = append(resp.Topics, s.metadataTopic(r, t, req.IncludeTopicAuthorizedOperations))
			}
		}
		return resp, nil
	}
	autoCreate := s.cfg.AutoCreateTopics && (req.Version < 4 || req.AllowAutoTopicCreation)
	for _, rt := range req.Topics {
		var t *Topic
		switch {
		case rt.Topic != nil:
			name := *rt.Topic
			if !s.authorized(r, authz.OpDescribe, authz.ResourceTopic, name) {
				resp.Topics = append(resp.Topics, metadataTopicError(name, rt.TopicID, kerr.TopicAuthorizationFailed.Code))
				continue
			}
			if err := validateTopicName(name); err != nil {
				resp.Topics = append(resp.Topics, metadataTopicError(name, rt.TopicID, kerr.InvalidTopicException.Code))
				continue
			}
			t = s.cluster.topic(name)
			if t == nil && autoCreate && !s.authorizedCluster(r, authz.OpCreate) && !s.authorized(r, authz.OpCreate, authz.ResourceTopic, name) {
				resp.Topics = append(resp.Topics, metadataTopicError(name, rt.TopicID, kerr.TopicAuthorizationFailed.Code))
				continue
			}
			if t == nil && autoCreate {
				cfg, _ := s.topicConfig(nil)
				created, err := s.cluster.createTopic(name, s.cfg.DefaultPartitions, cfg, false)
				if err != nil {
					// A concurrent create wins the race; anything else is reported.
					if t = s.cluster.topic(name); t == nil {
						code, _ := errorToKafka(err)
						resp.Topics = append(resp.Topics, metadataTopicError(name, rt.TopicID, code))
						continue
					}
				} else {
					s.log.Info("auto-created topic", "topic", name, "partitions", s.cfg.DefaultPartitions)
					t = created
				}
			}
			if t == nil {
				resp.Topics = append(resp.Topics, metadataTopicError(name, rt.TopicID, kerr.UnknownTopicOrPartition.Code))
				continue
			}
		default:
			t = s.cluster.topicByID(rt.TopicID)
			if t == nil {
				mt := kmsg.NewMetadataResponseTopic()
				mt.TopicID = rt.TopicID
				mt.ErrorCode = kerr.UnknownTopicID.Code
				resp.Topics = append(resp.Topics, mt)
				continue
			}
			if !s.authorized(r, authz.OpDescribe, authz.ResourceTopic, t.Name) {
				// The name is not revealed.
				mt := kmsg.NewMetadataResponseTopic()
				mt.TopicID = rt.TopicID
				mt.ErrorCode = kerr.TopicAuthorizationFailed.Code
				resp.Topics = append(resp.Topics, mt)
				continue
			}
		}
		resp.Topics = append(resp.Topics, s.metadataTopic(r, t, req.IncludeTopicAuthorizedOperations))
	}
	return resp, nil
}

func metadataTopicError(name string, id [16]byte, code int16) kmsg.MetadataResponseTopic {
	mt := kmsg.NewMetadataResponseTopic()
	n := name
	mt.Topic = &n
	mt.TopicID = id
	mt.ErrorCode = code
	return mt
}

func (s *Server) metadataTopic(r *Request, t *Topic, withOps bool) kmsg.MetadataResponseTopic {
	mt := kmsg.NewMetadataResponseTopic()
	name := t.Name
	mt.Topic = &name
	mt.TopicID = t.ID
	mt.IsInternal = isInternalTopic(name)
	if withOps {
		mt.AuthorizedOperations = s.authorizedOps(r, authz.ResourceTopic, t.Name, topicAllOps)
	}
	if snap := s.clusterSnapshot(); snap != nil {
		for _, p := range t.Partitions() {
			v := clusterPartition(snap, t, p.Index, r.Listener, r.Version >= 6)
			mp := kmsg.NewMetadataResponseTopicPartition()
			mp.Partition, mp.ErrorCode, mp.Leader, mp.LeaderEpoch = p.Index, v.code, v.leader, v.epoch
			mp.Replicas, mp.ISR, mp.OfflineReplicas = v.replicas, v.isr, v.offlines
			mt.Partitions = append(mt.Partitions, mp)
		}
		return mt
	}
	node := s.cfg.NodeID
	for _, p := range t.Partitions() {
		mp := kmsg.NewMetadataResponseTopicPartition()
		mp.Partition = p.Index
		mp.Leader = node
		mp.LeaderEpoch = p.LeaderEpoch()
		mp.Replicas = []int32{node}
		mp.ISR = []int32{node}
		mp.OfflineReplicas = []int32{}
		mt.Partitions = append(mt.Partitions, mp)
	}
	return mt
}

package broker

// DeleteTopics (key 20), versions 0-6.
//
// Behaviour:
//   - Topics are named (v0-v5 TopicNames, v6 Topic) or given by id (v6);
//     a v6 entry with both a name and an id uses the name and checks the id.
//   - Unknown names get UNKNOWN_TOPIC_OR_PARTITION, unknown ids
//     UNKNOWN_TOPIC_ID, an entry with neither INVALID_REQUEST.
//   - The deletion is durable in the topic metadata before the response;
//     the partition directories are then removed (renamed to
//     "<topic>-<n>.<id>-delete" first, so a crash leaves a name the next
//     start recognises and removes).
//   - Each topic is answered on its own.
//
// Authorization (with the authorizer on, authorize.go): DELETE on the
// topic (by id, DESCRIBE too, else the name is withheld); mirror topics
// the mirror lifecycle permission too.
//
// Deviations from Apache Kafka: deletion is synchronous (Kafka deletes
// files after file.delete.delay.ms); delete.topic.enable does not exist;
// the internal topics (__consumer_offsets, __transaction_state) cannot be
// deleted (INVALID_REQUEST): the coordinators hold them open.

import (
	"context"
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/verbatim-kafka/verbatim/authz"
)

func init() { register(kmsg.DeleteTopics.Int16(), 0, 6, handleDeleteTopics) }

func handleDeleteTopics(_ context.Context, s *Server, r *Request) (Reply, error) {
	req := r.Msg.(*kmsg.DeleteTopicsRequest)
	resp := req.ResponseKind().(*kmsg.DeleteTopicsResponse)
	entries := req.Topics
	if req.Version < 6 {
		entries = make([]kmsg.DeleteTopicsRequestTopic, len(req.TopicNames))
		for i := range req.TopicNames {
			n := req.TopicNames[i]
			entries[i].Topic = &n
		}
	}
	for _, e := range entries {
		st := kmsg.NewDeleteTopicsResponseTopic()
		st.Topic, st.TopicID = e.Topic, e.TopicID
		err := s.deleteTopicEntry(r, e)
		if errors.Is(err, errHiddenTopic) {
			st.Topic = nil // looked up by id, and not the principal's to describe
		}
		st.ErrorCode, st.ErrorMessage = errorToKafka(err)
		if e.Topic != nil && st.Topic != nil {
			s.auditRecord(r, "delete topic", "TOPIC", *e.Topic, st.ErrorCode)
		} else {
			s.auditRecord(r, "delete topic", "TOPIC_ID", formatTopicID(e.TopicID), st.ErrorCode)
		}
		if req.Version < 5 {
			st.ErrorMessage = nil
		}
		resp.Topics = append(resp.Topics, st)
	}
	return resp, nil
}

func (s *Server) deleteTopicEntry(r *Request, e kmsg.DeleteTopicsRequestTopic) error {
	var t *Topic
	switch {
	case e.Topic != nil:
		if !s.authorized(r, authz.OpDelete, authz.ResourceTopic, *e.Topic) {
			return kafkaErr(kerr.TopicAuthorizationFailed, kerr.TopicAuthorizationFailed.Message)
		}
		if err := validateTopicName(*e.Topic); err != nil {
			return err
		}
		t = s.cluster.topic(*e.Topic)
		if t == nil {
			return fmt.Errorf("%w: This server does not host this topic-partition.", errUnknownTopic)
		}
		if e.TopicID != ([16]byte{}) && e.TopicID != t.ID {
			return kafkaErr(kerr.UnknownTopicID, "The topic id does not match the topic name.")
		}
	case e.TopicID != ([16]byte{}):
		t = s.cluster.topicByID(e.TopicID)
		if t == nil {
			return kafkaErr(kerr.UnknownTopicID, "This server does not host this topic ID.")
		}
		if !s.authorized(r, authz.OpDescribe, authz.ResourceTopic, t.Name) {
			return fmt.Errorf("%w: %w", errHiddenTopic, kafkaErr(kerr.TopicAuthorizationFailed, kerr.TopicAuthorizationFailed.Message))
		}
		if !s.authorized(r, authz.OpDelete, authz.ResourceTopic, t.Name) {
			return kafkaErr(kerr.TopicAuthorizationFailed, kerr.TopicAuthorizationFailed.Message)
		}
	default:
		return kafkaErr(kerr.InvalidRequest, "Neither topic name nor id were specified.")
	}
	if isInternalTopic(t.Name) {
		return kafkaErr(kerr.InvalidRequest, fmt.Sprintf("Internal topic %s cannot be deleted: the coordinators keep their state in it.", t.Name))
	}
	if t.Config().Mirror && !s.mirrorAdminPermitted(r) {
		return errMirrorAdminPermission(r, "deleting mirror topic "+t.Name)
	}
	if err := s.cluster.deleteTopic(t); err != nil {
		return err
	}
	s.metrics.DropTopic(t.Name)
	s.log.Info("deleted topic", "topic", t.Name)
	return nil
}

// errHiddenTopic marks a refusal whose answer must not name the topic.
var errHiddenTopic = errors.New("topic hidden from the principal")

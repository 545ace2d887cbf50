package broker

// Verbatim's CreateTopics extension: a mirror topic created with its
// source's topic id (KIP-516), docs/protocol.md "Mirror topic id".
//
// A CreateTopics v5+ topic entry may carry the tagged field
// wireext.MirrorTag (wireext.MirrorTopicID: Version int16, TopicID uuid,
// tagged fields). It is
// honoured only for a topic whose configs set mirror.mode=push:
//   - without mirror.mode=push: INVALID_REQUEST (a pinned id is a mirror's
//     property; an ordinary topic gets a fresh id, as in Kafka);
//   - a value that does not parse: INVALID_REQUEST;
//   - the zero id or Kafka's reserved metadata topic id (…0001):
//     INVALID_REQUEST;
//   - an id already used by another topic: TOPIC_ALREADY_EXISTS, naming
//     that topic.
// The id is then the topic's id everywhere (persisted in the topic
// metadata; Metadata, DescribeTopicPartitions, Fetch by id, DeleteTopics
// by id). Any mirror state left under that id by a deleted predecessor is
// forgotten first, so the new topic starts "mirroring" with no writer.
// ApiVersions lists the feature wireext.FeatureMirrorTopicID (0-0) so a
// pusher can tell a Verbatim that ignores the tag.

import (
	"encoding/base64"
	"errors"
	"fmt"
	"io/fs"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/verbatim-kafka/verbatim/wireext"
)

// mirrorTopicIDFeature is the ApiVersions feature advertising the
// CreateTopics topic-id field.
func mirrorTopicIDFeature() kmsg.ApiVersionsResponseSupportedFeature {
	f := kmsg.NewApiVersionsResponseSupportedFeature()
	f.Name = wireext.FeatureMirrorTopicID
	f.MinVersion, f.MaxVersion = wireext.FeatureMirrorTopicIDMinVersion, wireext.FeatureMirrorTopicIDMaxVersion
	return f
}

// metadataTopicID is Kafka's reserved id of the KRaft metadata topic
// (Uuid.METADATA_TOPIC_ID); with the zero id, the ids no topic may take.
var metadataTopicID = [16]byte{15: 1}

// formatTopicID renders an id as Kafka prints it (URL-safe base64, no
// padding).
func formatTopicID(id [16]byte) string { return base64.RawURLEncoding.EncodeToString(id[:]) }

// requestedTopicID returns the topic id a CreateTopics topic entry asks
// for (present false when it carries no tag wireext.MirrorTag), checked
// against the topic's configs. A value that does not decode is
// INVALID_REQUEST with wireext's message.
func requestedTopicID(rt *kmsg.CreateTopicsRequestTopic, cfg *TopicConfig) (id [16]byte, present bool, err error) {
	var raw []byte
	rt.UnknownTags.Each(func(tag uint32, v []byte) {
		if tag == wireext.MirrorTag {
			raw, present = v, true
		}
	})
	if !present {
		return id, false, nil
	}
	var v wireext.MirrorTopicID
	if err = v.ReadFrom(raw); err != nil {
		return id, true, kafkaErr(kerr.InvalidRequest, err.Error())
	}
	id = v.TopicID
	switch {
	case !cfg.Mirror:
		return id, true, kafkaErr(kerr.InvalidRequest, fmt.Sprintf("topic %s: a topic id (CreateTopics tag %d) may only be given to a mirror topic, created with mirror.mode=push or pull", rt.Topic, wireext.MirrorTag))
	case id == [16]byte{}:
		return id, true, kafkaErr(kerr.InvalidRequest, fmt.Sprintf("topic %s: the zero topic id is reserved", rt.Topic))
	case id == metadataTopicID:
		return id, true, kafkaErr(kerr.InvalidRequest, fmt.Sprintf("topic %s: topic id %s is reserved for the metadata topic", rt.Topic, formatTopicID(id)))
	}
	return id, true, nil
}

// createMirrorTopicWithID creates a topic with a pinned id. It holds the
// mirror registry's lock from the check that no topic uses the id to the
// creation, so the state a deleted topic left under that id is forgotten
// before, and never after, the new topic can be written.
func (s *Server) createMirrorTopicWithID(name string, partitions int32, cfg *TopicConfig, validateOnly bool, id [16]byte) (*Topic, error) {
	r := &s.mirror
	r.mu.Lock()
	defer r.mu.Unlock()
	if !validateOnly {
		if err := s.forgetMirrorStateLocked(id); err != nil {
			return nil, err
		}
	}
	return s.cluster.createTopicWithID(name, partitions, cfg, validateOnly, id)
}

// createMirrorTopicsWithIDs is createMirrorTopicWithID for a batch
// (cluster.createTopics); a zero id is a fresh one, as in createTopic.
func (s *Server) createMirrorTopicsWithIDs(cs []topicCreate) ([]*Topic, []error) {
	r := &s.mirror
	r.mu.Lock()
	defer r.mu.Unlock()
	errs := make([]error, len(cs))
	var ok []topicCreate
	var idx []int
	for i, tc := range cs {
		if tc.id != ([16]byte{}) {
			if errs[i] = s.forgetMirrorStateLocked(tc.id); errs[i] != nil {
				continue
			}
		}
		ok, idx = append(ok, tc), append(idx, i)
	}
	ts := make([]*Topic, len(cs))
	cts, cerrs := s.cluster.createTopics(ok)
	for j, i := range idx {
		ts[i], errs[i] = cts[j], cerrs[j]
	}
	return ts, errs
}

// forgetMirrorStateLocked drops the mirror state a deleted topic left
// under id, unless a topic has that id. REQUIRES: s.mirror.mu.
func (s *Server) forgetMirrorStateLocked(id [16]byte) error {
	if s.cluster.topicByID(id) != nil {
		return nil
	}
	delete(s.mirror.topics, id)
	err := s.fs.Remove(mirrorStateDir + "/" + mirrorStateName(id))
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("%w: removing the mirror state a deleted topic left under id %s: %v", errStorage, formatTopicID(id), err)
	}
	return nil
}

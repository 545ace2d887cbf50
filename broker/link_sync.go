package broker

// The broker's side of the cluster link's continuous sync (link/sync.go,
// declared by link/host_sync.go): the encoder of the links' source
// credentials (password.encoder.*), a mirror topic's configs set through
// the broker's own config path, and consumer group offsets committed
// through the group coordinator in process.

import (
	"errors"
	"fmt"
	"sort"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/verbatim-kafka/verbatim/groupcoord"
	"github.com/verbatim-kafka/verbatim/secret"
)

// openLinkSecrets builds the encoder of password.encoder.* (nil without a
// secret). An old secret without a current one is refused: nothing could
// be re-encoded.
func openLinkSecrets(c secret.Config) (*secret.Encoder, error) {
	if c.Secret == "" {
		if c.OldSecret != "" {
			return nil, fmt.Errorf("broker: password.encoder.old.secret is set without password.encoder.secret")
		}
		return nil, nil
	}
	e, err := secret.New(c)
	if err != nil {
		return nil, fmt.Errorf("broker: %w", err)
	}
	return e, nil
}

// LinkSecretEncoder encodes and decodes the links' source credentials
// at rest; nil when the broker has no password.encoder.secret (links
// whose source config holds a secret are then refused).
func (s *Server) LinkSecretEncoder() *secret.Encoder { return s.linkSecrets }

// IsTopicConfig reports whether name is a topic config this broker knows
// (what a config sync can set).
func (s *Server) IsTopicConfig(name string) bool { return topicConfigByName[name] != nil }

// SetLinkTopicConfigs makes next the complete set of configs of link's
// pull-mode topic, through the path of AlterConfigs: the same validation,
// topic policies, persistence and live reconfiguration of the logs. Its
// mirror.* configs must be the topic's own (a topic stopped or taken
// over meanwhile is refused, nothing changed).
func (s *Server) SetLinkTopicConfigs(link, topic string, next map[string]string) error {
	t := s.cluster.topic(topic)
	if t == nil {
		return fmt.Errorf("%w: Topic %s does not exist.", errUnknownTopic, topic)
	}
	if c := t.Config(); !c.MirrorPull || c.MirrorLink != link {
		return kafkaErr(kerr.InvalidRequest, fmt.Sprintf("topic %s is not a mirror topic of link %s", topic, link))
	}
	cp := make(map[string]string, len(next))
	for k, v := range next {
		cp[k] = v
	}
	return linkErr(s.alterTopicConfig(t, cp, false, false))
}

// LinkGroupOffset is one committed offset of a consumer group as the link
// copies it.
type LinkGroupOffset struct {
	Topic       string
	Partition   int32
	Offset      int64
	LeaderEpoch int32
	Metadata    string
}

// ErrLinkGroupActive refuses a link's commit to a group that has members
// on this broker: the group's own consumers own its offsets here.
var ErrLinkGroupActive = errors.New("the group has active members on the destination")

// LinkGroupMembers returns the number of members a group has here (0 for
// an unknown group) and its state.
func (s *Server) LinkGroupMembers(group string) (members int, state string, err error) {
	if s.groups == nil {
		return 0, "", kerr.CoordinatorNotAvailable
	}
	dg := kmsg.NewDescribeGroupsResponseGroup()
	s.groups.Describe(group, &dg)
	if err := kerr.ErrorForCode(dg.ErrorCode); err != nil {
		return 0, "", err
	}
	return len(dg.Members), dg.State, nil
}

// LinkGroupOffsets returns a group's committed offsets here, sorted by
// topic and partition.
func (s *Server) LinkGroupOffsets(group string) ([]LinkGroupOffset, error) {
	if s.groups == nil {
		return nil, kerr.CoordinatorNotAvailable
	}
	code, got := s.groups.FetchOffsets(group, nil, false)
	if err := kerr.ErrorForCode(code); err != nil {
		return nil, err
	}
	out := make([]LinkGroupOffset, 0, len(got))
	for _, f := range got {
		if f.Code != 0 || f.Offset < 0 {
			continue
		}
		out = append(out, LinkGroupOffset{Topic: f.TP.Topic, Partition: f.TP.Partition, Offset: f.Offset, LeaderEpoch: f.Epoch, Metadata: f.Metadata})
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Topic != out[j].Topic {
			return out[i].Topic < out[j].Topic
		}
		return out[i].Partition < out[j].Partition
	})
	return out, nil
}

// CommitLinkGroupOffsets writes offs as one standalone commit (generation
// -1, no member) through the group coordinator, keeping their leader
// epochs and metadata, as an OffsetCommit v6+ from the pusher would. The
// coordinator takes a standalone commit only while the group has no
// members, atomically with that check: a group with members is refused as
// a whole (ErrLinkGroupActive), nothing written. Other refusals are per
// partition (UNKNOWN_TOPIC_OR_PARTITION, a storage error), in offs' order.
func (s *Server) CommitLinkGroupOffsets(group string, offs []LinkGroupOffset) ([]error, error) {
	if s.groups == nil {
		return nil, kerr.CoordinatorNotAvailable
	}
	commits := make([]groupcoord.OffsetCommit, len(offs))
	for i, o := range offs {
		md := o.Metadata
		commits[i] = newOffsetCommit(s.cluster.topic(o.Topic), o.Topic, o.Partition, o.Offset, o.LeaderEpoch, &md)
	}
	s.groups.CommitOffsets(group, "", nil, -1, commits)
	s.logCommitFailure("link group offset sync", group, commits, clientInfo{})
	errs := make([]error, len(commits))
	active := len(commits) > 0
	for i, c := range commits {
		errs[i] = kerr.ErrorForCode(c.Code)
		if c.Code != kerr.UnknownMemberID.Code && c.Code != kerr.IllegalGeneration.Code && c.Code != kerr.RebalanceInProgress.Code {
			active = false
		}
	}
	if active {
		return nil, fmt.Errorf("group %s: %w", group, ErrLinkGroupActive)
	}
	return errs, nil
}

// LinkGroupRange is the range a synced commit is clamped into: the
// partition's log start and high watermark, what ListOffsets EARLIEST and
// LATEST answer (and what verify clamps with).
func (s *Server) LinkGroupRange(topic string, partition int32) (logStart, hw int64, err error) {
	t := s.cluster.topic(topic)
	if t == nil {
		return -1, -1, kerr.UnknownTopicOrPartition
	}
	p := t.Partition(partition)
	if p == nil {
		return -1, -1, kerr.UnknownTopicOrPartition
	}
	h, err := partitionHandle(p)
	if err != nil {
		return -1, -1, err
	}
	return h.log.LogStartOffset(), highWatermark(h), nil
}

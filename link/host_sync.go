package link

import (
	"github.com/verbatim-kafka/verbatim/broker"
	"github.com/verbatim-kafka/verbatim/secret"
)

// syncHost is the part of Host for continuous sync: topic configs, source
// topic deletion and re-creation, consumer group offsets; and the
// encoder of the links' source credentials.
// Its owner fills it in (methods the broker exports in broker/link_sync.go).
type syncHost interface {
	// LinkSecretEncoder encodes the links' source credentials at rest
	// (password.encoder.*); nil when the broker has no secret.
	LinkSecretEncoder() *secret.Encoder
	// IsTopicConfig reports a topic config name the broker knows.
	IsTopicConfig(name string) bool
	// SetLinkTopicConfigs makes next the complete configs of link's
	// pull-mode topic, through the broker's config path (validation,
	// policies, live reconfiguration); mirror.* must be unchanged.
	SetLinkTopicConfigs(link, topic string, next map[string]string) error
	// LinkGroupMembers is a destination group's member count and state.
	LinkGroupMembers(group string) (members int, state string, err error)
	// LinkGroupOffsets are a destination group's committed offsets.
	LinkGroupOffsets(group string) ([]broker.LinkGroupOffset, error)
	// CommitLinkGroupOffsets commits offs as a standalone commit; a
	// group with members is refused whole (broker.ErrLinkGroupActive);
	// per offset its refusal.
	CommitLinkGroupOffsets(group string, offs []broker.LinkGroupOffset) ([]error, error)
	// LinkGroupRange is a partition's log start and high watermark, the
	// range a synced commit is clamped into.
	LinkGroupRange(topic string, partition int32) (logStart, hw int64, err error)
}

package replica

import (
	"log/slog"

	"github.com/verbatim-kafka/verbatim/broker"
)

// Config configures the fetcher manager.
type Config struct {
	Host Host
	// Fetchers is num.replica.fetchers: connections per leader broker
	// (default 1).
	Fetchers int
	// MaxBytes is replica.fetch.response.max.bytes (Kafka's 10 MiB);
	// PartitionMaxBytes replica.fetch.max.bytes (1 MiB); MaxWait
	// replica.fetch.wait.max.ms (500 ms); MinBytes replica.fetch.min.bytes
	// (1).
	MaxBytes, PartitionMaxBytes, MinBytes int32
	MaxWaitMs                             int32
	Log                                   *slog.Logger
}

// Manager runs the fetchers; it implements broker.Followers.
type Manager struct{ cfg Config }

var _ broker.Followers = (*Manager)(nil)

// NewManager returns a manager following nothing yet.
func NewManager(c Config) *Manager { return &Manager{cfg: c} }

// Follow implements broker.Followers.
func (m *Manager) Follow(parts []broker.FollowedPartition) {}

// Unfollow implements broker.Followers.
func (m *Manager) Unfollow(parts []broker.TopicPartition) {}

// Close stops every fetcher.
func (m *Manager) Close() {}

package client

import (
	"context"
	"encoding/base64"
	"errors"
	"net"

	"github.com/twmb/franz-go/pkg/kerr"
)

// Permanent is implemented by errors that must never be retried whatever
// they wrap (a caller's refusal or usage error): Transient reports false
// for them.
type Permanent interface {
	error
	Permanent() bool
}

// Transient reports whether an error is worth retrying after refreshing
// metadata or reconnecting: network failures, I/O and framing errors on a
// connection, retriable Kafka errors and UNKNOWN_TOPIC_OR_PARTITION (a
// leader that does not know the partition yet). A cancelled context and
// errors marked Permanent are not.
func Transient(err error) bool {
	if err == nil {
		return false
	}
	if errors.Is(err, context.Canceled) {
		return false
	}
	var p Permanent
	if errors.As(err, &p) && p.Permanent() {
		return false
	}
	var ke *kerr.Error
	if errors.As(err, &ke) {
		return ke.Retriable || ke == kerr.UnknownTopicOrPartition
	}
	var ne net.Error
	if errors.As(err, &ne) {
		return true
	}
	return true // I/O and framing errors on a connection
}

// Retriable reports whether err is a Kafka error code marked retriable.
func Retriable(err error) bool {
	var ke *kerr.Error
	return errors.As(err, &ke) && ke.Retriable
}

// IsLeaderEpochErr reports the errors that mean the caller's view of the
// partition's leader or leader epoch is stale: refresh metadata and retry.
func IsLeaderEpochErr(err error) bool {
	return errors.Is(err, kerr.FencedLeaderEpoch) || errors.Is(err, kerr.UnknownLeaderEpoch) || errors.Is(err, kerr.NotLeaderForPartition)
}

// FormatTopicID renders a topic id as Kafka prints it.
func FormatTopicID(id [16]byte) string { return base64.RawURLEncoding.EncodeToString(id[:]) }

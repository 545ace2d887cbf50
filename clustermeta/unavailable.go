package clustermeta

import (
	"context"
	"errors"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Unavailable reports whether err is the store not answering in time or
// being without a quorum for a moment (a deadline, etcd's own request
// timeout, a leader change, no leader, a lost connection): the write may
// or may not have happened and the caller may retry, as a Kafka client
// retries REQUEST_TIMED_OUT. A refusal (a conflict, a fence, a missing
// record) is not.
func Unavailable(err error) bool {
	if err == nil {
		return false
	}
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
		return true
	}
	for _, e := range []error{rpctypes.ErrTimeout, rpctypes.ErrTimeoutDueToLeaderFail, rpctypes.ErrTimeoutDueToConnectionLost,
		rpctypes.ErrLeaderChanged, rpctypes.ErrNoLeader, rpctypes.ErrNotCapable, rpctypes.ErrTimeoutWaitAppliedIndex} {
		if errors.Is(err, e) || rpctypes.ErrorDesc(err) == rpctypes.ErrorDesc(e) {
			return true
		}
	}
	if s, ok := status.FromError(err); ok {
		switch s.Code() {
		case codes.Unavailable, codes.DeadlineExceeded, codes.Canceled:
			return true
		}
	}
	return false
}

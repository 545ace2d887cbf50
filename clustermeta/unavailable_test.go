package clustermeta

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

func TestUnavailable(t *testing.T) {
	for _, err := range []error{
		context.DeadlineExceeded,
		fmt.Errorf("put: %w", context.Canceled),
		rpctypes.ErrTimeout,
		fmt.Errorf("txn: %w", rpctypes.ErrLeaderChanged),
		rpctypes.ErrGRPCNoLeader,
		rpctypes.ErrGRPCTimeoutDueToLeaderFail,
		status.Error(codes.Unavailable, "connection refused"),
	} {
		if !Unavailable(err) {
			t.Errorf("%v: not reported unavailable", err)
		}
	}
	for _, err := range []error{nil, ErrConflict, ErrFenced, ErrNotFound, errors.New("bad value"),
		status.Error(codes.InvalidArgument, "too many operations in txn request")} {
		if Unavailable(err) {
			t.Errorf("%v: reported unavailable", err)
		}
	}
}

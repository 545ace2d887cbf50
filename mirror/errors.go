package mirror

import (
	"context"
	"errors"
	"fmt"
	"net"

	"github.com/twmb/franz-go/pkg/kerr"
)

// Exit codes of the mirror and verify commands (BRIEF: user-facing
// contract).
const (
	ExitOK      = 0
	ExitRefused = 1 // divergence, refusal or (verify) mismatch
	ExitUsage   = 2 // usage or connection problems
)

// Error carries the exit code a command should end with.
type Error struct {
	Code int
	Err  error
}

func (e *Error) Error() string { return e.Err.Error() }
func (e *Error) Unwrap() error { return e.Err }

// Refusal is an error that ends the command with exit code 1: the source
// diverged, the destination refused the data, or (verify) a mismatch.
func Refusal(format string, args ...any) error {
	return &Error{Code: ExitRefused, Err: fmt.Errorf(format, args...)}
}

// Usage is an error that ends the command with exit code 2.
func Usage(format string, args ...any) error {
	return &Error{Code: ExitUsage, Err: fmt.Errorf(format, args...)}
}

// ErrDivergence is wrapped by errors reporting that the source's log no
// longer extends what the destination holds (an unclean leader election
// or another truncation on the source).
var ErrDivergence = errors.New("source diverged from the destination")

// ExitCode maps an error returned by this package to a process exit code:
// 0 for nil, the code of an *Error, 2 for anything else (connections).
func ExitCode(err error) int {
	if err == nil {
		return ExitOK
	}
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return ExitUsage
}

// transient reports whether an error is worth retrying after refreshing
// metadata or reconnecting: network failures and retriable Kafka errors.
func transient(err error) bool {
	if err == nil {
		return false
	}
	if errors.Is(err, context.Canceled) {
		return false
	}
	var e *Error
	if errors.As(err, &e) {
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

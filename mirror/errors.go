package mirror

import (
	"errors"
	"fmt"

	"github.com/verbatim-kafka/verbatim/client"
)

// Exit codes of the mirror and verify commands (the user-facing contract
// of docs/mirroring.md).
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

// Permanent marks an *Error as never worth retrying (client.Permanent).
func (e *Error) Permanent() bool { return true }

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
// metadata or reconnecting (client.Transient; an *Error never is).
func transient(err error) bool { return client.Transient(err) }

// isEpochErr reports a stale view of the destination's leader or epoch.
func isEpochErr(err error) bool { return client.IsLeaderEpochErr(err) }

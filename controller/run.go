package controller

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/verbatim-kafka/verbatim/clustermeta"
)

// Config configures a controller candidate.
type Config struct {
	Store  clustermeta.Store
	NodeID int32
	// SessionTTL is the election lease's TTL in seconds.
	SessionTTL int64
	// UncleanLeaderElection is the broker default of
	// unclean.leader.election.enable (topics override it).
	UncleanLeaderElection bool
	Log                   *slog.Logger
	// Now is the clock (nil: time.Now).
	Now func() time.Time
}

// Run campaigns for the controllership and, while elected, carries out
// the controller's decisions, until ctx ends; it campaigns again after
// losing a term.
func Run(ctx context.Context, c Config) error {
	return errors.New("controller: not built yet")
}

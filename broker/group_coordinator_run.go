package broker

import (
	"context"
	"time"
)

// newCoordClock is the clock given to the coordinators when a Server
// opens; tests replace it to drive timeouts without sleeping.
var newCoordClock = func() coordClock { return wallClock{} }

// initialRebalanceDelay is group.initial.rebalance.delay.ms for new
// servers; tests shorten it.
var initialRebalanceDelay = groupInitialRebalanceWait

// startCoordinators recovers the group and transaction coordinators from
// the internal topics and starts their timer loop.
func (s *Server) startCoordinators() error {
	clock := newCoordClock()
	s.groups = newGroupCoordinator(s, clock)
	s.groups.initialRebalanceDelay = initialRebalanceDelay
	if d := s.cfg.GroupInitialRebalanceDelay; d != nil {
		s.groups.initialRebalanceDelay = *d
	}
	s.txns = newTxnCoordinator(s, clock, s.groups)
	if err := s.groups.load(); err != nil {
		return err
	}
	if err := s.txns.load(); err != nil {
		return err
	}
	go s.coordinatorLoop(s.baseCtx, clock)
	return nil
}

func (s *Server) coordinatorLoop(ctx context.Context, clock coordClock) {
	t := time.NewTicker(coordTickInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		now := clock.Now()
		s.groups.tick(now)
		s.txns.tick(now)
	}
}

// stopCoordinators answers waiting group members and refuses new
// coordinator requests (shutdown).
func (s *Server) stopCoordinators() {
	if s.groups != nil {
		s.groups.shutdown()
	}
	if s.txns != nil {
		s.txns.shutdown()
	}
}

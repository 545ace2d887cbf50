package broker

import (
	"context"
	"sync"
)

// byteSem is a weighted semaphore bounding request bytes held in memory by
// all connections. Waiters are served in arrival order so a large frame is
// not starved by a stream of small ones.
type byteSem struct {
	mu      sync.Mutex
	limit   int64
	used    int64
	waiters []semWaiter
}

type semWaiter struct {
	n     int64
	ready chan struct{}
}

func newByteSem(limit int64) *byteSem { return &byteSem{limit: limit} }

func (s *byteSem) acquire(ctx context.Context, n int64) error {
	s.mu.Lock()
	if len(s.waiters) == 0 && s.used+n <= s.limit {
		s.used += n
		s.mu.Unlock()
		return nil
	}
	w := semWaiter{n: n, ready: make(chan struct{})}
	s.waiters = append(s.waiters, w)
	s.mu.Unlock()
	select {
	case <-w.ready:
		return nil
	case <-ctx.Done():
		s.mu.Lock()
		select {
		case <-w.ready:
			// Granted while we were giving up: hand it back.
			s.used -= n
			s.wakeLocked()
		default:
			for i := range s.waiters {
				if s.waiters[i].ready == w.ready {
					s.waiters = append(s.waiters[:i], s.waiters[i+1:]...)
					break
				}
			}
			s.wakeLocked()
		}
		s.mu.Unlock()
		return ctx.Err()
	}
}

func (s *byteSem) release(n int64) {
	if n == 0 {
		return
	}
	s.mu.Lock()
	s.used -= n
	if s.used < 0 {
		s.mu.Unlock()
		panic("broker: byteSem released more than acquired")
	}
	s.wakeLocked()
	s.mu.Unlock()
}

// wakeLocked grants waiters in order while they fit.
// REQUIRES: s.mu is held.
func (s *byteSem) wakeLocked() {
	for len(s.waiters) > 0 {
		w := s.waiters[0]
		if s.used+w.n > s.limit {
			return
		}
		s.used += w.n
		close(w.ready)
		s.waiters = s.waiters[1:]
	}
}

// inUse reports the bytes currently held (for tests and metrics).
func (s *byteSem) inUse() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.used
}

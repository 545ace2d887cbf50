package clustermeta

import "context"

// The implementation behind Session and Leadership (etcd.go).
type sessionImpl interface {
	done() <-chan struct{}
	fence() Fence
	update(ctx context.Context, b BrokerInfo) error
	close(ctx context.Context) error
}

type leadershipImpl interface {
	done() <-chan struct{}
	fence() Fence
	resign(ctx context.Context) error
}

// Done closes when the registration's lease is lost (expired, revoked):
// the broker is fenced and must stop leading and following.
func (s *Session) Done() <-chan struct{} { return s.impl.done() }

// Fence fences writes on this registration (a leader's ISR change).
func (s *Session) Fence() Fence { return s.impl.fence() }

// Update replaces the registration's value (ShuttingDown, endpoints)
// under the same lease; Info follows.
func (s *Session) Update(ctx context.Context, b BrokerInfo) error {
	if err := s.impl.update(ctx, b); err != nil {
		return err
	}
	b.Epoch = s.Info.Epoch
	s.Info = b
	return nil
}

// Close revokes the lease: the registration disappears at once.
func (s *Session) Close(ctx context.Context) error { return s.impl.close(ctx) }

// Done closes when the leadership ends.
func (l *Leadership) Done() <-chan struct{} { return l.impl.done() }

// Fence fences the controller's writes on its leadership.
func (l *Leadership) Fence() Fence { return l.impl.fence() }

// Resign gives the leadership up.
func (l *Leadership) Resign(ctx context.Context) error { return l.impl.resign(ctx) }

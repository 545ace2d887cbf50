package clustermeta

import "context"

// SessionImpl is what a Store implementation puts behind a Session
// (etcd.go, memstore).
type SessionImpl interface {
	Done() <-chan struct{}
	Fence() Fence
	// Update replaces the registration's value under the same lease.
	Update(ctx context.Context, b BrokerInfo) error
	Close(ctx context.Context) error
}

// LeadershipImpl is what a Store implementation puts behind a Leadership.
type LeadershipImpl interface {
	Done() <-chan struct{}
	Fence() Fence
	Resign(ctx context.Context) error
}

// NewSession is a Store implementation's registration: info as stored,
// its Epoch set.
func NewSession(info BrokerInfo, impl SessionImpl) *Session {
	return &Session{Info: info, impl: impl}
}

// NewLeadership is a Store implementation's election win.
func NewLeadership(nodeID int32, impl LeadershipImpl) *Leadership {
	return &Leadership{NodeID: nodeID, impl: impl}
}

// Done closes when the registration's lease is lost (expired, revoked):
// the broker is fenced and must stop leading and following.
func (s *Session) Done() <-chan struct{} { return s.impl.Done() }

// Fence fences writes on this registration (a leader's ISR change).
func (s *Session) Fence() Fence { return s.impl.Fence() }

// Update replaces the registration's value (ShuttingDown, endpoints)
// under the same lease; Info follows. ErrFenced when the registration is
// gone.
func (s *Session) Update(ctx context.Context, b BrokerInfo) error {
	b.NodeID = s.Info.NodeID
	if err := s.impl.Update(ctx, b); err != nil {
		return err
	}
	b.Epoch = s.Info.Epoch
	s.Info = b
	return nil
}

// Close revokes the lease: the registration disappears at once.
func (s *Session) Close(ctx context.Context) error { return s.impl.Close(ctx) }

// Done closes when the leadership ends.
func (l *Leadership) Done() <-chan struct{} { return l.impl.Done() }

// Fence fences the controller's writes on its leadership.
func (l *Leadership) Fence() Fence { return l.impl.Fence() }

// Resign gives the leadership up.
func (l *Leadership) Resign(ctx context.Context) error { return l.impl.Resign(ctx) }

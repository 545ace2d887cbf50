package clustermeta

// Broker registrations and the controller election over etcd: a
// registration is a key created under a lease kept alive (its creation
// revision is the broker's epoch), the election is etcd's concurrency
// package over a lease of its own; each ends when its lease does.

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
)

func (s *etcdStore) Register(ctx context.Context, b BrokerInfo, ttlSeconds int64) (*Session, error) {
	if b.NodeID < 0 || ttlSeconds <= 0 {
		return nil, fmt.Errorf("clustermeta: registering node id %d with a TTL of %d s", b.NodeID, ttlSeconds)
	}
	lease, err := s.cli.Grant(ctx, ttlSeconds)
	if err != nil {
		return nil, fmt.Errorf("clustermeta: lease for node %d: %w", b.NodeID, err)
	}
	key := s.keys.Broker(b.NodeID)
	resp, err := s.cli.Txn(ctx).If(clientv3.Compare(clientv3.CreateRevision(key), "=", 0)).
		Then(clientv3.OpPut(key, string(EncodeBroker(b)), clientv3.WithLease(lease.ID))).Commit()
	if err != nil || !resp.Succeeded {
		rctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		_, _ = s.cli.Revoke(rctx, lease.ID)
		cancel()
		if err != nil {
			return nil, fmt.Errorf("clustermeta: registering node %d: %w", b.NodeID, err)
		}
		return nil, fmt.Errorf("%w: node id %d is registered by a live broker", ErrConflict, b.NodeID)
	}
	b.Epoch = resp.Header.Revision
	kctx, cancel := context.WithCancel(s.ctx)
	ka, err := s.cli.KeepAlive(kctx, lease.ID)
	if err != nil {
		cancel()
		return nil, fmt.Errorf("clustermeta: keeping node %d's lease: %w", b.NodeID, err)
	}
	es := &etcdSession{s: s, key: key, lease: lease.ID, epoch: b.Epoch, cancel: cancel, done: make(chan struct{})}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		for range ka {
		}
		// Expired, revoked, unreachable past the TTL, or closed.
		es.end()
	}()
	return NewSession(b, es), nil
}

type etcdSession struct {
	s      *etcdStore
	key    string
	lease  clientv3.LeaseID
	epoch  int64
	cancel context.CancelFunc
	once   sync.Once
	done   chan struct{}
}

func (e *etcdSession) end() {
	e.once.Do(func() { e.cancel(); close(e.done) })
}

func (e *etcdSession) Done() <-chan struct{} { return e.done }

func (e *etcdSession) Fence() Fence { return Fence{Key: e.key, CreateRev: e.epoch} }

func (e *etcdSession) Update(ctx context.Context, b BrokerInfo) error {
	f := e.Fence()
	resp, err := e.s.cli.Txn(ctx).If(fenceCmp(f)...).
		Then(clientv3.OpPut(e.key, string(EncodeBroker(b)), clientv3.WithLease(e.lease))).Commit()
	if err != nil {
		return fmt.Errorf("clustermeta: updating node %d: %w", b.NodeID, err)
	}
	if !resp.Succeeded {
		return ErrFenced
	}
	return nil
}

func (e *etcdSession) Close(ctx context.Context) error {
	defer e.end()
	_, err := e.s.cli.Revoke(ctx, e.lease)
	if err != nil && !strings.Contains(err.Error(), "requested lease not found") {
		return fmt.Errorf("clustermeta: revoking the registration: %w", err)
	}
	return nil
}

func (s *etcdStore) Campaign(ctx context.Context, nodeID int32, ttlSeconds int64) (*Leadership, error) {
	if nodeID < 0 || ttlSeconds <= 0 {
		return nil, fmt.Errorf("clustermeta: campaign of node id %d with a TTL of %d s", nodeID, ttlSeconds)
	}
	// The lease is granted under ctx (the session's own grant would wait
	// on the store's context alone); the session keeps it alive until the
	// store closes.
	lease, err := s.cli.Grant(ctx, ttlSeconds)
	if err != nil {
		return nil, fmt.Errorf("clustermeta: controller candidacy's lease: %w", err)
	}
	sess, err := concurrency.NewSession(s.cli, concurrency.WithLease(lease.ID), concurrency.WithContext(s.ctx))
	if err != nil {
		return nil, fmt.Errorf("clustermeta: controller session: %w", err)
	}
	e := concurrency.NewElection(sess, strings.TrimSuffix(s.keys.Controller(), "/"))
	if err := e.Campaign(ctx, strconv.FormatInt(int64(nodeID), 10)); err != nil {
		_ = sess.Close()
		return nil, err
	}
	l := &etcdLeadership{sess: sess, e: e, fence: Fence{Key: e.Key(), CreateRev: e.Rev()}, done: make(chan struct{}), resigned: make(chan struct{})}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		select {
		case <-sess.Done():
		case <-l.resigned:
		}
		close(l.done)
	}()
	return NewLeadership(nodeID, l), nil
}

type etcdLeadership struct {
	sess     *concurrency.Session
	e        *concurrency.Election
	fence    Fence
	once     sync.Once
	resigned chan struct{}
	done     chan struct{}
}

func (l *etcdLeadership) Done() <-chan struct{} { return l.done }
func (l *etcdLeadership) Fence() Fence          { return l.fence }

func (l *etcdLeadership) Resign(ctx context.Context) error {
	err := l.e.Resign(ctx)
	if cerr := l.sess.Close(); err == nil {
		err = cerr
	}
	l.once.Do(func() { close(l.resigned) })
	<-l.done
	if err != nil && !strings.Contains(err.Error(), "requested lease not found") {
		return fmt.Errorf("clustermeta: resigning: %w", err)
	}
	return nil
}

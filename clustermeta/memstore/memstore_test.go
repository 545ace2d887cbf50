package memstore

import (
	"context"
	"errors"
	"testing"

	"github.com/verbatim-kafka/verbatim/clustermeta"
)

// The behaviours of the Store contract are in clustermeta's conformance
// suite; these are memstore's own: Close and Expire.

func TestCloseEndsSessionsLeadershipsAndWatches(t *testing.T) {
	s := New()
	ctx := context.Background()
	sess, err := s.Register(ctx, clustermeta.BrokerInfo{NodeID: 1}, 1)
	if err != nil {
		t.Fatal(err)
	}
	lead, err := s.Campaign(ctx, 1, 1)
	if err != nil {
		t.Fatal(err)
	}
	w := s.Watch(ctx)
	<-w // the current state
	s.Close()
	<-sess.Done()
	<-lead.Done()
	if _, open := <-w; open {
		t.Fatal("watch open after Close")
	}
	if _, err := s.Snapshot(ctx); err == nil {
		t.Fatal("snapshot of a closed store")
	}
	if _, err := s.AllocateProducerIDs(ctx, 1); err == nil {
		t.Fatal("allocation on a closed store")
	}
	if _, open := <-s.Watch(ctx); open {
		t.Fatal("a new watch on a closed store delivers")
	}
}

func TestExpireEndsOnlyThatNode(t *testing.T) {
	s := New()
	defer s.Close()
	ctx := context.Background()
	one, _ := s.Register(ctx, clustermeta.BrokerInfo{NodeID: 1}, 1)
	two, _ := s.Register(ctx, clustermeta.BrokerInfo{NodeID: 2}, 1)
	s.Expire(3) // nobody: nothing happens
	s.Expire(1)
	<-one.Done()
	select {
	case <-two.Done():
		t.Fatal("node 2's session ended")
	default:
	}
	snap, _ := s.Snapshot(ctx)
	if _, ok := snap.Brokers[1]; ok || len(snap.Brokers) != 1 {
		t.Fatalf("brokers %v", snap.Brokers)
	}
	if err := one.Update(ctx, clustermeta.BrokerInfo{}); !errors.Is(err, clustermeta.ErrFenced) {
		t.Fatalf("update of an expired session: %v", err)
	}
}

package coordlog

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
)

func TestOwnedLifecycle(t *testing.T) {
	all := NewOwned(false)
	if all.Refusal(3) != nil || !all.Serves(3) {
		t.Fatal("a single node's table refuses a partition")
	}
	if _, ok := all.Begin(3, 1); ok {
		t.Fatal("a single node's table begins a load")
	}

	o := NewOwned(true)
	if o.Refusal(3) != kerr.NotCoordinator || o.Epoch(3) != -1 {
		t.Fatal("an unbegun partition is not NOT_COORDINATOR")
	}
	g1, ok := o.Begin(3, 1)
	if !ok || o.Refusal(3) != kerr.CoordinatorLoadInProgress || !o.Loading(3) || !o.AnyLoading() {
		t.Fatal("a begun partition is not loading")
	}
	if _, ok := o.Begin(3, 2); ok {
		t.Fatal("a re-election without a resignation begins a second load")
	}
	if !o.Finish(3, g1) || !o.Serves(3) || o.AnyLoading() || o.Epoch(3) != 2 {
		t.Fatal("the load did not finish at the newer epoch")
	}
	o.Drop(3)
	g2, _ := o.Begin(3, 4) // resigned, then elected again
	if o.Finish(3, g1) {
		t.Fatal("a stale load finished")
	}
	if !o.Finish(3, g2) {
		t.Fatal("the current load did not finish")
	}
	g3, _ := o.Begin(4, 1)
	o.Drop(4)
	if o.Finish(4, g3) || o.Refusal(4) != kerr.NotCoordinator {
		t.Fatal("a load finished after its partition was dropped")
	}
}

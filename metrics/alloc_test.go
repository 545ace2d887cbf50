//go:build !race

package metrics

import (
	"testing"
	"time"
)

// TestAllocHandles pins that counting through resolved handles allocates
// nothing (the broker's hot path does it per request and partition).
func TestAllocHandles(t *testing.T) {
	r := New()
	tm, a, l := r.Topic("t"), r.API("Produce"), r.Listener("PLAINTEXT", "PLAINTEXT")
	a.Error(0)
	// Warm the histogram's buckets for the values used below.
	a.Done(time.Millisecond)
	if n := testing.AllocsPerRun(1000, func() {
		tm.BytesIn.Add(100)
		tm.MessagesIn.Add(1)
		tm.BytesOut.Add(100)
		a.Error(0)
		a.Done(time.Millisecond)
		l.Opened()
		l.Closed()
	}); n != 0 {
		t.Fatalf("%v allocations per counted request, want 0", n)
	}
}

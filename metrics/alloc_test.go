//go:build !race

package metrics

import (
	"runtime"
	"testing"
	"time"
)

// TestAllocHandles pins that counting through resolved handles allocates
// nothing (the broker's hot path does it per request and partition).
func TestAllocHandles(t *testing.T) {
	r := New()
	tm, a, l := r.Topic("t"), r.API("Produce"), r.Listener("PLAINTEXT", "PLAINTEXT")
	a.Error(0)
	if n := testing.AllocsPerRun(1000, func() {
		tm.BytesIn.Add(100)
		tm.MessagesIn.Add(1)
		tm.BytesOut.Add(100)
		a.Error(0)
		l.Opened()
		l.Closed()
	}); n != 0 {
		t.Fatalf("%v allocations per counted request, want 0", n)
	}
}

// TestAllocRequestTime pins that recording a request's time allocates
// nothing: its native histograms are fixed arrays of counters (hist.go),
// and the request-time summary is computed at the scrape (window.go).
func TestAllocRequestTime(t *testing.T) {
	r := New()
	a := r.API("Produce")
	d := func(i int) time.Duration { return time.Duration(50+i%4000) * time.Microsecond }
	for i := range 10000 {
		a.Done(d(i), Phases{Local: d(i)}) // every bucket the loop below observes exists
	}
	var m0, m1 runtime.MemStats
	runtime.ReadMemStats(&m0)
	const n = 100000
	for i := range n {
		a.Done(d(i), Phases{Local: d(i)})
	}
	runtime.ReadMemStats(&m1)
	if per := float64(m1.Mallocs-m0.Mallocs) / n; per > 0 {
		t.Fatalf("%.4f allocations per recorded request time, want none", per)
	}
}

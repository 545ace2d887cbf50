package metrics

import (
	"math"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

type fakeClock struct{ t time.Time }

func (c *fakeClock) now() time.Time { return c.t }

func newTestSummary(clock *fakeClock) (*summaryOf, *hist) {
	vec := newHistVec("t_seconds", "help", []string{"request"})
	s := newSummaryOf("t_ms", "help", "request", vec, Quantiles, clock.now)
	return s, vec.with("Produce")
}

// collectOne scrapes s and returns the one series' summary.
func collectOne(t *testing.T, s *summaryOf) *dto.Summary {
	t.Helper()
	ch := make(chan prometheus.Metric, 4)
	s.Collect(ch)
	close(ch)
	var out []*dto.Summary
	for m := range ch {
		var d dto.Metric
		if err := m.Write(&d); err != nil {
			t.Fatal(err)
		}
		if got := d.GetLabel()[0].GetValue(); got != "Produce" {
			t.Fatalf("label %q", got)
		}
		out = append(out, d.GetSummary())
	}
	if len(out) != 1 {
		t.Fatalf("%d series, want 1", len(out))
	}
	return out[0]
}

func quantile(t *testing.T, s *dto.Summary, q float64) float64 {
	t.Helper()
	for _, qq := range s.GetQuantile() {
		if qq.GetQuantile() == q {
			return qq.GetValue()
		}
	}
	t.Fatalf("no quantile %v in %v", q, s)
	return 0
}

// The quantiles come from the buckets: within a bucket's width (factor
// 1.1) of the exact value; count and sum are exact, in milliseconds.
func TestSummaryOfQuantiles(t *testing.T) {
	clock := &fakeClock{t: time.Unix(1_800_000_000, 0)}
	s, h := newTestSummary(clock)
	var sum float64
	for i := 1; i <= 10000; i++ { // 0.1 ms .. 1000 ms
		d := time.Duration(i) * 100 * time.Microsecond
		h.Observe(d)
		sum += d.Seconds()
	}
	got := collectOne(t, s)
	if got.GetSampleCount() != 10000 || math.Abs(got.GetSampleSum()-sum*1e3) > 1e-6*sum*1e3 {
		t.Fatalf("count %d sum %v, want 10000 and %v", got.GetSampleCount(), got.GetSampleSum(), sum*1e3)
	}
	if len(got.GetQuantile()) != len(Quantiles) {
		t.Fatalf("%d quantiles, want %d", len(got.GetQuantile()), len(Quantiles))
	}
	for q := range Quantiles {
		want := q * 1000 // ms
		if v := quantile(t, got, q); math.Abs(v-want) > 0.1*want {
			t.Errorf("quantile %v = %.2f ms, want %.2f within 10%%", q, v, want)
		}
	}
	// A single value and a zero.
	clock2 := &fakeClock{t: clock.t}
	s2, h2 := newTestSummary(clock2)
	h2.Observe(250 * time.Millisecond)
	if v := quantile(t, collectOne(t, s2), 0.5); math.Abs(v-250) > 25 {
		t.Errorf("one observation of 250 ms: median %.2f", v)
	}
	s3, h3 := newTestSummary(&fakeClock{t: clock.t})
	h3.Observe(0)
	if v := quantile(t, collectOne(t, s3), 0.99); v > 1e-6 {
		t.Errorf("one observation of 0: p99 %v", v)
	}
}

// The quantiles cover the last 8-10 minutes of observations (snapshots
// taken at scrapes, one per 2 minutes); count and sum stay cumulative; a
// window without observations answers NaN.
func TestSummaryOfWindow(t *testing.T) {
	clock := &fakeClock{t: time.Unix(1_800_000_000, 0)}
	s, h := newTestSummary(clock)
	for range 1000 {
		h.Observe(time.Millisecond)
	}
	if v := quantile(t, collectOne(t, s), 0.5); math.Abs(v-1) > 0.1 {
		t.Fatalf("median %.3f ms, want 1", v)
	}
	// Scraped every 30 s for 9 minutes, with 100 ms observations from
	// minute 1 on: by minute 9 the 1 ms ones have left the window.
	for step := 1; step <= 18; step++ {
		clock.t = clock.t.Add(30 * time.Second)
		if step >= 2 {
			h.Observe(100 * time.Millisecond)
		}
		got := collectOne(t, s)
		if got.GetSampleCount() != uint64(1000+max(step-1, 0)) {
			t.Fatalf("step %d: count %d", step, got.GetSampleCount())
		}
		med := quantile(t, got, 0.5)
		if step < 16 && math.Abs(med-1) > 0.1 {
			t.Fatalf("step %d (%v in): median %.2f ms, want 1 (the first observations are in the window)", step, time.Duration(step)*30*time.Second, med)
		}
		if step == 18 && math.Abs(med-100) > 10 {
			t.Fatalf("after 9 minutes: median %.2f ms, want 100 (the 1 ms observations left the window)", med)
		}
	}
	// Nothing observed for 10 minutes: NaN quantiles, the count kept.
	for range 6 {
		clock.t = clock.t.Add(2 * time.Minute)
		collectOne(t, s)
	}
	got := collectOne(t, s)
	if got.GetSampleCount() != 1017 {
		t.Fatalf("count %d, want 1017", got.GetSampleCount())
	}
	for q := range Quantiles {
		if v := quantile(t, got, q); !math.IsNaN(v) {
			t.Errorf("idle window: quantile %v = %v, want NaN", q, v)
		}
	}
	if n := len(s.snaps["Produce"]); n > 6 {
		t.Errorf("%d snapshots kept, want at most 6 (10 minutes in steps of 2)", n)
	}
}

// A snapshot the histogram no longer extends (fewer observations: a
// reset; another schema) is not subtracted.
func TestBucketsSinceIncompatible(t *testing.T) {
	cur := buckets{schema: 3, count: 5, sum: 1, counts: map[int]int64{1: 5}}
	for _, old := range []buckets{
		{schema: 3, count: 9, counts: map[int]int64{1: 9}},
		{schema: 2, count: 1, counts: map[int]int64{1: 1}},
	} {
		if w := cur.since(&old); w.count != 5 || w.counts[1] != 5 {
			t.Errorf("since %+v = %+v, want the histogram itself", old, w)
		}
	}
	old := buckets{schema: 3, count: 2, sum: 0.5, counts: map[int]int64{1: 2}}
	if w := cur.since(&old); w.count != 3 || w.counts[1] != 3 || w.sum != 0.5 {
		t.Errorf("since a compatible snapshot: %+v", w)
	}
}

package metrics

import (
	"math"
	"math/rand"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// spanBuckets decodes a native histogram's positive buckets by key.
func spanBuckets(h *dto.Histogram) map[int32]uint64 {
	out := map[int32]uint64{}
	var idx int32
	var c int64
	k := 0
	for si, sp := range h.GetPositiveSpan() {
		if si == 0 {
			idx = sp.GetOffset()
		} else {
			idx += sp.GetOffset()
		}
		for j := uint32(0); j < sp.GetLength(); j++ {
			c += h.GetPositiveDelta()[k]
			k++
			if c > 0 {
				out[idx] = uint64(c)
			}
			idx++
		}
	}
	return out
}

// gatherOne registers c alone and returns its one metric.
func gatherOne(t *testing.T, c prometheus.Collector) *dto.Metric {
	t.Helper()
	reg := prometheus.NewRegistry()
	reg.MustRegister(c)
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	if len(mfs) != 1 || len(mfs[0].GetMetric()) != 1 {
		t.Fatalf("gathered %v, want one series", mfs)
	}
	return mfs[0].GetMetric()[0]
}

// The buckets are client_golang's for a bucket factor of 1.1 (schema 3),
// so dashboards see the same series as before; count and sum exact.
func TestHistMatchesClientGolang(t *testing.T) {
	ref := prometheus.NewHistogram(prometheus.HistogramOpts{Name: "ref_seconds", NativeHistogramBucketFactor: 1.1,
		NativeHistogramMaxBucketNumber: 1000, NativeHistogramZeroThreshold: histZero})
	vec := newHistVec("ours_seconds", "help", nil)
	h := vec.with("")
	rng := rand.New(rand.NewSource(1))
	var n uint64
	var sum time.Duration
	observe := func(d time.Duration) {
		ref.Observe(d.Seconds())
		h.Observe(d)
		n++
		sum += d
	}
	for range 20000 {
		observe(time.Duration(math.Exp(rng.Float64() * 25))) // 1 ns .. 72 s, log-uniform
	}
	for k := -40; k <= 40; k++ { // bucket bounds themselves, and either side
		v := math.Exp2(float64(k) / 8)
		for _, d := range []time.Duration{time.Duration(v * 1e9), time.Duration(v*1e9) + 1, time.Duration(v*1e9) - 1} {
			observe(d)
		}
	}
	observe(0)
	var rm dto.Metric
	if err := ref.Write(&rm); err != nil {
		t.Fatal(err)
	}
	m := gatherOne(t, vec)
	got, want := m.GetHistogram(), rm.GetHistogram()
	if got.GetSchema() != want.GetSchema() || got.GetSampleCount() != n || got.GetZeroCount() != want.GetZeroCount() {
		t.Fatalf("schema %d count %d zero %d, want %d, %d, %d", got.GetSchema(), got.GetSampleCount(), got.GetZeroCount(), want.GetSchema(), n, want.GetZeroCount())
	}
	if got.GetSampleSum() != sum.Seconds() {
		t.Errorf("sum %v, want %v", got.GetSampleSum(), sum.Seconds())
	}
	gb, wb := spanBuckets(got), spanBuckets(want)
	if len(gb) != len(wb) {
		t.Errorf("%d buckets, client_golang %d", len(gb), len(wb))
	}
	for k, c := range wb {
		if gb[k] != c {
			t.Errorf("bucket %d: %d, client_golang %d", k, gb[k], c)
		}
	}
}

// Durations outside the range land in its end buckets; negative ones in
// the zero bucket; a series per label value, made once.
func TestHistRange(t *testing.T) {
	vec := newHistVec("r_seconds", "help", []string{"request"})
	h := vec.with("Fetch")
	if vec.with("Fetch") != h {
		t.Fatal("a second series for the same label value")
	}
	h.Observe(-time.Second)
	h.Observe(1000 * time.Hour)
	h.Observe(time.Nanosecond) // 2^-29.9 s: the first bucket above zero
	b := h.read(time.Time{})
	if b.zero != 1 || b.counts[histMaxKey] != 1 || b.counts[histMinKey+1] != 1 || b.count != 3 {
		t.Fatalf("buckets %+v", b)
	}
	m := gatherOne(t, vec)
	if m.GetLabel()[0].GetValue() != "Fetch" || m.GetHistogram().GetSampleCount() != 3 {
		t.Fatalf("gathered %v", m)
	}
}

// BenchmarkAPIDone is what the broker pays per answered request for its
// request metrics: the counter, the total time and its four phases.
func BenchmarkAPIDone(b *testing.B) {
	a := New().API("Produce")
	ph := Phases{Queue: time.Microsecond, Local: 20 * time.Microsecond, Wait: 300 * time.Microsecond, Send: 5 * time.Microsecond}
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		i := 0
		for pb.Next() {
			i++
			a.Done(time.Duration(300+i%700)*time.Microsecond, ph)
		}
	})
}

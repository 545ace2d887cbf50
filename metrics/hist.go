package metrics

// Native histograms of durations recorded per request: a fixed array of
// atomic bucket counters at schema 3 (bucket factor 2^(1/8), about 1.09:
// what client_golang picks for a bucket factor of 1.1), exposed at the
// scrape as Prometheus native histograms (the protobuf exposition; the
// text exposition shows their count and sum). client_golang's native
// histogram keeps its sparse buckets in a sync.Map and pays for a lookup
// and a hot/cold swap per observation; these cost two atomic adds. The
// buckets span 2^-30 s (about 1 ns) to 2^14 s (about 4.5 hours): a shorter
// observation counts in the top bucket of the range below it, the zero
// bucket (threshold 2^-30 s); a longer one in the top bucket. The count is
// the buckets' total and the sum is kept in nanoseconds, so both are
// exact.

import (
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

const (
	histSchema = 3
	histMinKey = -240 // the bucket (2^-30.125, 2^-30] s
	histMaxKey = 112  // the bucket (2^13.875, 2^14] s
)

// histZero is the zero bucket's threshold: durations at most 2^-30 s.
var histZero = math.Ldexp(1, -30)

// histBounds are the schema's bucket bounds within one power of two, as a
// fraction of math.Frexp's [0.5, 1): bucket k of an exponent covers
// (bounds[k-1], bounds[k]].
var histBounds = func() (b [8]float64) {
	for i := range b {
		b[i] = math.Exp2(float64(i)/8 - 1)
	}
	return b
}()

// hist is one series.
type hist struct {
	sumNS   atomic.Int64
	zero    atomic.Uint64
	buckets [histMaxKey - histMinKey + 1]atomic.Uint64
}

// histKey is the index of the bucket holding v > 0 seconds, before
// clamping to the range.
func histKey(v float64) int {
	frac, exp := math.Frexp(v)
	k := 0
	for k < len(histBounds)-1 && histBounds[k] < frac {
		k++
	}
	if histBounds[k] < frac { // above the last bound: the next power's first bucket
		k++
	}
	return (exp-1)*8 + k
}

// Observe records one duration (a negative one counts as zero; the
// shortest positive one, 1 ns, is above the zero threshold).
func (h *hist) Observe(d time.Duration) {
	if d <= 0 {
		h.zero.Add(1)
		return
	}
	h.sumNS.Add(int64(d))
	h.buckets[min(max(histKey(d.Seconds()), histMinKey+1), histMaxKey)-histMinKey].Add(1)
}

// read is the series now: bucket counts by key (the exposition's index),
// the zero bucket, the count and the sum in seconds.
func (h *hist) read(at time.Time) buckets {
	b := buckets{at: at, schema: histSchema, zeroTh: histZero, zero: h.zero.Load(), counts: map[int]int64{}}
	b.count = b.zero
	for i := range h.buckets {
		if c := h.buckets[i].Load(); c > 0 {
			b.counts[i+histMinKey] = int64(c)
			b.count += c
		}
	}
	b.sum = time.Duration(h.sumNS.Load()).Seconds()
	return b
}

// histVec is a family of hist series by the values of its labels (none or
// one), a prometheus.Collector.
type histVec struct {
	desc    *prometheus.Desc
	labeled bool
	created time.Time
	mu      sync.Mutex
	names   []string
	series  map[string]*hist
}

func newHistVec(name, help string, labels []string) *histVec {
	return &histVec{desc: prometheus.NewDesc(name, help, labels, nil), labeled: len(labels) > 0, created: time.Now(), series: map[string]*hist{}}
}

// with returns the series of the label value (the empty string for a
// family without labels), made on first use: callers resolve it once.
func (v *histVec) with(value string) *hist {
	v.mu.Lock()
	defer v.mu.Unlock()
	h := v.series[value]
	if h == nil {
		h = &hist{}
		v.series[value] = h
		v.names = append(v.names, value)
	}
	return h
}

// each calls f for every series, in the order they were made.
func (v *histVec) each(f func(value string, h *hist)) {
	v.mu.Lock()
	names := append([]string(nil), v.names...)
	hs := make([]*hist, len(names))
	for i, n := range names {
		hs[i] = v.series[n]
	}
	v.mu.Unlock()
	for i, n := range names {
		f(n, hs[i])
	}
}

func (v *histVec) Describe(ch chan<- *prometheus.Desc) { ch <- v.desc }

func (v *histVec) Collect(ch chan<- prometheus.Metric) {
	now := time.Now()
	v.each(func(value string, h *hist) {
		b := h.read(now)
		var lv []string
		if v.labeled {
			lv = []string{value}
		}
		ch <- prometheus.MustNewConstNativeHistogram(v.desc, b.count, b.sum, b.counts, nil, b.zero, histSchema, histZero, v.created, lv...)
	})
}

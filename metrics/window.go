package metrics

// The request-time summary (kafka_network_requestmetrics_totaltimems)
// without a summary's cost per request. client_golang's summary takes a
// lock and inserts into five quantile streams per observation (about
// 0.4 µs, the largest cost of a small produce's metrics); every request is
// already observed, for a few nanoseconds, in the native histogram
// verbatim_request_total_time_seconds (hist.go). So the summary is computed when
// scraped, from that histogram: its count and sum are the histogram's, and
// its quantiles those of the observations of the last window: the
// histogram now less the newest snapshot of it at least windowAge old
// (snapshots are taken at scrapes, one per windowStep; scraped every
// minute or more often, the window is 8-10 minutes), found by walking the
// buckets. A quantile
// is exact to within its bucket (factor 1.1: within 5% of the value)
// rather than to a rank error; an empty window answers NaN, as a summary
// does.

import (
	"math"
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

const (
	// windowAge and windowStep: the quantiles cover the requests of the
	// last 8 to 10 minutes, as the summary's MaxAge 10 minutes in 5 age
	// buckets did.
	windowAge  = 8 * time.Minute
	windowStep = 2 * time.Minute
)

// buckets is one native histogram's state: counts by bucket index at a
// schema, the zero bucket's count, and the cumulative count and sum.
type buckets struct {
	at     time.Time
	schema int32
	zeroTh float64
	zero   uint64
	counts map[int]int64 // by bucket key, as the exposition takes them
	count  uint64
	sum    float64
}

// since is b less an earlier snapshot old of the same histogram: the
// observations made after old. A snapshot the histogram no longer extends
// (a reset, a coarser schema, a wider zero bucket) is not subtracted.
func (b buckets) since(old *buckets) buckets {
	if old == nil || old.schema != b.schema || old.zeroTh != b.zeroTh || old.count > b.count {
		return b
	}
	w := buckets{at: b.at, schema: b.schema, zeroTh: b.zeroTh, counts: make(map[int]int64, len(b.counts))}
	if b.zero >= old.zero {
		w.zero = b.zero - old.zero
	}
	for i, c := range b.counts {
		if o := old.counts[i]; c > o {
			w.counts[i] = c - o
		}
	}
	w.count, w.sum = b.count-old.count, b.sum-old.sum
	return w
}

// quantiles answers each q of qs from the buckets: the bucket holding
// rank q*n, interpolated within it on the log scale the buckets are
// spaced on; NaN when there are no observations.
func (b buckets) quantiles(qs []float64) map[float64]float64 {
	out := make(map[float64]float64, len(qs))
	n := b.zero
	idx := make([]int, 0, len(b.counts))
	for i, c := range b.counts {
		idx = append(idx, i)
		n += uint64(c)
	}
	slices.Sort(idx)
	base := math.Exp2(math.Exp2(-float64(b.schema)))
	for _, q := range qs {
		if n == 0 {
			out[q] = math.NaN()
			continue
		}
		rank := q * float64(n)
		cum := float64(b.zero)
		if rank <= cum || len(idx) == 0 {
			out[q] = b.zeroTh
			continue
		}
		v := math.Pow(base, float64(idx[len(idx)-1]))
		for _, i := range idx {
			c := float64(b.counts[i])
			if cum+c >= rank {
				upper := math.Pow(base, float64(i))
				lower := max(upper/base, b.zeroTh)
				v = lower * math.Pow(upper/lower, (rank-cum)/c)
				break
			}
			cum += c
		}
		out[q] = v
	}
	return out
}

// summaryOf exposes native histograms of seconds as summaries in
// milliseconds over a sliding window, one series per label value.
type summaryOf struct {
	desc  *prometheus.Desc
	vec   *histVec
	qs    []float64
	now   func() time.Time
	mu    sync.Mutex
	snaps map[string][]buckets // oldest first, windowStep apart at least
}

func newSummaryOf(name, help, label string, vec *histVec, objectives map[float64]float64, now func() time.Time) *summaryOf {
	qs := make([]float64, 0, len(objectives))
	for q := range objectives {
		qs = append(qs, q)
	}
	slices.Sort(qs)
	return &summaryOf{desc: prometheus.NewDesc(name, help, []string{label}, nil), vec: vec, qs: qs, now: now, snaps: map[string][]buckets{}}
}

func (s *summaryOf) Describe(ch chan<- *prometheus.Desc) { ch <- s.desc }

func (s *summaryOf) Collect(ch chan<- prometheus.Metric) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	s.vec.each(func(name string, h *hist) {
		cur := h.read(now)
		qv := cur.since(s.base(name, now)).quantiles(s.qs)
		for q, v := range qv {
			qv[q] = v * 1e3 // seconds to milliseconds
		}
		ch <- prometheus.MustNewConstSummary(s.desc, cur.count, cur.sum*1e3, qv, name)
		s.keep(name, cur)
	})
}

// base is the newest snapshot of name at least windowAge old (nil: none
// yet; the window is then everything since the start).
func (s *summaryOf) base(name string, now time.Time) *buckets {
	var b *buckets
	for i := range s.snaps[name] {
		if now.Sub(s.snaps[name][i].at) >= windowAge {
			b = &s.snaps[name][i]
		}
	}
	return b
}

// keep records cur as a snapshot when the newest is windowStep old and
// drops those no window needs any more.
func (s *summaryOf) keep(name string, cur buckets) {
	list := s.snaps[name]
	if n := len(list); n > 0 && cur.at.Sub(list[n-1].at) < windowStep {
		return
	}
	list = append(list, cur)
	// Only the newest snapshot at least windowAge old can be a base.
	for len(list) > 1 && cur.at.Sub(list[1].at) >= windowAge {
		list = list[1:]
	}
	s.snaps[name] = list
}

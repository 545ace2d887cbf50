package metrics

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// policyMetrics are the mirror policies' (wasmpolicy) judge calls.
type policyMetrics struct {
	judgments  *prometheus.CounterVec // topic, verdict
	rejections *prometheus.CounterVec // policy
	latency    prometheus.Histogram
}

func newPolicyMetrics() *policyMetrics {
	return &policyMetrics{
		judgments: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "verbatim_policy_judgments_total",
			Help: "Record sets judged by a topic's mirror policies, by verdict: accepted, rejected (a policy refused a batch) or error (the policies could not run)."}, []string{"topic", "verdict"}),
		rejections: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "verbatim_policy_rejections_total",
			Help: "Batches rejected, by the policy module that rejected them."}, []string{"policy"}),
		latency: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "verbatim_policy_judge_seconds",
			Help:                            "Seconds of each judge call (all of a topic's policy modules over one record set), as a native histogram.",
			NativeHistogramBucketFactor:     1.1,
			NativeHistogramMaxBucketNumber:  160,
			NativeHistogramMinResetDuration: time.Hour}),
	}
}

func (p *policyMetrics) collectors() []prometheus.Collector {
	return []prometheus.Collector{p.judgments, p.rejections, p.latency}
}

// Policy is one topic's judge-call handles, resolved when its policies
// are bound. Its methods do nothing on a nil *Policy.
type Policy struct {
	pm                        *policyMetrics
	accepted, rejected, error prometheus.Counter
}

// Policy returns the handles of topic's policies.
func (r *Registry) Policy(topic string) *Policy {
	if r == nil {
		return nil
	}
	j := r.policy.judgments
	return &Policy{pm: r.policy, accepted: j.WithLabelValues(topic, "accepted"),
		rejected: j.WithLabelValues(topic, "rejected"), error: j.WithLabelValues(topic, "error")}
}

// Accepted records a judge call that took d and accepted every batch.
func (p *Policy) Accepted(d time.Duration) {
	if p != nil {
		p.accepted.Inc()
		p.pm.latency.Observe(d.Seconds())
	}
}

// Rejected records a judge call that took d and rejected batches, by the
// policies named (one per rejected batch and policy).
func (p *Policy) Rejected(d time.Duration, policies []string) {
	if p != nil {
		p.rejected.Inc()
		p.pm.latency.Observe(d.Seconds())
		for _, name := range policies {
			p.pm.rejections.WithLabelValues(name).Inc()
		}
	}
}

// Failed records a judge call that could not run.
func (p *Policy) Failed() {
	if p != nil {
		p.error.Inc()
	}
}

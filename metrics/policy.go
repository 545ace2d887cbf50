package metrics

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// policyMetrics are the mirror policies' (wasmpolicy) judge calls.
type policyMetrics struct {
	judgments  *prometheus.CounterVec // topic, verdict
	rejections *prometheus.CounterVec // policy
	latency    *hist
	latencyVec *histVec
	modules    *histVec // policy
}

func newPolicyMetrics() *policyMetrics {
	latency := newHistVec("verbatim_policy_judge_seconds",
		"Seconds of each judge call (all of a topic's policy modules over one record set), as a native histogram.", nil)
	return &policyMetrics{
		latency: latency.with(""), latencyVec: latency,
		judgments: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "verbatim_policy_judgments_total",
			Help: "Record sets judged by a topic's mirror policies, by verdict: accepted, rejected (a policy refused a batch) or error (the policies could not run)."}, []string{"topic", "verdict"}),
		rejections: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "verbatim_policy_rejections_total",
			Help: "Batches rejected, by the policy module that rejected them."}, []string{"policy"}),
		modules: newHistVec("verbatim_policy_module_seconds",
			"Seconds of each judge call of one policy module (one of a topic's modules over one record set), by module, as a native histogram.", []string{"policy"}),
	}
}

// PolicyModuleTimer returns the function that records one judge call of
// policy module name (wasmpolicy.Options.ModuleTimer), its series
// resolved now; nil on a nil Registry.
func (r *Registry) PolicyModuleTimer(name string) func(time.Duration) {
	if r == nil {
		return nil
	}
	return r.policy.modules.with(name).Observe
}

func (p *policyMetrics) collectors() []prometheus.Collector {
	return []prometheus.Collector{p.judgments, p.rejections, p.latencyVec, p.modules}
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
		p.pm.latency.Observe(d)
	}
}

// Rejected records a judge call that took d and rejected batches, by the
// policies named (one per rejected batch and policy).
func (p *Policy) Rejected(d time.Duration, policies []string) {
	if p != nil {
		p.rejected.Inc()
		p.pm.latency.Observe(d)
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

package broker

// Mirror policies (docs/policies.md): the WASM modules a topic binds with
// mirror.policies (mirror topics default to policies.DefaultMirror) judge
// a partition's batches after the hot path's structural checks and before
// the append. The Host (wasmpolicy) compiles each module once and keeps
// instances per (module, topic); this file only maps topics to bindings
// and verdicts to Kafka errors.

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/verbatim-kafka/verbatim/metrics"

	"github.com/verbatim-kafka/verbatim/policies"
	"github.com/verbatim-kafka/verbatim/storage"
	"github.com/verbatim-kafka/verbatim/wasmpolicy"
)

const cfgMirrorPolicies = "mirror.policies"

// policyRefreshInterval is how often module files are checked for changes
// and bindings of deleted topics released.
const policyRefreshInterval = 2 * time.Second

// testPolicyCacheDir, when set (by the package's tests), replaces
// <data-dir>/.wasm-cache so that a test binary compiles each module once.
var testPolicyCacheDir string

// checkPolicyList is the syntax check of a mirror.policies value; whether
// the named modules exist and load is checked by checkTopicPolicies.
func checkPolicyList(v string) string {
	if _, err := wasmpolicy.ParseList(v); err != nil {
		return err.Error()
	}
	return ""
}

// policyState is the server's policy host and its topic bindings.
type policyState struct {
	host *wasmpolicy.Host
	mu   sync.RWMutex
	// bound holds the binding of each topic for the config it was made
	// with; a config change (a new *TopicConfig) rebinds.
	bound map[*Topic]*topicPolicies
	// metrics resolves each binding's judge-call handles (metrics.go).
	metrics *metrics.Registry
	// defaultsReady is set once the default mirror policies compiled
	// (readiness, metrics.go).
	defaultsReady atomic.Bool
}

type topicPolicies struct {
	cfg *TopicConfig
	b   *wasmpolicy.Binding // nil: the topic has no policies
	m   *metrics.Policy     // the judge calls' handles (nil without b)
	// err: binding failed (e.g. a module file missing after a restart);
	// the topic's produces are refused, and binding is retried after
	// policyRefreshInterval.
	err   error
	errAt time.Time
}

// current reports whether tp is the binding to use for cfg.
func (tp *topicPolicies) current(cfg *TopicConfig) bool {
	return tp != nil && tp.cfg == cfg && (tp.err == nil || time.Since(tp.errAt) < policyRefreshInterval)
}

func openPolicies(ctx context.Context, cfg Config, log *slog.Logger, m *metrics.Registry) (*policyState, error) {
	cache := filepath.Join(cfg.DataDir, ".wasm-cache")
	if testPolicyCacheDir != "" {
		cache = testPolicyCacheDir
	}
	opts := wasmpolicy.Options{PolicyDir: cfg.PolicyDir, CacheDir: cache, Logger: log}
	if m != nil {
		opts.ModuleTimer = m.PolicyModuleTimer
	}
	h, err := wasmpolicy.NewHost(opts)
	if err != nil {
		return nil, err
	}
	ps := &policyState{host: h, bound: map[*Topic]*topicPolicies{}, metrics: m}
	// Compile the defaults now, off the request path: the first mirror
	// produce then finds them ready (a warm cache makes this ~0.1 s).
	go func() {
		start := time.Now()
		if err := h.Check(policies.DefaultMirror); err != nil {
			if !errors.Is(err, wasmpolicy.ErrClosed) {
				log.Error("loading the default mirror policies", "err", err)
			}
			return
		}
		ps.defaultsReady.Store(true)
		log.Info("default mirror policies ready", "policies", policies.DefaultMirror, "took", time.Since(start), "cache", cache)
	}()
	go ps.maintain(ctx, cfg.PolicyDir != "")
	return ps, nil
}

func (ps *policyState) close() {
	ps.mu.Lock()
	for t, tp := range ps.bound {
		if tp.b != nil {
			tp.b.Close()
		}
		delete(ps.bound, t)
	}
	ps.mu.Unlock()
	ps.host.Close()
}

// maintain reloads changed module files and releases the bindings of
// deleted topics until ctx ends.
func (ps *policyState) maintain(ctx context.Context, watchDir bool) {
	every(ctx, policyRefreshInterval, func() {
		if watchDir {
			ps.host.Refresh() // failures are logged by the host
		}
		ps.mu.Lock()
		for topic, tp := range ps.bound {
			if topic.Deleted() {
				if tp.b != nil {
					tp.b.Close()
				}
				delete(ps.bound, topic)
			}
		}
		ps.mu.Unlock()
	})
}

// effectiveConfigs is every config of the topic with its value (override
// or default), what modules may ask for.
func effectiveConfigs(cfg *TopicConfig) map[string]string {
	out := make(map[string]string, len(topicConfigDefs))
	for _, def := range topicConfigDefs {
		if def.hasDefault {
			out[def.name] = cfg.defaultOf(&def)
		}
	}
	for k, v := range cfg.overrides {
		out[k] = v
	}
	return out
}

// binding returns t's policies for its current config. Binding happens
// outside the lock (it may wait for a module being compiled), so other
// topics' produces never wait for it.
func (ps *policyState) binding(t *Topic) *topicPolicies {
	cfg := t.Config()
	ps.mu.RLock()
	tp := ps.bound[t]
	ps.mu.RUnlock()
	if tp.current(cfg) {
		return tp
	}
	v, set := cfg.overrides[cfgMirrorPolicies]
	names, err := wasmpolicy.Effective(v, set, cfg.Mirror)
	tp = &topicPolicies{cfg: cfg}
	if err == nil && len(names) > 0 {
		tp.b, err = ps.host.Bind(t.Name, names, effectiveConfigs(cfg))
	}
	if tp.b != nil && ps.metrics != nil {
		tp.m = ps.metrics.Policy(t.Name)
	}
	tp.err, tp.errAt = err, time.Now()
	ps.mu.Lock()
	old := ps.bound[t]
	if old.current(cfg) { // another produce bound it first
		ps.mu.Unlock()
		if tp.b != nil {
			tp.b.Close()
		}
		return old
	}
	ps.bound[t] = tp
	ps.mu.Unlock()
	if old != nil && old.b != nil {
		old.b.Close()
	}
	return tp
}

// checkTopicPolicies refuses a config whose mirror.policies names a module
// that does not exist or does not load (INVALID_CONFIG).
func (s *Server) checkTopicPolicies(cfg *TopicConfig) error {
	v, set := cfg.overrides[cfgMirrorPolicies]
	if !set {
		return nil
	}
	names, err := wasmpolicy.ParseList(v)
	if err == nil {
		err = s.policy.host.Check(names)
	}
	if err != nil {
		return fmt.Errorf("%w: Invalid value %s for configuration %s: %v", errInvalidConfig, v, cfgMirrorPolicies, err)
	}
	return nil
}

// rejectingPolicies names the policy of each rejection (the metrics'
// label; on the rejection path only).
func rejectingPolicies(rs []wasmpolicy.Rejection) []string {
	out := make([]string, len(rs))
	for i, r := range rs {
		out[i] = r.Policy
	}
	return out
}

// openTxnIDs holds the producer-id slices of judge calls' contexts.
var openTxnIDs = sync.Pool{New: func() any { return new([]int64) }}

// judgePolicies runs p's topic policies over set, whose first batch would
// be appended at leo. A rejection becomes the policy's Kafka error with a
// message naming the policy, the offset and the reason.
func (s *Server) judgePolicies(p *Partition, l *storage.Log, set []byte, leo int64) error {
	tp := s.policy.binding(p.Topic)
	if tp.err != nil {
		return kafkaErr(kerr.PolicyViolation, fmt.Sprintf("the mirror policies of topic %s cannot run: %v", p.Topic.Name, tp.err))
	}
	if tp.b == nil {
		return nil
	}
	pc := wasmpolicy.PartitionContext{Partition: p.Index, LeaderEpoch: p.LeaderEpoch(), LogEndOffset: leo, LastBatchEpoch: -1}
	if tp.cfg.Mirror {
		// The policy ABI knows one mirror mode: a pull-mode topic is
		// judged as a mirror topic like a push one (its appends are the
		// same verbatim mirror appends).
		pc.Mode, pc.State = wasmpolicy.ModePush, wasmpolicy.StateMirroring
	}
	if e, ok := l.EpochCache().LatestEpoch(); ok {
		pc.LastBatchEpoch = e
	}
	if txns := l.OngoingTransactions(); len(txns) > 0 {
		// The host copies the ids into each module's input, so a pooled
		// slice serves every call.
		ids := openTxnIDs.Get().(*[]int64)
		defer openTxnIDs.Put(ids)
		*ids = (*ids)[:0]
		for _, t := range txns {
			*ids = append(*ids, t.ProducerID)
		}
		pc.OpenTxnProducerIDs = *ids
	}
	v, err := tp.b.Judge(context.Background(), pc, set)
	switch {
	case err != nil:
		tp.m.Failed()
	case v.Accepted():
		tp.m.Accepted(v.Elapsed)
	default:
		tp.m.Rejected(v.Elapsed, rejectingPolicies(v.Rejected))
	}
	switch {
	case errors.Is(err, wasmpolicy.ErrClosed):
		// The topic was rebound (config change) or the broker is
		// stopping: the producer retries.
		return kafkaErr(kerr.NotLeaderForPartition, "mirror policies are being reloaded; retry")
	case err != nil:
		return kafkaErr(kerr.PolicyViolation, fmt.Sprintf("mirror policies of topic %s: %v", p.Topic.Name, err))
	}
	verr := v.Err()
	if verr == nil {
		return nil
	}
	// Declared only here: errors.As makes it escape, and an accepted
	// set must not cost an allocation.
	var re *wasmpolicy.RejectedError
	if errors.As(verr, &re) {
		code, ok := kerr.ErrorForCode(re.KafkaCode()).(*kerr.Error)
		if !ok {
			code = kerr.PolicyViolation
		}
		return kafkaErr(code, re.Error())
	}
	return nil
}

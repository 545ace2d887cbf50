package broker

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"net/http"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/verbatim-kafka/verbatim/metrics"
)

// Metrics: the broker's Prometheus registry (package metrics) and the
// handles it resolves once, so that the hot path counts with atomic adds
// and no allocation: per API in s.apiMetrics (indexed by key), per topic
// on the Topic, per listener on the connection.

// openMetrics creates the registry and the per-API handles.
func (s *Server) openMetrics() {
	s.metrics = metrics.New()
	for key, e := range registry {
		if e != nil {
			s.apiMetrics[key] = s.metrics.API(requestMetricName(int16(key)))
		}
	}
	s.fetchFollowerMetrics = s.metrics.API("FetchFollower")
	s.metrics.GaugeFunc("verbatim_inflight_bytes", "Request bytes held in memory by all connections (--max-inflight-bytes budget in use).",
		func() float64 { return float64(s.budget.InUse()) })
	s.metrics.GaugeFunc("verbatim_inflight_bytes_limit", "The in-flight request bytes budget (--max-inflight-bytes).",
		func() float64 { return float64(s.budget.Limit()) })
	s.metrics.GaugeFunc("verbatim_decode_bytes", "Working memory for looking inside batches in use (--max-decode-bytes budget).",
		func() float64 { return float64(s.decode.InUse()) })
	s.metrics.GaugeFunc("verbatim_decode_bytes_limit", "The decode working-memory budget (--max-decode-bytes).",
		func() float64 { return float64(s.decode.Limit()) })
	s.metrics.GaugeFunc("verbatim_inflight_budget_waiters", "Readers waiting for the in-flight bytes budget.",
		func() float64 { return float64(s.budget.Waiting()) })
	s.metrics.RegisterTotals(s.totals)
}

// requestMetricName is the request label Kafka's RequestMetrics uses: the
// API name, with Fetch as FetchConsumer (a follower's Fetch is counted as
// FetchFollower: fetchMetrics).
func requestMetricName(key int16) string {
	if key == kmsg.Fetch.Int16() {
		return "FetchConsumer"
	}
	return kmsg.NameForKey(key)
}

// topicMetrics returns t's counters, resolved on first use.
func (s *Server) topicMetrics(t *Topic) *metrics.Topic {
	if m := t.metrics.Load(); m != nil {
		return m
	}
	m := s.metrics.Topic(t.Name)
	t.metrics.CompareAndSwap(nil, m)
	return t.metrics.Load()
}

// requestDone records request p answered (or dropped) at now, its time
// split into Kafka's RequestMetrics phases (metrics.Phases).
func (s *Server) requestDone(p *pending) {
	key := p.key
	if key < 0 || int(key) >= len(s.apiMetrics) || p.start.IsZero() {
		return
	}
	m := s.apiMetrics[key]
	if key == fetchKey {
		m = s.fetchMetrics(isFollowerFetch(p.req.Msg))
	}
	if m == nil {
		return
	}
	now := time.Now()
	ph := metrics.Phases{Queue: p.queued}
	handled := p.handled
	if handled.IsZero() { // answered at decode (a version refusal)
		handled = p.start
	}
	ph.Local = handled.Sub(p.start)
	if p.ready.IsZero() { // nothing written
		ph.Wait = now.Sub(handled)
	} else {
		ph.Wait, ph.Send = p.ready.Sub(handled), now.Sub(p.ready)
	}
	m.Done(now.Sub(p.start)+p.queued, ph)
}

var (
	produceKey = kmsg.Produce.Int16()
	fetchKey   = kmsg.Fetch.Int16()
)

// fetchMetrics is Fetch's request metrics: Kafka's FetchFollower for a
// follower's fetch (cluster mode), FetchConsumer otherwise.
func (s *Server) fetchMetrics(follower bool) *metrics.API {
	if follower {
		return s.fetchFollowerMetrics
	}
	return s.apiMetrics[fetchKey]
}

// isFollowerFetch reports whether msg is a replica's Fetch (a replica id,
// or from v15 the ReplicaState's, of a broker).
func isFollowerFetch(msg kmsg.Request) bool {
	req, ok := msg.(*kmsg.FetchRequest)
	if !ok {
		return false
	}
	if req.Version >= 15 {
		return req.ReplicaState.ID >= 0
	}
	return req.ReplicaID >= 0
}

// apiError counts one error code of an API's response.
func (s *Server) apiError(key int16, code int16) { s.apiMetrics[key].Error(code) }

// MetricsHandler serves /metrics, /healthz and /readyz (package
// metrics). They are read-only and not authorized.
func (s *Server) MetricsHandler() http.Handler { return metrics.Handler(s.metrics, s.Ready) }

// Ready reports nil once the broker serves: the data dir is open (Open
// returned), a listener accepts, and the default mirror policies are
// compiled; during shutdown it reports an error.
func (s *Server) Ready() error {
	s.mu.Lock()
	closing, listening := s.mu.closing, len(s.mu.listeners)
	s.mu.Unlock()
	switch {
	case closing:
		return errors.New("shutting down")
	case listening == 0:
		return errors.New("no listener accepting yet")
	case !s.policy.defaultsReady.Load():
		return errors.New("default mirror policies not compiled yet")
	case s.cm != nil && s.brokerEpoch() == 0:
		return errors.New("not registered in the cluster")
	}
	return nil
}

// totals is the scrape-time state (metrics.Totals): counts over the
// topic snapshot and the listeners' certificates.
func (s *Server) totals() metrics.Totals {
	var t metrics.Totals
	logSeries := s.cfg.MetricsPartitionSeries
	switch {
	case logSeries == 0:
		logSeries = metrics.MaxPartitionSeries
	case logSeries < 0:
		logSeries = 0
	}
	for _, tp := range s.cluster.topics() {
		t.Topics++
		for _, p := range tp.Partitions() {
			if !s.hostsPartition(p) {
				continue // cluster mode: another broker's replica, not an offline one
			}
			t.Partitions++
			h, ok := p.Log.(*logHandle)
			if !ok || h == nil || h.log == nil {
				t.OfflinePartitions++
				continue
			}
			segs, size := h.log.NumSegments(), h.log.Size()
			t.Segments += segs
			t.LogBytes += size
			if len(t.Logs) < logSeries {
				t.Logs = append(t.Logs, metrics.PartitionLog{Topic: tp.Name, Partition: p.Index,
					LogStart: h.log.LogStartOffset(), LogEnd: h.log.LogEndOffset(), Size: size, Segments: segs})
			} else {
				t.LogsOmitted++
			}
			if tp.Config().Mirror {
				if len(t.Mirror) == metrics.MaxPartitionSeries {
					t.MirrorOmitted++
					continue
				}
				epoch, ok := h.log.EpochCache().LatestEpoch()
				if !ok {
					epoch = -1
				}
				t.Mirror = append(t.Mirror, metrics.MirrorPartition{Topic: tp.Name, Partition: p.Index, LogEnd: h.log.LogEndOffset(), LeaderEpoch: epoch,
					SourceHighWatermark: p.SourceHighWatermark()})
			}
		}
	}
	for _, l := range s.listeners.all() {
		if l.TLS == nil {
			continue
		}
		if na, ok := certNotAfter(l.TLS); ok {
			t.CertExpiry = append(t.CertExpiry, metrics.ListenerCert{Listener: l.Name, NotAfter: na})
		}
	}
	return t
}

// certNotAfter is the expiry of the certificate c serves (through
// GetConfigForClient or GetCertificate when set, as tlsconf's reloading
// configs do, so a reloaded store is seen).
func certNotAfter(c *tls.Config) (time.Time, bool) {
	if c.GetConfigForClient != nil {
		inner, err := c.GetConfigForClient(&tls.ClientHelloInfo{})
		if err != nil || inner == nil {
			return time.Time{}, false
		}
		if inner != c {
			c = inner.Clone()
			c.GetConfigForClient = nil
		}
	}
	var cert *tls.Certificate
	switch {
	case c.GetCertificate != nil:
		got, err := c.GetCertificate(&tls.ClientHelloInfo{})
		if err != nil || got == nil {
			return time.Time{}, false
		}
		cert = got
	case len(c.Certificates) > 0:
		cert = &c.Certificates[0]
	default:
		return time.Time{}, false
	}
	leaf := cert.Leaf
	if leaf == nil {
		if len(cert.Certificate) == 0 {
			return time.Time{}, false
		}
		var err error
		if leaf, err = x509.ParseCertificate(cert.Certificate[0]); err != nil {
			return time.Time{}, false
		}
	}
	return leaf.NotAfter, true
}

package metrics

import (
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/twmb/franz-go/pkg/kerr"
)

// Registry is one broker's metrics.
type Registry struct {
	reg *prometheus.Registry

	bytesIn, bytesOut, messagesIn *prometheus.CounterVec
	mirrorFenced                  *prometheus.CounterVec
	replicationBytesIn            *prometheus.CounterVec
	replicationBytesOut           *prometheus.CounterVec
	mirrorDivergences             *prometheus.CounterVec
	requests, requestErrors       *prometheus.CounterVec
	totalTime                     *summaryOf // from latency, when scraped (window.go)
	latency                       *histVec
	phases                        [4]*histVec // Phases: queue, local, wait, send
	connections                   *prometheus.GaugeVec
	connectionsCreated            *prometheus.CounterVec
	authSuccess, authFailure      *prometheus.CounterVec
	flushTime                     prometheus.Summary
	flushLatency                  prometheus.Histogram
	policy                        *policyMetrics

	mu     sync.Mutex
	topics map[string]*Topic
}

// Quantiles are the request-time summary's objectives: Kafka's
// RequestMetrics histograms expose the 50th, 75th, 95th, 98th, 99th and
// 999th percentiles, which the JMX exporter maps to quantile labels.
var Quantiles = map[float64]float64{0.5: 0.05, 0.75: 0.02, 0.95: 0.005, 0.98: 0.002, 0.99: 0.001, 0.999: 0.0001}

// New returns a registry with the Go runtime and process collectors.
func New() *Registry {
	r := &Registry{reg: prometheus.NewRegistry(), topics: map[string]*Topic{}}
	topicCounter := func(name, help string) *prometheus.CounterVec {
		return prometheus.NewCounterVec(prometheus.CounterOpts{Name: "kafka_server_brokertopicmetrics_" + name + "_total", Help: help}, []string{"topic"})
	}
	r.bytesIn = topicCounter("bytesin", "Record bytes appended by produce requests (Kafka BrokerTopicMetrics BytesInPerSec).")
	r.bytesOut = topicCounter("bytesout", "Record bytes returned by fetch responses (Kafka BrokerTopicMetrics BytesOutPerSec).")
	r.messagesIn = topicCounter("messagesin", "Records appended by produce requests (Kafka BrokerTopicMetrics MessagesInPerSec).")
	r.mirrorFenced = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "verbatim_mirror_fenced_writes_total",
		Help: "Mirror writes (produce, log-start forward) refused PRODUCER_FENCED: a writer another pusher superseded."}, []string{"topic"})
	r.replicationBytesIn = topicCounter("replicationbytesin", "Record bytes a cluster link fetched from the source for the topic's mirror partitions, and a follower appended from its leader (Kafka BrokerTopicMetrics ReplicationBytesInPerSec: a mirror is a remote follower).")
	r.replicationBytesOut = topicCounter("replicationbytesout", "Record bytes returned by followers' fetch responses (Kafka BrokerTopicMetrics ReplicationBytesOutPerSec).")
	r.mirrorDivergences = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "verbatim_mirror_divergences_total",
		Help: "Mirror partitions of the topic found diverged from their source (the source truncated what was mirrored): each one FAILED."}, []string{"topic"})
	r.requests = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "kafka_network_requestmetrics_requests_total",
		Help: "Requests answered, by API (Kafka RequestMetrics RequestsPerSec)."}, []string{"request"})
	r.requestErrors = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "kafka_network_requestmetrics_errors_total",
		Help: "Error codes in responses, per partition, by API and error name, NONE included (Kafka RequestMetrics ErrorsPerSec)."}, []string{"request", "error"})
	r.latency = newHistVec("verbatim_request_total_time_seconds",
		"Seconds from a request's frame read to its response written, as a native histogram.", []string{"request"})
	r.totalTime = newSummaryOf("kafka_network_requestmetrics_totaltimems",
		"Milliseconds from a request's frame read to its response written (Kafka RequestMetrics TotalTimeMs); quantiles over the last 8-10 minutes, from verbatim_request_total_time_seconds's buckets.",
		"request", r.latency, Quantiles, time.Now)
	for i, ph := range [...]struct{ name, help string }{
		{"verbatim_request_queue_time_seconds", "Seconds a request waited for its connection's handler goroutine (Kafka RequestQueueTimeMs), as a native histogram."},
		{"verbatim_request_local_time_seconds", "Seconds of a request's handler run: decode, checks, submission (Kafka LocalTimeMs), as a native histogram."},
		{"verbatim_request_wait_time_seconds", "Seconds from a request's handler return until its answer was ready to write: append queue, storage, group commit, long polls, answers ahead on the connection (Kafka RemoteTimeMs + ResponseQueueTimeMs), as a native histogram."},
		{"verbatim_response_send_time_seconds", "Seconds writing a request's answer (Kafka ResponseSendTimeMs), as a native histogram."},
	} {
		r.phases[i] = newHistVec(ph.name, ph.help, []string{"request"})
		r.reg.MustRegister(r.phases[i])
	}
	r.connections = prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "kafka_server_socket_server_metrics_connection_count",
		Help: "Open client connections, by listener and security protocol (Kafka socket-server-metrics connection-count)."}, []string{"listener", "security_protocol"})
	r.connectionsCreated = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "kafka_server_socket_server_metrics_connection_creation_total",
		Help: "Client connections accepted, by listener and security protocol (Kafka socket-server-metrics connection-creation-total)."}, []string{"listener", "security_protocol"})
	r.authSuccess = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "kafka_server_socket_server_metrics_successful_authentication_total",
		Help: "Successful SASL authentications, by listener (Kafka socket-server-metrics successful-authentication-total)."}, []string{"listener"})
	r.authFailure = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "kafka_server_socket_server_metrics_failed_authentication_total",
		Help: "Failed SASL authentications, by listener (Kafka socket-server-metrics failed-authentication-total)."}, []string{"listener"})
	r.flushTime = prometheus.NewSummary(prometheus.SummaryOpts{Name: "kafka_log_logflushstats_logflushrateandtimems",
		Help:       "Milliseconds of each fsync of a partition's active segment (Kafka LogFlushStats LogFlushRateAndTimeMs).",
		Objectives: Quantiles, MaxAge: 10 * time.Minute, AgeBuckets: 5})
	r.flushLatency = prometheus.NewHistogram(prometheus.HistogramOpts{Name: "verbatim_log_flush_seconds",
		Help:                            "Seconds of each fsync of a partition's active segment, as a native histogram.",
		NativeHistogramBucketFactor:     1.1,
		NativeHistogramMaxBucketNumber:  160,
		NativeHistogramMinResetDuration: time.Hour})
	r.reg.MustRegister(r.flushTime, r.flushLatency)
	r.policy = newPolicyMetrics()
	r.reg.MustRegister(r.policy.collectors()...)
	r.reg.MustRegister(r.bytesIn, r.bytesOut, r.messagesIn, r.mirrorFenced, r.replicationBytesIn, r.replicationBytesOut, r.mirrorDivergences,
		r.requests, r.requestErrors, r.totalTime, r.latency, r.connections, r.connectionsCreated, r.authSuccess, r.authFailure,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return r
}

// Gatherer is what the endpoint serves.
func (r *Registry) Gatherer() prometheus.Gatherer { return r.reg }

// GaugeFunc registers a gauge read when scraped (name must be new).
func (r *Registry) GaugeFunc(name, help string, f func() float64) {
	r.reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name, Help: help}, f))
}

// LogFlush records one fsync of a partition log that took d (storage's
// OnFlush).
func (r *Registry) LogFlush(d time.Duration) {
	if r == nil {
		return
	}
	r.flushTime.Observe(float64(d) / float64(time.Millisecond))
	r.flushLatency.Observe(d.Seconds())
}

// Topic is one topic's pre-resolved counters.
type Topic struct {
	BytesIn, BytesOut, MessagesIn prometheus.Counter
	// MirrorFenced counts the topic's fenced mirror writes.
	MirrorFenced prometheus.Counter
	// ReplicationBytesIn counts the record bytes a cluster link fetched
	// from the source for the topic; MirrorDivergences its partitions
	// found diverged from the source.
	ReplicationBytesIn, MirrorDivergences prometheus.Counter
	// ReplicationBytesOut counts the record bytes followers fetched.
	ReplicationBytesOut prometheus.Counter
}

// discardTopic counts into nothing: a nil Registry's topics.
var discardTopic = func() *Topic {
	c := func() prometheus.Counter { return prometheus.NewCounter(prometheus.CounterOpts{Name: "discard"}) }
	return &Topic{BytesIn: c(), BytesOut: c(), MessagesIn: c(), MirrorFenced: c(), ReplicationBytesIn: c(), MirrorDivergences: c(), ReplicationBytesOut: c()}
}()

// Topic returns the handles of topic name, resolving them the first time.
// A nil Registry (a broker built without Open, in tests) gives handles
// that count into nothing; so do its other methods.
func (r *Registry) Topic(name string) *Topic {
	if r == nil {
		return discardTopic
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if t := r.topics[name]; t != nil {
		return t
	}
	t := &Topic{BytesIn: r.bytesIn.WithLabelValues(name), BytesOut: r.bytesOut.WithLabelValues(name),
		MessagesIn: r.messagesIn.WithLabelValues(name), MirrorFenced: r.mirrorFenced.WithLabelValues(name),
		ReplicationBytesIn: r.replicationBytesIn.WithLabelValues(name), MirrorDivergences: r.mirrorDivergences.WithLabelValues(name),
		ReplicationBytesOut: r.replicationBytesOut.WithLabelValues(name)}
	r.topics[name] = t
	return t
}

// DropTopic removes a deleted topic's series (handles still held keep
// counting into nothing).
func (r *Registry) DropTopic(name string) {
	if r == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.topics, name)
	for _, v := range []*prometheus.CounterVec{r.bytesIn, r.bytesOut, r.messagesIn, r.mirrorFenced, r.replicationBytesIn, r.replicationBytesOut, r.mirrorDivergences} {
		v.DeleteLabelValues(name)
	}
	r.policy.judgments.DeletePartialMatch(prometheus.Labels{"topic": name})
}

// errSlots covers Kafka's error codes -1 (UNKNOWN_SERVER_ERROR) to 158;
// codes outside share the last slot.
const errSlots = 160

// API is one API's pre-resolved request metrics.
type API struct {
	r        *Registry
	name     string
	requests prometheus.Counter
	latency  *hist
	// phases observe Phases (native histograms).
	queue, local, wait, send *hist
	errs                     [errSlots]atomic.Pointer[prometheus.Counter]
}

// Phases splits a request's total time the way Kafka's RequestMetrics
// does, for Verbatim's pipeline: Queue, waiting for the connection's
// handler goroutine (frames of 512 KiB and more, and those behind them;
// RequestQueueTimeMs); Local, the handler's own run (decode, checks,
// submission; LocalTimeMs); Wait, from the handler's return until the
// answer is ready to write: the append queue, storage, group commit,
// long polls and the answers ahead on the connection (Kafka's
// RemoteTimeMs plus ResponseQueueTimeMs); Send, writing the answer
// (ResponseSendTimeMs).
type Phases struct {
	Queue, Local, Wait, Send time.Duration
}

// API returns the handles of the API Kafka names request (RequestMetrics'
// request label: Produce, FetchConsumer, Metadata, ...).
func (r *Registry) API(request string) *API {
	if r == nil {
		return nil
	}
	return &API{r: r, name: request, requests: r.requests.WithLabelValues(request),
		latency: r.latency.with(request),
		queue:   r.phases[0].with(request), local: r.phases[1].with(request),
		wait: r.phases[2].with(request), send: r.phases[3].with(request)}
}

// Done records one answered request that took d in all, split as ph
// (nothing on a nil API).
func (a *API) Done(d time.Duration, ph Phases) {
	if a == nil {
		return
	}
	a.requests.Inc()
	a.latency.Observe(d)
	a.queue.Observe(ph.Queue)
	a.local.Observe(ph.Local)
	a.wait.Observe(ph.Wait)
	a.send.Observe(ph.Send)
}

// Error counts one error code in a response (0 counts as NONE, as
// Kafka's ErrorsPerSec does). The first of each code resolves its series.
func (a *API) Error(code int16) {
	if a == nil {
		return
	}
	i := int(code) + 1
	if i < 0 || i >= errSlots {
		i = errSlots - 1
	}
	if c := a.errs[i].Load(); c != nil {
		(*c).Inc()
		return
	}
	c := a.r.requestErrors.WithLabelValues(a.name, errorName(code))
	a.errs[i].CompareAndSwap(nil, &c)
	c.Inc()
}

func errorName(code int16) string {
	if code == 0 {
		return "NONE"
	}
	if e, ok := kerr.ErrorForCode(code).(*kerr.Error); ok && e.Code == code {
		return e.Message
	}
	return "UNKNOWN_" + strconv.Itoa(int(code))
}

// Listener is one listener's pre-resolved connection metrics. Its
// methods do nothing on a nil *Listener (connections built without a
// registry, in tests).
type Listener struct {
	connections        prometheus.Gauge
	connectionsCreated prometheus.Counter
	authSuccess        prometheus.Counter
	authFailure        prometheus.Counter
}

// Listener returns the handles of a listener.
func (r *Registry) Listener(name, protocol string) *Listener {
	if r == nil {
		return nil
	}
	return &Listener{
		connections:        r.connections.WithLabelValues(name, protocol),
		connectionsCreated: r.connectionsCreated.WithLabelValues(name, protocol),
		authSuccess:        r.authSuccess.WithLabelValues(name),
		authFailure:        r.authFailure.WithLabelValues(name),
	}
}

// Opened counts a connection accepted; Closed its end.
func (l *Listener) Opened() {
	if l != nil {
		l.connections.Inc()
		l.connectionsCreated.Inc()
	}
}

// Closed counts the end of a connection Opened counted.
func (l *Listener) Closed() {
	if l != nil {
		l.connections.Dec()
	}
}

// AuthSucceeded counts a successful SASL authentication.
func (l *Listener) AuthSucceeded() {
	if l != nil {
		l.authSuccess.Inc()
	}
}

// AuthFailed counts a failed SASL authentication.
func (l *Listener) AuthFailed() {
	if l != nil {
		l.authFailure.Inc()
	}
}

package broker

import (
	"context"
	"crypto/x509"
	"encoding/pem"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/verbatim-kafka/verbatim/wireext"
)

// get returns the status and body of GET url.
func get(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(b)
}

// scrape parses /metrics with the Prometheus text parser.
func scrape(t *testing.T, base string) map[string]*dto.MetricFamily {
	t.Helper()
	resp, err := http.Get(base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	p := expfmt.NewTextParser(model.UTF8Validation)
	mfs, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("parsing /metrics: %v", err)
	}
	return mfs
}

// series finds the metric of family name whose labels include want.
func series(mfs map[string]*dto.MetricFamily, name string, want map[string]string) *dto.Metric {
	mf := mfs[name]
	if mf == nil {
		return nil
	}
next:
	for _, m := range mf.GetMetric() {
		have := map[string]string{}
		for _, lp := range m.GetLabel() {
			have[lp.GetName()] = lp.GetValue()
		}
		for k, v := range want {
			if have[k] != v {
				continue next
			}
		}
		return m
	}
	return nil
}

func counter(mfs map[string]*dto.MetricFamily, name string, labels map[string]string) float64 {
	m := series(mfs, name, labels)
	if m == nil {
		return -1
	}
	return m.GetCounter().GetValue()
}

// TestMetricsEndpoint runs a broker behind its metrics handler: /readyz
// is not ready before a listener accepts, then ready; produce and fetch
// move the topic counters, the request counters, the error counts and the
// latency summary, and (--flush always) the fsync latency; during shutdown /healthz still answers and /readyz
// does not.
func TestMetricsEndpoint(t *testing.T) {
	cfg := Config{DataDir: t.TempDir(), NodeID: 1, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), MaxInFlightBytes: 300 << 20, Flush: "always"}
	srv, err := Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv.MetricsHandler())
	defer hs.Close()
	if code, body := get(t, hs.URL+"/readyz"); code != http.StatusServiceUnavailable || !strings.Contains(body, "listener") {
		t.Fatalf("/readyz before any listener: %d %q, want 503 naming the listener", code, body)
	}
	if code, _ := get(t, hs.URL+"/healthz"); code != http.StatusOK {
		t.Fatalf("/healthz: %d, want 200", code)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	deadline := time.Now().Add(2 * time.Minute) // the default policies compile (cached) in the background
	for {
		code, body := get(t, hs.URL+"/readyz")
		if code == http.StatusOK {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("/readyz never became ready: %d %q", code, body)
		}
		time.Sleep(20 * time.Millisecond)
	}

	b := &testBroker{t: t, srv: srv, addr: ln.Addr().String()}
	ctx := ctxT(t)
	if _, err := b.admin().CreateTopic(ctx, 1, 1, nil, "m"); err != nil {
		t.Fatal(err)
	}
	before := scrape(t, hs.URL)
	if v := counter(before, "kafka_server_brokertopicmetrics_bytesin_total", map[string]string{"topic": "m"}); v > 0 {
		t.Fatalf("bytesin before any produce: %v", v)
	}
	cl := b.client(kgo.DefaultProduceTopic("m"), kgo.ConsumeTopics("m"))
	for _, v := range []string{"a", "bb", "ccc"} {
		if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte(v)}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	got := 0
	for got < 3 {
		fs := cl.PollFetches(ctx)
		if err := fs.Err(); err != nil {
			t.Fatal(err)
		}
		got += fs.NumRecords()
	}
	cl.Close()
	// A group commits its position.
	offs := kadm.Offsets{}
	offs.Add(kadm.Offset{Topic: "m", Partition: 0, At: 3, LeaderEpoch: -1})
	if resp, err := b.admin().CommitOffsets(ctx, "metrics-group", offs); err != nil || resp.Error() != nil {
		t.Fatalf("commit: %v %v", err, resp.Error())
	}

	mfs := scrape(t, hs.URL)
	if v := counter(mfs, "kafka_network_requestmetrics_requests_total", map[string]string{"request": "OffsetCommit"}); v < 1 {
		t.Errorf("requests{OffsetCommit} = %v, want at least 1", v)
	}
	topic := map[string]string{"topic": "m"}
	if v := counter(mfs, "kafka_server_brokertopicmetrics_messagesin_total", topic); v != 3 {
		t.Errorf("messagesin{topic=m} = %v, want 3", v)
	}
	if v := counter(mfs, "kafka_server_brokertopicmetrics_bytesin_total", topic); v < 3*61 {
		// A one-record batch is at least 61 bytes (header and record).
		t.Errorf("bytesin{topic=m} = %v, want at least three batches' bytes", v)
	}
	if v := counter(mfs, "kafka_server_brokertopicmetrics_bytesout_total", topic); v < 61 {
		t.Errorf("bytesout{topic=m} = %v, want the fetched batches' bytes", v)
	}
	if v := counter(mfs, "kafka_network_requestmetrics_requests_total", map[string]string{"request": "Produce"}); v < 3 {
		t.Errorf("requests{Produce} = %v, want at least 3", v)
	}
	if v := counter(mfs, "kafka_network_requestmetrics_requests_total", map[string]string{"request": "FetchConsumer"}); v < 1 {
		t.Errorf("requests{FetchConsumer} = %v, want at least 1", v)
	}
	if v := counter(mfs, "kafka_network_requestmetrics_errors_total", map[string]string{"request": "Produce", "error": "NONE"}); v < 3 {
		t.Errorf("errors{Produce,NONE} = %v, want at least 3", v)
	}
	m := series(mfs, "kafka_network_requestmetrics_totaltimems", map[string]string{"request": "Produce"})
	if m == nil || m.GetSummary().GetSampleCount() < 3 {
		t.Fatalf("totaltimems{Produce}: %v, want a summary with 3 observations", m)
	}
	var q99 bool
	for _, q := range m.GetSummary().GetQuantile() {
		q99 = q99 || q.GetQuantile() == 0.99
	}
	if !q99 {
		t.Errorf("totaltimems{Produce} has no quantile 0.99: %v", m.GetSummary().GetQuantile())
	}
	if h := series(mfs, "verbatim_request_total_time_seconds", map[string]string{"request": "Produce"}); h == nil || h.GetHistogram().GetSampleCount() < 3 {
		t.Errorf("verbatim_request_total_time_seconds{Produce}: %v, want 3 observations", h)
	}
	// The phases of Kafka's RequestMetrics: every answered request is
	// split, and the parts never exceed the total.
	var parts float64
	for _, ph := range []string{"queue", "local", "wait"} {
		h := series(mfs, "verbatim_request_"+ph+"_time_seconds", map[string]string{"request": "Produce"})
		if h == nil || h.GetHistogram().GetSampleCount() != m.GetSummary().GetSampleCount() {
			t.Errorf("verbatim_request_%s_time_seconds{Produce}: %v, want as many observations as the total", ph, h)
			continue
		}
		parts += h.GetHistogram().GetSampleSum()
	}
	if h := series(mfs, "verbatim_response_send_time_seconds", map[string]string{"request": "Produce"}); h == nil || h.GetHistogram().GetSampleCount() != m.GetSummary().GetSampleCount() {
		t.Errorf("verbatim_response_send_time_seconds{Produce}: %v, want as many observations as the total", h)
	} else {
		parts += h.GetHistogram().GetSampleSum()
	}
	if total := m.GetSummary().GetSampleSum() / 1000; parts > total*1.0001+1e-6 || parts < total*0.9999-1e-6 {
		t.Errorf("the phases of Produce sum to %vs, the total to %vs", parts, total)
	}
	if v := series(mfs, "verbatim_inflight_bytes_limit", nil); v == nil || v.GetGauge().GetValue() != 300<<20 {
		t.Errorf("verbatim_inflight_bytes_limit: %v, want %d", v, 300<<20)
	}
	// --flush always: each acks=all produce waited for an fsync.
	if m := series(mfs, "kafka_log_logflushstats_logflushrateandtimems", nil); m == nil || m.GetSummary().GetSampleCount() < 1 {
		t.Errorf("logflushrateandtimems: %v, want fsyncs observed", m)
	}
	if h := series(mfs, "verbatim_log_flush_seconds", nil); h == nil || h.GetHistogram().GetSampleCount() < 1 {
		t.Errorf("verbatim_log_flush_seconds: %v, want fsyncs observed", h)
	}
	if series(mfs, "go_goroutines", nil) == nil {
		t.Error("no Go runtime metrics")
	}
	if v := counter(mfs, "kafka_server_socket_server_metrics_connection_creation_total", map[string]string{"listener": "PLAINTEXT", "security_protocol": "PLAINTEXT"}); v < 1 {
		t.Errorf("connection_creation{PLAINTEXT} = %v, want at least 1", v)
	}
	// The native histogram has sparse buckets (the protobuf exposition a
	// native-histogram scraper negotiates carries them).
	gathered, err := srv.metrics.Gatherer().Gather()
	if err != nil {
		t.Fatal(err)
	}
	native := false
	for _, mf := range gathered {
		if mf.GetName() == "verbatim_request_total_time_seconds" {
			for _, m := range mf.GetMetric() {
				native = native || len(m.GetHistogram().GetPositiveSpan()) > 0
			}
		}
	}
	if !native {
		t.Error("verbatim_request_total_time_seconds has no native buckets")
	}

	sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		t.Fatal(err)
	}
	if err := <-served; err != nil {
		t.Fatal(err)
	}
	if code, _ := get(t, hs.URL+"/readyz"); code != http.StatusServiceUnavailable {
		t.Errorf("/readyz after shutdown: %d, want 503", code)
	}
	if code, _ := get(t, hs.URL+"/healthz"); code != http.StatusOK {
		t.Errorf("/healthz until its listener closes: %d, want 200", code)
	}
}

// TestMetricsTotals checks the scrape-time gauges: partition, topic and
// segment counts, log bytes, and the expiry of a TLS listener's
// certificate (the keystore's NotAfter).
func TestMetricsTotals(t *testing.T) {
	f := newTLSFixture(t)
	b := startBroker(t, t.TempDir(), nil)
	serveListener(t, b, &Listener{Name: "SSL", Protocol: ProtocolSSL, TLS: f.srv.Config(), Principal: f.srv.Principal})
	if _, err := b.admin().CreateTopic(ctxT(t), 3, 1, nil, "three"); err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(b.srv.MetricsHandler())
	defer hs.Close()
	mfs := scrape(t, hs.URL)
	gauge := func(name string, labels map[string]string) float64 {
		m := series(mfs, name, labels)
		if m == nil {
			t.Fatalf("no %s%v", name, labels)
		}
		return m.GetGauge().GetValue()
	}
	if v := gauge("kafka_server_replicamanager_partitioncount", nil); v < 3 {
		t.Errorf("partitioncount = %v, want at least the 3 created", v)
	}
	if v := gauge("kafka_controller_kafkacontroller_globaltopiccount", nil); v < 1 {
		t.Errorf("globaltopiccount = %v", v)
	}
	if v := gauge("kafka_controller_kafkacontroller_offlinepartitionscount", nil); v != 0 {
		t.Errorf("offlinepartitionscount = %v, want 0", v)
	}
	if v := gauge("verbatim_log_segments", nil); v < 3 {
		t.Errorf("segments = %v, want at least one per partition", v)
	}
	pemBytes, err := os.ReadFile(f.ksPath)
	if err != nil {
		t.Fatal(err)
	}
	var leaf *x509.Certificate
	for rest := pemBytes; leaf == nil; {
		var blk *pem.Block
		if blk, rest = pem.Decode(rest); blk == nil {
			t.Fatal("no certificate in the keystore")
		}
		if blk.Type == "CERTIFICATE" {
			if leaf, err = x509.ParseCertificate(blk.Bytes); err != nil {
				t.Fatal(err)
			}
		}
	}
	if v := gauge("verbatim_tls_certificate_expiry_timestamp_seconds", map[string]string{"listener": "SSL"}); v != float64(leaf.NotAfter.Unix()) {
		t.Errorf("certificate expiry = %v, want %d", v, leaf.NotAfter.Unix())
	}
	if series(mfs, "verbatim_tls_certificate_expiry_timestamp_seconds", map[string]string{"listener": "PLAINTEXT"}) != nil {
		t.Error("a PLAINTEXT listener has a certificate expiry")
	}
}

// TestMetricsAuthentication counts SASL logins per listener: a wrong
// password as a failure, a right one as a success, and the connections
// of the SASL listener under its security protocol.
func TestMetricsAuthentication(t *testing.T) {
	b := startSASLBroker(t, t.TempDir(), nil)
	hs := httptest.NewServer(b.srv.MetricsHandler())
	defer hs.Close()
	c := dialRaw(t, b.addr)
	if r := c.plainLogin(t, testPlainUser, "wrong"); r.ErrorCode == 0 {
		t.Fatal("wrong password accepted")
	}
	c.expectClosed()
	o := dialRaw(t, b.addr)
	if r := o.plainLogin(t, testPlainUser, testPlainPass); r.ErrorCode != 0 {
		t.Fatal(r.ErrorCode)
	}
	o.metadataOK(t)
	mfs := scrape(t, hs.URL)
	l := map[string]string{"listener": "SASL_PLAINTEXT"}
	if v := counter(mfs, "kafka_server_socket_server_metrics_failed_authentication_total", l); v != 1 {
		t.Errorf("failed_authentication = %v, want 1", v)
	}
	if v := counter(mfs, "kafka_server_socket_server_metrics_successful_authentication_total", l); v != 1 {
		t.Errorf("successful_authentication = %v, want 1", v)
	}
	// The refused connection is uncounted just after its socket closes:
	// wait for it (a liveness bound).
	deadline := time.Now().Add(10 * time.Second)
	for {
		open := series(mfs, "kafka_server_socket_server_metrics_connection_count", map[string]string{"listener": "SASL_PLAINTEXT", "security_protocol": "SASL_PLAINTEXT"})
		if open != nil && open.GetGauge().GetValue() == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("connection_count{SASL_PLAINTEXT} = %v, want 1 (the closed one no longer counted)", open)
		}
		time.Sleep(10 * time.Millisecond)
		mfs = scrape(t, hs.URL)
	}
}

// TestMetricsPartitionLogs: every partition's log start, end, size and
// segments under Kafka's kafka.log:type=Log names, up to the configured
// number of partitions; the rest are counted as omitted.
func TestMetricsPartitionLogs(t *testing.T) {
	b := startBroker(t, t.TempDir(), func(c *Config) { c.MetricsPartitionSeries = 2 })
	createTopic(t, b, "a", 3, nil)
	ctx := ctxT(t)
	cl := b.client(kgo.DefaultProduceTopic("a"), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	for _, v := range []string{"x", "y"} {
		if err := cl.ProduceSync(ctx, &kgo.Record{Partition: 1, Value: []byte(v)}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	hs := httptest.NewServer(b.srv.MetricsHandler())
	defer hs.Close()
	mfs := scrape(t, hs.URL)
	if n := len(mfs["kafka_log_log_logendoffset"].GetMetric()); n != 2 {
		t.Fatalf("%d partitions with log series, want the bound 2", n)
	}
	if m := series(mfs, "verbatim_log_partition_series_omitted", nil); m == nil || m.GetGauge().GetValue() != 1 {
		t.Fatalf("omitted: %v, want 1", m)
	}
	// Partitions come in topic and partition order: a/0 and a/1.
	if m := series(mfs, "kafka_log_log_logendoffset", map[string]string{"topic": "a", "partition": "1"}); m == nil || m.GetGauge().GetValue() != 2 {
		t.Errorf("a/1 log end %v, want 2", m)
	} else {
		if sz := series(mfs, "kafka_log_log_size", map[string]string{"topic": "a", "partition": "1"}); sz == nil || sz.GetGauge().GetValue() < 2*61 {
			t.Errorf("a/1 size %v, want two batches' bytes", sz)
		}
	}
	none := startBroker(t, t.TempDir(), func(c *Config) { c.MetricsPartitionSeries = -1 })
	createTopic(t, none, "a", 1, nil)
	nhs := httptest.NewServer(none.srv.MetricsHandler())
	defer nhs.Close()
	if mf := scrape(t, nhs.URL)["kafka_log_log_logendoffset"]; mf != nil {
		t.Fatalf("per-partition series with the bound at none: %v", mf)
	}
}

// TestMetricsMirrorLag: the source high watermark a pusher sends with its
// mirror produces (docs/protocol.md) makes the partition's lag: it rises
// when the source is ahead and goes to 0 once the copy catches up.
func TestMetricsMirrorLag(t *testing.T) {
	b := startBroker(t, t.TempDir(), nil)
	createTopic(t, b, "m", 1, map[string]*string{"mirror.mode": sp("push")})
	hs := httptest.NewServer(b.srv.MetricsHandler())
	defer hs.Close()
	p := map[string]string{"topic": "m", "partition": "0"}
	send := func(set []byte, expected, hw int64) {
		t.Helper()
		req := mirrorProduce(11, "m", 0, set, expected, -1)
		mp := wireext.MirrorPartition{ExpectedLogEndOffset: expected, CurrentLeaderEpoch: -1, SourceHighWatermark: hw}
		req.Topics[0].Partitions[0].UnknownTags.Set(wireext.MirrorTag, mp.AppendTo(nil))
		if pr := rawRequest[*kmsg.ProduceResponse](t, b, req).Topics[0].Partitions[0]; pr.ErrorCode != 0 {
			t.Fatalf("mirror produce at %d: %v", expected, kerr.ErrorForCode(pr.ErrorCode))
		}
	}
	lag := func() float64 {
		m := series(scrape(t, hs.URL), "verbatim_mirror_partition_lag", p)
		if m == nil {
			return -1
		}
		return m.GetGauge().GetValue()
	}
	if v := lag(); v != -1 {
		t.Fatalf("lag before any source high watermark was reported: %v, want no series", v)
	}
	send(data(0, 1, 2).encode(t), 0, 10)
	if v := lag(); v != 8 {
		t.Fatalf("lag after copying 2 of 10: %v, want 8", v)
	}
	send(data(2, 1, 8).encode(t), 2, 10)
	if v := lag(); v != 0 {
		t.Fatalf("lag after catching up: %v, want 0", v)
	}
	send(data(10, 1, 1).encode(t), 10, 30) // the source was written meanwhile
	if v := lag(); v != 19 {
		t.Fatalf("lag with the source ahead again: %v, want 19", v)
	}
	if m := series(scrape(t, hs.URL), "verbatim_mirror_partition_source_high_watermark", p); m == nil || m.GetGauge().GetValue() != 30 {
		t.Fatalf("source high watermark: %v, want 30", m)
	}
}

// TestMetricsMirror: a mirror topic's fenced writes are counted, and its
// partitions' log end and last leader epoch are exported; mirrored
// records count as messages in.
func TestMetricsMirror(t *testing.T) {
	b := startBroker(t, t.TempDir(), nil)
	createTopic(t, b, "m", 1, map[string]*string{"mirror.mode": sp("push")})
	ida := writerID{0xa}
	ea := registerAs(t, b, "m", ida, 0)
	b0 := stopBatch(t, 0, 1, -1, -1, 2, false)
	if pr := mirrorAsID(t, b, testWriterEpoch, writerID{}, b0, 0); pr.ErrorCode != kerr.ProducerFenced.Code {
		t.Fatalf("superseded writer: %v", kerr.ErrorForCode(pr.ErrorCode))
	}
	if pr := mirrorAsID(t, b, ea, ida, b0, 0); pr.ErrorCode != 0 {
		t.Fatalf("registered writer: %v", kerr.ErrorForCode(pr.ErrorCode))
	}
	hs := httptest.NewServer(b.srv.MetricsHandler())
	defer hs.Close()
	mfs := scrape(t, hs.URL)
	if v := counter(mfs, "verbatim_mirror_fenced_writes_total", map[string]string{"topic": "m"}); v != 1 {
		t.Errorf("fenced writes = %v, want 1", v)
	}
	if v := counter(mfs, "kafka_server_brokertopicmetrics_messagesin_total", map[string]string{"topic": "m"}); v != 2 {
		t.Errorf("messagesin{m} = %v, want the 2 mirrored records", v)
	}
	if v := counter(mfs, "kafka_network_requestmetrics_errors_total", map[string]string{"request": "Produce", "error": "PRODUCER_FENCED"}); v != 1 {
		t.Errorf("errors{Produce,PRODUCER_FENCED} = %v, want 1", v)
	}
	p := map[string]string{"topic": "m", "partition": "0"}
	if m := series(mfs, "verbatim_mirror_partition_log_end_offset", p); m == nil || m.GetGauge().GetValue() != 2 {
		t.Errorf("mirror log end: %v, want 2", m)
	}
	if m := series(mfs, "verbatim_mirror_partition_leader_epoch", p); m == nil || m.GetGauge().GetValue() != 1 {
		t.Errorf("mirror leader epoch: %v, want 1", m)
	}
}

// TestMetricsPolicies counts a mirror topic's judge calls by verdict and
// its rejections by policy, with the call latency observed.
func TestMetricsPolicies(t *testing.T) {
	b := startBroker(t, t.TempDir(), nil)
	createTopic(t, b, "m", 1, map[string]*string{"mirror.mode": sp("push")})
	if r := mirrorOne(t, b, "m", data(0, 5, 2).encode(t), 0, -1); r.ErrorCode != 0 {
		t.Fatalf("first mirror produce: %+v", r)
	}
	p := b.srv.Topic("m").Partition(0)
	h := mustHandle(t, p)
	if err := b.srv.judgePolicies(p, h.log, data(2, 3, 1).encode(t), 2); err == nil {
		t.Fatal("an epoch rewind accepted")
	}
	hs := httptest.NewServer(b.srv.MetricsHandler())
	defer hs.Close()
	mfs := scrape(t, hs.URL)
	if v := counter(mfs, "verbatim_policy_judgments_total", map[string]string{"topic": "m", "verdict": "accepted"}); v != 1 {
		t.Errorf("accepted judgments = %v, want 1 (the mirror produce)", v)
	}
	if v := counter(mfs, "verbatim_policy_judgments_total", map[string]string{"topic": "m", "verdict": "rejected"}); v != 1 {
		t.Errorf("rejected judgments = %v, want 1", v)
	}
	if v := counter(mfs, "verbatim_policy_rejections_total", map[string]string{"policy": "epoch-monotonic"}); v != 1 {
		t.Errorf("rejections{epoch-monotonic} = %v, want 1", v)
	}
	if h := series(mfs, "verbatim_policy_judge_seconds", nil); h == nil || h.GetHistogram().GetSampleCount() != 2 {
		t.Errorf("verbatim_policy_judge_seconds: %v, want 2 observations", h)
	}
	// Each of the two default modules judged both record sets.
	for _, mod := range []string{"epoch-monotonic", "control-records"} {
		if h := series(mfs, "verbatim_policy_module_seconds", map[string]string{"policy": mod}); h == nil || h.GetHistogram().GetSampleCount() != 2 {
			t.Errorf("verbatim_policy_module_seconds{policy=%s}: %v, want 2 observations", mod, h)
		}
	}
}

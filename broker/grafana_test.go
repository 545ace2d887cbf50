package broker

import (
	"encoding/json"
	"net/http/httptest"
	"os"
	"regexp"
	"strings"
	"testing"

	dto "github.com/prometheus/client_model/go"
	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/verbatim-kafka/verbatim/wireext"
)

// The Grafana dashboard (docs/grafana/verbatim.json) must be a valid
// dashboard (the schema of the part of Grafana's model it uses,
// docs/grafana/dashboard.schema.json) and every metric its expressions
// and variables query must be on a running broker's /metrics, with the
// labels they group by.

const (
	dashboardFile = "../docs/grafana/verbatim.json"
	dashboardSchm = "../docs/grafana/dashboard.schema.json"
)

func TestGrafanaDashboardSchema(t *testing.T) {
	c := jsonschema.NewCompiler()
	sch, err := c.Compile(dashboardSchm)
	if err != nil {
		t.Fatalf("compiling the schema: %v", err)
	}
	f, err := os.Open(dashboardFile)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	doc, err := jsonschema.UnmarshalJSON(f)
	if err != nil {
		t.Fatalf("%s: %v", dashboardFile, err)
	}
	if err := sch.Validate(doc); err != nil {
		t.Fatalf("%s does not match the dashboard schema: %v", dashboardFile, err)
	}
	// The schema refuses a panel without targets: check it can fail.
	bad := map[string]any{"title": "x", "uid": "x", "schemaVersion": 39, "time": map[string]any{"from": "now-1h", "to": "now"},
		"templating": map[string]any{"list": []any{}}, "panels": []any{map[string]any{"id": 1, "type": "timeseries", "title": "p",
			"gridPos": map[string]any{"h": 1, "w": 1, "x": 0, "y": 0}, "datasource": map[string]any{"type": "prometheus", "uid": "u"}}}}
	if err := sch.Validate(bad); err == nil {
		t.Fatal("the schema accepts a timeseries panel without targets")
	}
}

// dashboardQueries returns every PromQL expression of the dashboard: its
// panels' targets and its query variables.
func dashboardQueries(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile(dashboardFile)
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		Panels []struct {
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
		Templating struct {
			List []struct {
				Definition string `json:"definition"`
			} `json:"list"`
		} `json:"templating"`
	}
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatal(err)
	}
	var qs []string
	for _, p := range d.Panels {
		for _, tg := range p.Targets {
			qs = append(qs, tg.Expr)
		}
	}
	for _, v := range d.Templating.List {
		qs = append(qs, v.Definition)
	}
	return qs
}

var (
	promMetricRE = regexp.MustCompile(`\b((?:kafka|verbatim)_[a-z0-9_]+)\b`)
	promByRE     = regexp.MustCompile(`by \(([a-z_, ]+)\) \(([a-z]+\()?((?:kafka|verbatim)_[a-z0-9_]+)`)
)

func TestGrafanaDashboardMetricsExist(t *testing.T) {
	// Traffic that makes every family of the dashboard appear: produce
	// and fetch, a mirror topic with a fenced write and a policy
	// rejection, a failed and a good SASL login.
	b := startBroker(t, t.TempDir(), nil)
	ctx := ctxT(t)
	createTopic(t, b, "plain", 1, nil)
	cl := b.client(kgo.DefaultProduceTopic("plain"), kgo.ConsumeTopics("plain"))
	if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte("v")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	for got := 0; got < 1; {
		fs := cl.PollFetches(ctx)
		if err := fs.Err(); err != nil {
			t.Fatal(err)
		}
		got += fs.NumRecords()
	}
	cl.Close()
	createTopic(t, b, "m", 1, map[string]*string{"mirror.mode": sp("push")})
	ida := writerID{0xa}
	ea := registerAs(t, b, "m", ida, 0)
	b0 := stopBatch(t, 0, 1, -1, -1, 2, false)
	mirrorAsID(t, b, testWriterEpoch, writerID{}, b0, 0) // fenced
	if pr := mirrorAsID(t, b, ea, ida, b0, 0); pr.ErrorCode != 0 {
		t.Fatalf("registered writer: %d", pr.ErrorCode)
	}
	// A mirror produce reporting the source's high watermark (lag).
	req := mirrorProduce(11, "m", 0, data(2, 1, 1).encode(t), 2, -1)
	req.UnknownTags.Set(wireext.MirrorTag, writerTagID(ea, ida))
	mp := wireext.MirrorPartition{ExpectedLogEndOffset: 2, CurrentLeaderEpoch: -1, SourceHighWatermark: 9}
	req.Topics[0].Partitions[0].UnknownTags.Set(wireext.MirrorTag, mp.AppendTo(nil))
	if pr := rawRequest[*kmsg.ProduceResponse](t, b, req).Topics[0].Partitions[0]; pr.ErrorCode != 0 {
		t.Fatalf("mirror produce with a source high watermark: %d", pr.ErrorCode)
	}
	p := b.srv.Topic("m").Partition(0)
	h := mustHandle(t, p)
	if err := b.srv.judgePolicies(p, h.log, data(3, 0, 3).encode(t), 3); err == nil {
		t.Fatal("an epoch rewind accepted")
	}
	hs := httptest.NewServer(b.srv.MetricsHandler())
	defer hs.Close()
	mfs := scrape(t, hs.URL)

	sb := startSASLBroker(t, t.TempDir(), nil)
	c := dialRaw(t, sb.addr)
	c.plainLogin(t, testPlainUser, "wrong")
	c.expectClosed()
	o := dialRaw(t, sb.addr)
	o.plainLogin(t, testPlainUser, testPlainPass)
	shs := httptest.NewServer(sb.srv.MetricsHandler())
	defer shs.Close()
	for name, mf := range scrape(t, shs.URL) {
		if mfs[name] == nil {
			mfs[name] = mf
		}
	}

	labels := func(mf *dto.MetricFamily) map[string]bool {
		ls := map[string]bool{"job": true, "instance": true} // added by Prometheus
		for _, m := range mf.GetMetric() {
			for _, lp := range m.GetLabel() {
				ls[lp.GetName()] = true
			}
		}
		return ls
	}
	qs := dashboardQueries(t)
	if len(qs) < 10 {
		t.Fatalf("the dashboard has %d queries", len(qs))
	}
	for _, q := range qs {
		names := promMetricRE.FindAllString(q, -1)
		if len(names) == 0 {
			t.Errorf("query %q names no kafka_ or verbatim_ metric", q)
		}
		for _, n := range names {
			if mfs[n] == nil {
				t.Errorf("query %q: metric %s is not on /metrics", q, n)
			}
		}
		for _, m := range promByRE.FindAllStringSubmatch(q, -1) {
			mf := mfs[m[3]]
			if mf == nil {
				continue
			}
			have := labels(mf)
			for _, l := range strings.Split(m[1], ",") {
				if l = strings.TrimSpace(l); !have[l] {
					t.Errorf("query %q groups %s by label %q, which it does not have", q, m[3], l)
				}
			}
		}
	}
}

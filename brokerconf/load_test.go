package brokerconf

import (
	"crypto/tls"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/verbatim-kafka/verbatim/broker"
	"github.com/verbatim-kafka/verbatim/internal/testcerts"
	"github.com/verbatim-kafka/verbatim/props"
)

func parse(t *testing.T, text string) *props.Props {
	t.Helper()
	p, err := props.Parse(strings.NewReader(text))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func listener(t *testing.T, cfg broker.Config, name string) *broker.Listener {
	t.Helper()
	for _, l := range cfg.Listeners {
		if l.Name == name {
			return l
		}
	}
	t.Fatalf("no listener %s in %v", name, cfg.Listeners)
	return nil
}

// inner is the configuration a TLS listener hands a handshake.
func inner(t *testing.T, l *broker.Listener) *tls.Config {
	t.Helper()
	c, err := l.TLS.GetConfigForClient(&tls.ClientHelloInfo{})
	if err != nil || c == nil {
		t.Fatalf("GetConfigForClient: %v", err)
	}
	return c
}

func TestLoadKafkaServerProperties(t *testing.T) {
	ca := testcerts.NewCA(t)
	dir := t.TempDir()
	ks := testcerts.Write(t, dir, "ks.pem", ca.Server(t, "broker").KeystorePEM())
	ts := testcerts.Write(t, dir, "ts.pem", ca.CertPEM)
	text := fmt.Sprintf(`# A KRaft combined server.properties, as Kafka ships it, plus TLS.
process.roles=broker,controller
node.id=3
controller.quorum.bootstrap.servers=localhost:9093
listeners=PLAINTEXT://127.0.0.1:0,CONTROLLER://:9093,SECURE://127.0.0.1:0
inter.broker.listener.name=PLAINTEXT
advertised.listeners=PLAINTEXT://localhost:9092,SECURE://broker.example.com:9094
controller.listener.names=CONTROLLER
listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT,SECURE:SSL
num.network.threads=3
num.io.threads=8
socket.request.max.bytes=104857600
log.dirs=%s/kafka-logs
num.partitions=4
auto.create.topics.enable=true
log.retention.check.interval.ms=300000
group.initial.rebalance.delay.ms=0
ssl.keystore.type=PEM
ssl.keystore.location=%s
ssl.truststore.type=PEM
ssl.truststore.location=%s
listener.name.secure.ssl.client.auth=required
ssl.client.auth=none
`, dir, ks, ts)
	cfg, warnings, err := Load(parse(t, text), []string{"num.partitions=6"})
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	if cfg.NodeID != 3 || cfg.DataDir != dir+"/kafka-logs" || cfg.DefaultPartitions != 6 || !cfg.AutoCreateTopics ||
		cfg.MaxFrameBytes != 104857600 || cfg.GroupInitialRebalanceDelay == nil || *cfg.GroupInitialRebalanceDelay != 0 {
		t.Fatalf("config %+v", cfg)
	}
	if len(cfg.Listeners) != 2 {
		t.Fatalf("listeners %v: want PLAINTEXT and SECURE (the controller listener is not bound)", cfg.Listeners)
	}
	plain, secure := listener(t, cfg, "PLAINTEXT"), listener(t, cfg, "SECURE")
	if plain.Protocol != broker.ProtocolPlaintext || plain.TLS != nil || plain.Advertised != "localhost:9092" || plain.Bind != "127.0.0.1:0" {
		t.Fatalf("PLAINTEXT listener %+v", plain)
	}
	if secure.Protocol != broker.ProtocolSSL || secure.TLS == nil || secure.Principal == nil || secure.Advertised != "broker.example.com:9094" {
		t.Fatalf("SECURE listener %+v", secure)
	}
	if got := inner(t, secure).ClientAuth; got != tls.RequireAndVerifyClientCert {
		t.Fatalf("listener.name.secure.ssl.client.auth=required: ClientAuth %v", got)
	}
	if len(warnings) != 1 {
		t.Fatalf("warnings %q: want one line", warnings)
	}
	for _, n := range []string{"num.network.threads", "num.io.threads", "log.retention.check.interval.ms", "controller.quorum.bootstrap.servers"} {
		if !strings.Contains(warnings[0], n) {
			t.Errorf("warning %q does not list %s", warnings[0], n)
		}
	}
	for _, n := range []string{"node.id", "listeners", "ssl.keystore.location", "process.roles"} {
		if strings.Contains(warnings[0], n+",") || strings.HasSuffix(warnings[0], n) {
			t.Errorf("warning %q lists implemented %s", warnings[0], n)
		}
	}
}

func TestLoadOverridesAndDefaults(t *testing.T) {
	cfg := broker.Config{DataDir: "/flag", NodeID: 1, DefaultPartitions: 2}
	warnings, err := LoadInto(&cfg, parse(t, "node.id=7\nlog.dir=/a\n"), []string{"log.dirs=/b", "max.connections.per.ip=5", "connections.max.idle.ms=60000"})
	if err != nil || len(warnings) != 0 {
		t.Fatalf("LoadInto: %v, %q", err, warnings)
	}
	if cfg.NodeID != 7 || cfg.DataDir != "/b" || cfg.DefaultPartitions != 2 || cfg.MaxConnectionsPerIP == nil || *cfg.MaxConnectionsPerIP != 5 ||
		cfg.IdleTimeout != time.Minute {
		t.Fatalf("config %+v: file over the starting values, log.dirs over log.dir, overrides over the file", cfg)
	}
	cfg, _, err = Load(parse(t, "advertised.listeners=PLAINTEXT://public.example.com:19092\n"), nil)
	if err != nil || cfg.AdvertisedHost != "public.example.com" || cfg.AdvertisedPort != 19092 || len(cfg.Listeners) != 0 {
		t.Fatalf("advertised.listeners without listeners: %v, %+v", err, cfg)
	}
}

func TestLoadRefusals(t *testing.T) {
	for _, tc := range []struct {
		text      string
		overrides []string
		want      []string
	}{
		{"node.id=1\nlsteners=PLAINTEXT://:9092\n", nil, []string{"line 2", `"lsteners"`, "neither"}},
		{"", []string{"nod.id=1"}, []string{"--override nod.id", "neither"}},
		{"", []string{"node.id"}, []string{"name=value"}},
		{"log.dirs=/a,/b\n", nil, []string{"line 1", "log.dirs", "2 directories", "one log dir"}},
		{"listeners=PLAINTEXT://:0\nlistener.name.ssl.ssl.client.auth=required\n", nil, []string{"line 2", "listener SSL", "not in listeners"}},
		{"listeners=PLAINTEXT://:0\nlistener.name.plaintext.node.id=2\n", nil, []string{"cannot be set per listener"}},
		{"listeners=PLAINTEXT://:0\nlistener.name.plaintext.no.such=2\n", nil, []string{"neither"}},
		{"listeners=INTERNAL://:0\n", nil, []string{"INTERNAL has no security protocol"}},
		{"listeners=SSL://:0\n", nil, []string{"listener SSL", "needs a keystore"}},
		{"listeners=PLAINTEXT://:0,PLAINTEXT://:1\n", nil, []string{"twice"}},
		{"listeners=PLAINTEXT:9092\n", nil, []string{"NAME://host:port"}},
		{"listener.security.protocol.map=A:TLS\n", nil, []string{"NAME:PROTOCOL"}},
		{"listeners=PLAINTEXT://:0\nadvertised.listeners=OTHER://h:1\n", nil, []string{"OTHER is not a listener"}},
		{"ssl.client.auth=always\n", nil, []string{"line 1", "ssl.client.auth", "requested"}},
		{"ssl.principal.mapping.rules=RULE:x\n", nil, []string{"ssl.principal.mapping.rules"}},
		{"ssl.enabled.protocols=TLSv1.1\nlisteners=SSL://:0\nssl.keystore.type=PEM\nssl.keystore.location=/nonexistent\n", nil, []string{"TLSv1.1 is not supported"}},
		{"num.partitions=0\n", nil, []string{"num.partitions"}},
		{"auto.create.topics.enable=yes\n", nil, []string{"true or false"}},
	} {
		_, _, err := Load(parse(t, tc.text), tc.overrides)
		if err == nil {
			t.Errorf("%q %q: accepted", tc.text, tc.overrides)
			continue
		}
		for _, w := range tc.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%q %q: error %q does not contain %q", tc.text, tc.overrides, err, w)
			}
		}
	}
}

func TestLoadHidesSecrets(t *testing.T) {
	dir := t.TempDir()
	ks := testcerts.Write(t, dir, "ks.p12", []byte("not a keystore"))
	text := "listeners=SSL://127.0.0.1:0\nssl.keystore.type=PKCS12\nssl.keystore.location=" + ks + "\n"
	_, _, err := Load(parse(t, text), []string{"ssl.keystore.password=hunter2-secret"})
	if err == nil || strings.Contains(err.Error(), "hunter2") {
		t.Fatalf("error %v: want a refusal without the password", err)
	}
	_, _, err = Load(nil, []string{"ssl.keystore.password"})
	if err == nil || strings.Contains(err.Error(), "hunter2") {
		t.Fatalf("malformed override: %v", err)
	}
}

func TestLoadSSLListenerPrefixes(t *testing.T) {
	ca, other := testcerts.NewCA(t), testcerts.NewCA(t)
	dir := t.TempDir()
	a := ca.Server(t, "a")
	b := other.Server(t, "b")
	text := fmt.Sprintf(`listeners=SSL://127.0.0.1:0,SASL_SSL://127.0.0.1:0
ssl.keystore.type=PEM
ssl.keystore.location=%s
listener.name.sasl_ssl.ssl.keystore.location=%s
listener.name.SASL_SSL.ssl.principal.mapping.rules=RULE:^CN=([^,]*),.*$/$1/L
`, testcerts.Write(t, dir, "a.pem", a.KeystorePEM()), testcerts.Write(t, dir, "b.pem", b.KeystorePEM()))
	cfg, _, err := Load(parse(t, text), nil)
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]string{"SSL": a.Cert.SerialNumber.String(), "SASL_SSL": b.Cert.SerialNumber.String()} {
		c := inner(t, listener(t, cfg, name))
		if got := c.Certificates[0].Leaf.SerialNumber.String(); got != want {
			t.Errorf("listener %s serves serial %s, want %s", name, got, want)
		}
	}
}

func FuzzLoad(f *testing.F) {
	f.Add("listeners=PLAINTEXT://:0,SSL://:0\nlistener.security.protocol.map=PLAINTEXT:PLAINTEXT,SSL:SSL\nnode.id=1\n", "num.partitions=3")
	f.Add("listener.name.x.scram-sha-512.sasl.jaas.config=a\nlog.dirs=/a,/b\n", "listener.name.=1")
	f.Add("advertised.listeners=PLAINTEXT://[::1]:0\nssl.principal.mapping.rules=RULE:(.*)/$1/L\n", "")
	f.Fuzz(func(t *testing.T, text, override string) {
		p, err := props.Parse(strings.NewReader(text))
		if err != nil {
			return
		}
		var ov []string
		if override != "" {
			ov = []string{override}
		}
		cfg, warnings, err := Load(p, ov)
		if err == nil && len(warnings) > 1 {
			t.Fatalf("%d warning lines, want at most one", len(warnings))
		}
		if err != nil {
			return
		}
		for _, l := range cfg.Listeners {
			if !l.Protocol.Valid() || l.Protocol.UsesTLS() != (l.TLS != nil) {
				t.Fatalf("listener %+v loaded inconsistent", l)
			}
		}
		// Cluster mode's settings, read from what Load accepted.
		c, _, err := LoadCluster(&cfg, p, ov)
		if err != nil || c == nil {
			return
		}
		e := c.Etcd
		if len(e.Endpoints) == 0 || !strings.HasPrefix(e.Prefix, "/") || !strings.HasSuffix(e.Prefix, "/") {
			t.Fatalf("cluster mode with etcd %+v", e)
		}
		if m := c.Embed; m != nil && (m.Dir == "" || m.ClientURL == "" || m.PeerURL == "" || m.Name == "") {
			t.Fatalf("embedded member %+v incomplete", m)
		}
	})
}

func TestLoadTopicDefaults(t *testing.T) {
	for text, want := range map[string]map[string]string{
		"log.retention.hours=168\n":                                              {"retention.ms": "604800000"},
		"log.retention.hours=1\nlog.retention.minutes=30\n":                      {"retention.ms": "1800000"},
		"log.retention.ms=5000\nlog.retention.minutes=30\nlog.retention.hours=2": {"retention.ms": "5000"},
		"log.retention.ms=-5\n":                                                  {"retention.ms": "-1"},
		"log.retention.bytes=1048576\nlog.segment.bytes=2097152\n":               {"retention.bytes": "1048576", "segment.bytes": "2097152"},
	} {
		cfg, _, err := Load(parse(t, text), nil)
		if err != nil {
			t.Fatalf("%q: %v", text, err)
		}
		if fmt.Sprint(cfg.TopicDefaults) != fmt.Sprint(want) {
			t.Errorf("%q: topic defaults %v, want %v", text, cfg.TopicDefaults, want)
		}
	}
	if _, _, err := Load(parse(t, "log.retention.hours=lots\n"), nil); err == nil || !strings.Contains(err.Error(), "log.retention.hours") {
		t.Fatalf("bad hours: %v", err)
	}
}

func TestLoadCleaner(t *testing.T) {
	cfg, _, err := Load(parse(t, "log.cleaner.threads=2\nlog.cleaner.dedupe.buffer.size=1048576\nlog.cleaner.io.max.bytes.per.second=1.7976931348623157E308\noffsets.topic.segment.bytes=104857600\n"), nil)
	if err != nil || cfg.LogCleanerThreads != 2 || cfg.LogCleanerDedupeBufferSize != 1<<20 || cfg.LogCleanerIOMaxBytesPerSecond != 0 || cfg.OffsetsTopicSegmentBytes != 100<<20 {
		t.Fatalf("%v %+v", err, cfg)
	}
	cfg, _, err = Load(parse(t, "log.cleaner.threads=2\nlog.cleaner.enable=false\n"), nil)
	if err != nil || cfg.LogCleanerThreads != -1 {
		t.Fatalf("log.cleaner.enable=false: %v, threads %d", err, cfg.LogCleanerThreads)
	}
}

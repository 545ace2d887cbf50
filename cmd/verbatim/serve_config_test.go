package main

import (
	"context"
	"fmt"
	"net"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/verbatim-kafka/verbatim/internal/testcerts"
	"github.com/verbatim-kafka/verbatim/internal/testkit/logbuf"
	"github.com/verbatim-kafka/verbatim/props"
	"github.com/verbatim-kafka/verbatim/tlsconf"
)

func TestServeConfigTwoListeners(t *testing.T) {
	ca := testcerts.NewCA(t)
	dir := t.TempDir()
	ks := testcerts.Write(t, dir, "broker.pem", ca.Server(t, "broker").KeystorePEM())
	cfgFile := testcerts.Write(t, dir, "server.properties", []byte(fmt.Sprintf(`process.roles=broker,controller
node.id=1
listeners=PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0
log.dirs=%s
num.partitions=2
num.network.threads=3
log.retention.check.interval.ms=300000
ssl.keystore.type=PEM
ssl.keystore.location=%s
`, filepath.Join(dir, "data"), ks)))
	var out logbuf.Buffer
	plain, code := startServe(t, []string{"--config", cfgFile, "--override", "num.partitions=3", "--num-partitions", "5"}, &out)
	waitLog(t, &out, "listener=SSL")
	m := regexp.MustCompile(`listening listener=SSL protocol=SSL addr=(\S+)`).FindStringSubmatch(out.String())
	if m == nil {
		t.Fatalf("no listening line for the SSL listener:\n%s", out.String())
	}
	sslAddr := m[1]
	if n := strings.Count(out.String(), "not implemented by Verbatim"); n != 1 || !strings.Contains(out.String(), "num.network.threads") {
		t.Fatalf("%d warning lines about ignored properties, want one naming num.network.threads:\n%s", n, out.String())
	}
	p := props.New()
	p.Set("security.protocol", "SSL")
	p.Set("ssl.truststore.type", "PEM")
	p.Set("ssl.truststore.certificates", string(ca.CertPEM))
	tc, err := tlsconf.ClientConfig(p)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for addr, opts := range map[string][]kgo.Opt{plain: nil, sslAddr: {kgo.DialTLSConfig(tc)}} {
		cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(addr)}, opts...)...)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := kmsg.NewPtrMetadataRequest().RequestWith(ctx, cl)
		if err != nil {
			t.Fatalf("Metadata on %s: %v", addr, err)
		}
		if got := net.JoinHostPort(resp.Brokers[0].Host, strconv.Itoa(int(resp.Brokers[0].Port))); got != addr {
			t.Fatalf("Metadata on %s names %s", addr, got)
		}
		cl.Close()
	}
	// The flag given on the command line wins over the override and the
	// file: a topic created with -1 partitions gets 5.
	cl, err := kgo.NewClient(kgo.SeedBrokers(plain))
	if err != nil {
		t.Fatal(err)
	}
	req := kmsg.NewPtrCreateTopicsRequest()
	tp := kmsg.NewCreateTopicsRequestTopic()
	tp.Topic, tp.NumPartitions, tp.ReplicationFactor = "t", -1, -1
	req.Topics = append(req.Topics, tp)
	resp, err := req.RequestWith(ctx, cl)
	cl.Close()
	if err != nil || resp.Topics[0].ErrorCode != 0 || resp.Topics[0].NumPartitions != 5 {
		t.Fatalf("CreateTopics: %v %+v", err, resp)
	}
	stopServe(t, code, &out)
	waitLog(t, &out, "default mirror policies")
}

func TestServeConfigRefusals(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		file string
		args []string
		want string
	}{
		{"node.id=1\nlsteners=PLAINTEXT://:0\n", nil, `line 2: "lsteners"`},
		{"log.dirs=/a,/b\n", nil, "one log dir"},
		{"listeners=PLAINTEXT://127.0.0.1:0\n", []string{"--listen", "127.0.0.1:0"}, "--listen and the listeners property"},
		{"", []string{"--override", "nope"}, "name=value"},
		{"listeners=SSL://127.0.0.1:0\n", nil, "needs a keystore"},
		// Cluster mode's settings (serve_cluster.go) are checked before anything starts.
		{"metadata.etcd.prefix=/x/\n", nil, "cluster mode needs an etcd"},
		{"metadata.etcd.embed.dir=/e\n", nil, "needs metadata.etcd.embed.dir, metadata.etcd.embed.client.url"},
		{"metadata.etcd.embed.dir=/e\nmetadata.etcd.embed.client.url=http://127.0.0.1:1\nmetadata.etcd.embed.peer.url=http://127.0.0.1:2\nmetadata.etcd.embed.initial.cluster=node-1=http://127.0.0.1:2\n",
			[]string{"--node-id", "2"}, "does not list this member (node-2="},
	} {
		f := testcerts.Write(t, dir, "server.properties", []byte(tc.file))
		var out logbuf.Buffer
		args := append([]string{"--data-dir", filepath.Join(dir, "data"), "--config", f}, tc.args...)
		if c := serveMain(args, &out, nil); c != 2 || !strings.Contains(out.String(), tc.want) {
			t.Errorf("%q %q: exit %d, want 2 with %q:\n%s", tc.file, tc.args, c, tc.want, out.String())
		}
	}
}

func TestServeHelpConfig(t *testing.T) {
	var out logbuf.Buffer
	if c := serveMain([]string{"--help-config"}, &out, nil); c != 0 {
		t.Fatalf("exit %d", c)
	}
	for _, want := range []string{"listeners\n", "ssl.keystore.location (also listener.name.<listener>.ssl.keystore.location)", "log.dirs\n"} {
		if !strings.Contains(out.String(), want) {
			t.Fatalf("--help-config lacks %q:\n%s", want, out.String())
		}
	}
}

package client

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/verbatim-kafka/verbatim/internal/testcerts"
)

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// secured is a kfake cluster with SASL (and TLS when ca is set) and a
// count of the SaslHandshakes it received.
type secured struct {
	addr       string
	handshakes atomic.Int32
	ca         *testcerts.CA
}

func startSecured(t *testing.T, useTLS bool, opts ...kfake.Opt) *secured {
	t.Helper()
	s := &secured{}
	opts = append(opts, kfake.NumBrokers(1), kfake.EnableSASL(), kfake.SeedTopics(1, "t"),
		kfake.Superuser("SCRAM-SHA-512", "admin", "admin-secret"), kfake.Superuser("PLAIN", "plainuser", "plain-secret"))
	if useTLS {
		s.ca = testcerts.NewCA(t)
		leaf := s.ca.Server(t, "broker")
		cert, err := tls.X509KeyPair(leaf.CertPEM, leaf.KeyPEM)
		if err != nil {
			t.Fatal(err)
		}
		opts = append(opts, kfake.TLS(&tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}))
	}
	c, err := kfake.NewCluster(opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	c.ControlKey(kmsg.SASLHandshake.Int16(), func(kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		s.handshakes.Add(1)
		return nil, nil, false
	})
	s.addr = c.ListenAddrs()[0]
	return s
}

// config writes a client.properties and reads it with ReadConfig.
func config(t *testing.T, lines ...string) (Options, error) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "client.properties")
	if err := os.WriteFile(path, []byte(strings.Join(lines, "\n")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return ReadConfig(path)
}

func scramProps(ca string, user, pass string) []string {
	return []string{
		"security.protocol=SASL_SSL",
		"ssl.truststore.type=PEM",
		"ssl.truststore.location=" + ca,
		"sasl.mechanism=SCRAM-SHA-512",
		`sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required \`,
		fmt.Sprintf(`    username="%s" password="%s";`, user, pass),
		"request.timeout.ms=30000",
		"client.id=tested",
	}
}

// TestSASLOverTLS: SCRAM-SHA-512 over TLS and PLAIN without, configured
// from Kafka client properties, authenticate and serve requests; a wrong
// password is a permanent AuthError carrying the broker's message and not
// the password, not retried as transient.
func TestSASLOverTLS(t *testing.T) {
	s := startSecured(t, true)
	ca := s.ca.File
	o, err := config(t, scramProps(ca, "admin", "admin-secret")...)
	if err != nil {
		t.Fatal(err)
	}
	if o.TLS == nil || o.SASL == nil || o.SASL.Name() != "SCRAM-SHA-512" || o.ClientID != "tested" {
		t.Fatalf("options %+v", o)
	}
	cl, err := NewCluster(s.addr, o)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if md, err := cl.Metadata(ctxT(t), []string{"t"}); err != nil || md["t"] == nil || md["t"].Err != nil {
		t.Fatalf("metadata over SASL_SSL: %v %+v", err, md)
	}

	o, err = config(t, scramProps(ca, "admin", "not-the-password")...)
	if err != nil {
		t.Fatal(err)
	}
	_, err = Dial(ctxT(t), s.addr, o)
	var ae *AuthError
	// (kfake closes the connection where Kafka answers
	// SASL_AUTHENTICATION_FAILED with its message: interop tests that.)
	if !errors.As(err, &ae) || Transient(err) || strings.Contains(err.Error(), "not-the-password") {
		t.Fatalf("a wrong password: %v (transient %v)", err, Transient(err))
	}

	p := startSecured(t, false)
	o, err = config(t, "security.protocol=SASL_PLAINTEXT", "sasl.mechanism=PLAIN",
		`sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required username="plainuser" password="plain-secret";`)
	if err != nil || o.TLS != nil || o.SASL == nil || o.SASL.Name() != "PLAIN" {
		t.Fatalf("PLAIN options %+v %v", o, err)
	}
	cn, err := Dial(ctxT(t), p.addr, o)
	if err != nil {
		t.Fatalf("PLAIN: %v", err)
	}
	cn.Close()

	// A server certificate the truststore does not trust: permanent.
	other := testcerts.NewCA(t).File
	untrusted, err := config(t, scramProps(other, "admin", "admin-secret")...)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Dial(ctxT(t), s.addr, untrusted); !errors.As(err, &ae) || ae.What != "TLS" || Transient(err) {
		t.Fatalf("an untrusted server certificate: %v", err)
	}
}

// TestSASLReauthentication (KIP-368): when the broker answers a session
// lifetime, the connection authenticates again on itself before it runs
// out (on the injected clock): the first request after the renewal time
// waits for the requests in flight, then the SASL exchange runs, then the
// request; before the renewal time nothing happens.
func TestSASLReauthentication(t *testing.T) {
	s := startSecured(t, false, kfake.BrokerConfigs(map[string]string{"connections.max.reauth.ms": "60000"}))
	var mu sync.Mutex
	now := time.Unix(1_800_000_000, 0)
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	advance := func(d time.Duration) { mu.Lock(); now = now.Add(d); mu.Unlock() }
	o, err := config(t, "security.protocol=SASL_PLAINTEXT", "sasl.mechanism=SCRAM-SHA-512",
		`sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required username="admin" password="admin-secret";`)
	if err != nil {
		t.Fatal(err)
	}
	o.Now = clock
	cn, err := Dial(ctxT(t), s.addr, o)
	if err != nil {
		t.Fatal(err)
	}
	defer cn.Close()
	metadata := func() *Pending {
		t.Helper()
		p, err := cn.Send(ctxT(t), kmsg.NewPtrMetadataRequest(), -1)
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	if n := s.handshakes.Load(); n != 1 {
		t.Fatalf("%d handshakes after dialling", n)
	}
	advance(56 * time.Second) // renewal at 60s - max(1s, 5%) = 57s
	if _, err := metadata().Wait(ctxT(t)); err != nil || s.handshakes.Load() != 1 {
		t.Fatalf("before the renewal time: %v, %d handshakes", err, s.handshakes.Load())
	}
	inflight := []*Pending{metadata(), metadata(), metadata()}
	advance(2 * time.Second)
	last := metadata()
	for _, p := range append(inflight, last) {
		if _, err := p.Wait(ctxT(t)); err != nil {
			t.Fatalf("a request around the re-authentication: %v", err)
		}
	}
	if n := s.handshakes.Load(); n != 2 || cn.Broken() {
		t.Fatalf("after the renewal time: %d handshakes, broken %v", n, cn.Broken())
	}
	advance(58 * time.Second)
	if _, err := metadata().Wait(ctxT(t)); err != nil || s.handshakes.Load() != 3 {
		t.Fatalf("the renewed session's renewal: %v, %d handshakes", err, s.handshakes.Load())
	}
}

// TestFromProps: what client properties are accepted and refused, with
// the line named and no secret in any message.
func TestFromProps(t *testing.T) {
	const secret = "s3cr3t-value"
	if o, err := config(t, "security.protocol=PLAINTEXT", "request.timeout.ms=1000", "acks=all", "group.id=g",
		"sasl.login.retry.backoff.ms=10", "ssl.truststore.password="+secret); err != nil || o.TLS != nil || o.SASL != nil {
		t.Fatalf("Kafka names with PLAINTEXT: %+v %v", o, err)
	}
	if o, err := config(t); err != nil || o.TLS != nil || o.SASL != nil {
		t.Fatalf("an empty file: %+v %v", o, err)
	}
	for name, c := range map[string]struct {
		lines []string
		want  string
	}{
		"typo":          {[]string{"security.protocol=PLAINTEXT", "request.timout.ms=1"}, `line 2: "request.timout.ms" is not a Kafka client property`},
		"protocol":      {[]string{"security.protocol=TLS"}, "must be PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL"},
		"gssapi":        {[]string{"security.protocol=SASL_PLAINTEXT", `sasl.jaas.config=x required password="` + secret + `";`}, "sasl.mechanism=GSSAPI is not supported"},
		"oauth":         {[]string{"security.protocol=SASL_SSL", "sasl.mechanism=OAUTHBEARER"}, "sasl.mechanism=OAUTHBEARER is not supported"},
		"no jaas":       {[]string{"security.protocol=SASL_PLAINTEXT", "sasl.mechanism=PLAIN"}, "needs sasl.jaas.config"},
		"wrong module":  {[]string{"security.protocol=SASL_PLAINTEXT", "sasl.mechanism=PLAIN", `sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required username="u" password="` + secret + `";`}, "line 3: sasl.jaas.config: login module org.apache.kafka.common.security.scram.ScramLoginModule does not serve sasl.mechanism=PLAIN"},
		"bad jaas":      {[]string{"security.protocol=SASL_PLAINTEXT", "sasl.mechanism=PLAIN", `sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required username="u" password="` + secret}, "line 3: sasl.jaas.config"},
		"no username":   {[]string{"security.protocol=SASL_PLAINTEXT", "sasl.mechanism=SCRAM-SHA-256", `sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required password="` + secret + `";`}, "no username"},
		"no truststore": {[]string{"security.protocol=SSL", "ssl.truststore.type=PEM", "ssl.truststore.location=/nonexistent/" + secret}, "ssl.truststore"},
	} {
		_, err := config(t, c.lines...)
		if err == nil || !strings.Contains(err.Error(), c.want) || (name != "no truststore" && strings.Contains(err.Error(), secret)) {
			t.Errorf("%s: %v, want %q and no secret", name, err, c.want)
		}
		if err != nil && !strings.Contains(err.Error(), "client.properties") {
			t.Errorf("%s: %v does not name the file", name, err)
		}
	}
}

// TestMutualTLS: ssl.keystore.* in the client properties is the client
// certificate a broker requiring one (ssl.client.auth=required) accepts;
// without it the connection fails.
func TestMutualTLS(t *testing.T) {
	ca := testcerts.NewCA(t)
	srv := ca.Server(t, "broker")
	cert, err := tls.X509KeyPair(srv.CertPEM, srv.KeyPEM)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(ca.Cert)
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "t"), kfake.TLS(&tls.Config{
		Certificates: []tls.Certificate{cert}, ClientCAs: pool, ClientAuth: tls.RequireAndVerifyClientCert, MinVersion: tls.VersionTLS12}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	addr := c.ListenAddrs()[0]
	me := ca.Client(t, "mirror", pkix.Name{CommonName: "mirror"})
	o, err := config(t, "security.protocol=SSL", "ssl.truststore.type=PEM", "ssl.truststore.location="+ca.File,
		"ssl.keystore.type=PEM", "ssl.keystore.location="+me.KeystoreFile)
	if err != nil {
		t.Fatal(err)
	}
	cn, err := Dial(ctxT(t), addr, o)
	if err != nil {
		t.Fatalf("with a client certificate: %v", err)
	}
	if _, err := cn.Request(ctxT(t), kmsg.NewPtrMetadataRequest(), -1); err != nil {
		t.Fatalf("metadata over mTLS: %v", err)
	}
	cn.Close()
	o, err = config(t, "security.protocol=SSL", "ssl.truststore.type=PEM", "ssl.truststore.location="+ca.File)
	if err != nil {
		t.Fatal(err)
	}
	if cn, err := Dial(ctxT(t), addr, o); err == nil {
		cn.Close()
		t.Fatal("a broker requiring a client certificate accepted none")
	}
}

package tlsconf

import (
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/verbatim-kafka/verbatim/internal/testcerts"
	"github.com/verbatim-kafka/verbatim/internal/testkit/logbuf"
	"github.com/verbatim-kafka/verbatim/props"
)

func TestServerKeystoreTypes(t *testing.T) {
	ca := testcerts.NewCA(t)
	leaf := ca.Server(t, "broker1")
	dir := t.TempDir()
	cases := map[string][]string{
		"PEM file": {"ssl.keystore.type", "PEM", "ssl.keystore.location", testcerts.Write(t, dir, "ks.pem", leaf.KeystorePEM())},
		"PEM inline": {"ssl.keystore.type", "PEM", "ssl.keystore.certificate.chain", string(leaf.CertPEM),
			"ssl.keystore.key", string(leaf.KeyPEM)},
		"PKCS12": {"ssl.keystore.type", "PKCS12", "ssl.keystore.password", "ks-secret",
			"ssl.keystore.location", testcerts.Write(t, dir, "ks.p12", pkcs12Keystore(t, leaf, ca, "ks-secret"))},
		"JKS default type": {"ssl.keystore.password", "ks-secret", "ssl.key.password", "key-secret",
			"ssl.keystore.location", testcerts.Write(t, dir, "ks.jks", jksKeystoreBytes(t, leaf, ca, "ks-secret", "key-secret"))},
	}
	for name, kv := range cases {
		t.Run(name, func(t *testing.T) {
			srv, err := ServerConfig(propsOf(kv...))
			if err != nil {
				t.Fatalf("ServerConfig: %v", err)
			}
			_, cs, err := handshake(t, srv, clientFor(t, ca))
			if err != nil {
				t.Fatalf("handshake: %v", err)
			}
			if got := cs.PeerCertificates[0].SerialNumber; got.Cmp(leaf.Cert.SerialNumber) != 0 {
				t.Fatalf("served serial %v, want %v", got, leaf.Cert.SerialNumber)
			}
			if len(cs.PeerCertificates) != 2 {
				t.Fatalf("served %d certificates, want the chain of 2", len(cs.PeerCertificates))
			}
		})
	}
}

func TestTruststoreTypes(t *testing.T) {
	ca := testcerts.NewCA(t)
	other := testcerts.NewCA(t)
	leaf := ca.Server(t, "broker1")
	dir := t.TempDir()
	srv, err := ServerConfig(propsOf("ssl.keystore.type", "PEM", "ssl.keystore.location", testcerts.Write(t, dir, "ks.pem", leaf.KeystorePEM())))
	if err != nil {
		t.Fatal(err)
	}
	stores := map[string]func(*testcerts.CA) []string{
		"PEM file": func(c *testcerts.CA) []string {
			return []string{"ssl.truststore.type", "PEM", "ssl.truststore.location", testcerts.Write(t, t.TempDir(), "ts.pem", c.CertPEM)}
		},
		"PEM inline": func(c *testcerts.CA) []string {
			return []string{"ssl.truststore.type", "PEM", "ssl.truststore.certificates", string(c.CertPEM)}
		},
		"PKCS12": func(c *testcerts.CA) []string {
			return []string{"ssl.truststore.type", "PKCS12", "ssl.truststore.password", "ts",
				"ssl.truststore.location", testcerts.Write(t, t.TempDir(), "ts.p12", pkcs12Truststore(t, c, "ts"))}
		},
		"JKS": func(c *testcerts.CA) []string {
			return []string{"ssl.truststore.type", "JKS", "ssl.truststore.password", "ts",
				"ssl.truststore.location", testcerts.Write(t, t.TempDir(), "ts.jks", jksTruststoreBytes(t, c, "ts"))}
		},
	}
	for name, kv := range stores {
		t.Run(name, func(t *testing.T) {
			for _, trust := range []*testcerts.CA{ca, other} {
				cfg, err := ClientConfig(propsOf(append([]string{"security.protocol", "SASL_SSL"}, kv(trust)...)...))
				if err != nil {
					t.Fatalf("ClientConfig: %v", err)
				}
				cfg.ServerName = "localhost"
				_, _, err = handshake(t, srv, cfg)
				if trust == ca && err != nil {
					t.Fatalf("handshake trusting the broker's CA: %v", err)
				}
				if trust == other && err == nil {
					t.Fatal("handshake succeeded trusting only another CA")
				}
			}
		})
	}
}

func TestClientConfigPlaintext(t *testing.T) {
	for _, sp := range []string{"", "PLAINTEXT", "SASL_PLAINTEXT", "sasl_plaintext"} {
		cfg, err := ClientConfig(propsOf("security.protocol", sp))
		if err != nil || cfg != nil {
			t.Fatalf("security.protocol=%q: %v, %v; want nil, nil", sp, cfg, err)
		}
	}
	if _, err := ClientConfig(propsOf("security.protocol", "TLS")); err == nil || !strings.Contains(err.Error(), "security.protocol") {
		t.Fatalf("security.protocol=TLS: %v", err)
	}
}

func TestClientAuth(t *testing.T) {
	ca := testcerts.NewCA(t)
	leaf := ca.Server(t, "broker1")
	client := ca.Client(t, "alice", pkix.Name{CommonName: "alice", OrganizationalUnit: []string{"apps"}, Organization: []string{"Example, Inc."}})
	stranger := testcerts.NewCA(t).Client(t, "mallory", pkix.Name{CommonName: "mallory"})
	dir := t.TempDir()
	ks := testcerts.Write(t, dir, "ks.pem", leaf.KeystorePEM())
	ts := testcerts.Write(t, dir, "ts.pem", ca.CertPEM)
	withCert := func(l testcerts.Pair) *tls.Config {
		c := clientFor(t, ca)
		// Sent whatever CAs the server names (Go's client would
		// otherwise withhold a certificate of a CA the server does not
		// list).
		cert := &tls.Certificate{Certificate: [][]byte{l.Cert.Raw}, PrivateKey: l.Key(t)}
		c.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return cert, nil }
		return c
	}
	for _, tc := range []struct {
		auth      string
		client    *tls.Config
		ok        bool
		principal string
	}{
		{"none", withCert(client), true, ""},
		{"requested", clientFor(t, ca), true, ""},
		{"requested", withCert(client), true, `User:CN=alice,OU=apps,O=Example\, Inc.`},
		{"requested", withCert(stranger), false, ""},
		{"required", clientFor(t, ca), false, ""},
		{"required", withCert(client), true, `User:CN=alice,OU=apps,O=Example\, Inc.`},
		{"required", withCert(stranger), false, ""},
	} {
		s, err := NewServer(propsOf("ssl.keystore.type", "PEM", "ssl.keystore.location", ks,
			"ssl.truststore.type", "PEM", "ssl.truststore.location", ts, "ssl.client.auth", tc.auth), Options{})
		if err != nil {
			t.Fatal(err)
		}
		ss, _, err := handshake(t, s.Config(), tc.client)
		if (err == nil) != tc.ok {
			t.Fatalf("ssl.client.auth=%s, client %d certs: handshake error %v, want ok=%v", tc.auth, len(tc.client.Certificates), err, tc.ok)
		}
		if err != nil {
			continue
		}
		p, ok, err := s.Principal(ss)
		if err != nil || ok != (tc.principal != "") || p != tc.principal {
			t.Fatalf("ssl.client.auth=%s: principal %q, %v, %v; want %q", tc.auth, p, ok, err, tc.principal)
		}
	}
	if _, err := NewServer(propsOf("ssl.keystore.type", "PEM", "ssl.keystore.location", ks, "ssl.client.auth", "want"), Options{}); err == nil ||
		!strings.Contains(err.Error(), "ssl.client.auth") {
		t.Fatalf("ssl.client.auth=want: %v", err)
	}
}

func TestPrincipalMappingRulesOnHandshake(t *testing.T) {
	ca := testcerts.NewCA(t)
	leaf := ca.Server(t, "broker1")
	client := ca.Client(t, "Alice", pkix.Name{CommonName: "Alice", OrganizationalUnit: []string{"ServiceUsers"}})
	dir := t.TempDir()
	kv := []string{"ssl.keystore.type", "PEM", "ssl.keystore.location", testcerts.Write(t, dir, "ks.pem", leaf.KeystorePEM()),
		"ssl.truststore.type", "PEM", "ssl.truststore.location", testcerts.Write(t, dir, "ts.pem", ca.CertPEM), "ssl.client.auth", "required"}
	cc := clientFor(t, ca)
	cc.Certificates = []tls.Certificate{{Certificate: [][]byte{client.Cert.Raw}, PrivateKey: client.Key(t)}}
	for rules, want := range map[string]string{
		"RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/L,DEFAULT": "User:alice",
		"RULE:^CN=(.*?),OU=Admins$/$1/,DEFAULT":          "User:CN=Alice,OU=ServiceUsers",
		"RULE:^CN=(.*?),OU=Admins$/$1/":                  "",
	} {
		s, err := NewServer(propsOf(append(kv, "ssl.principal.mapping.rules", rules)...), Options{})
		if err != nil {
			t.Fatal(err)
		}
		ss, _, err := handshake(t, s.Config(), cc)
		if err != nil {
			t.Fatal(err)
		}
		p, ok, err := s.Principal(ss)
		if want == "" {
			var nm *NoMatchingRule
			if !errors.As(err, &nm) || ok {
				t.Fatalf("rules %q: %q, %v, %v; want a NoMatchingRule error", rules, p, ok, err)
			}
			continue
		}
		if err != nil || p != want {
			t.Fatalf("rules %q: %q, %v; want %q", rules, p, err, want)
		}
	}
	if _, err := NewServer(propsOf(append(kv, "ssl.principal.mapping.rules", "RULE:x")...), Options{}); err == nil ||
		!strings.Contains(err.Error(), "ssl.principal.mapping.rules") {
		t.Fatalf("bad rules: %v", err)
	}
}

func TestRefusals(t *testing.T) {
	ca := testcerts.NewCA(t)
	leaf := ca.Server(t, "broker1")
	dir := t.TempDir()
	ks := testcerts.Write(t, dir, "ks.pem", leaf.KeystorePEM())
	block, _ := pem.Decode(leaf.KeyPEM)
	encrypted := pem.EncodeToMemory(&pem.Block{Type: "ENCRYPTED PRIVATE KEY", Bytes: block.Bytes})
	encKS := testcerts.Write(t, dir, "enc.pem", append(encrypted, leaf.CertPEM...))
	pemKS := []string{"ssl.keystore.type", "PEM", "ssl.keystore.location", ks}
	for _, tc := range []struct {
		kv   []string
		want string
	}{
		{nil, "needs a keystore"},
		{[]string{"ssl.keystore.type", "PEM", "ssl.keystore.location", encKS, "ssl.key.password", "x"}, "ssl.key.password"},
		{[]string{"ssl.keystore.type", "PEM", "ssl.keystore.certificate.chain", string(leaf.CertPEM), "ssl.keystore.key", string(encrypted)}, "ssl.key.password"},
		{append(pemKS, "ssl.enabled.protocols", "TLSv1.1,TLSv1.2"), "TLSv1.1 is not supported"},
		{append(pemKS, "ssl.enabled.protocols", "TLSv1"), "TLSv1 is not supported"},
		{append(pemKS, "ssl.protocol", "TLSv1.1"), "ssl.protocol=TLSv1.1"},
		{append(pemKS, "ssl.enabled.protocols", "TLSv1.3", "ssl.protocol", "TLSv1.2"), "allows no version"},
		{append(pemKS, "ssl.cipher.suites", "TLS_FOO"), "unknown cipher suite"},
		{append(pemKS, "ssl.cipher.suites", "TLS_RSA_WITH_RC4_128_SHA"), "insecure"},
		{append(pemKS, "ssl.keystore.password", "x"), "cannot be set for a PEM keystore"},
		{[]string{"ssl.keystore.type", "PKCS12", "ssl.keystore.location", ks, "ssl.keystore.password", "x"}, "PKCS12"},
		{[]string{"ssl.keystore.type", "PEM12", "ssl.keystore.location", ks}, "supported types"},
		{[]string{"ssl.keystore.type", "PEM", "ssl.keystore.location", dir + "/missing.pem"}, "ssl.keystore.location"},
		{[]string{"ssl.keystore.location", ks, "ssl.keystore.certificate.chain", string(leaf.CertPEM), "ssl.keystore.key", string(leaf.KeyPEM)}, "exclusive"},
		{[]string{"ssl.keystore.certificate.chain", string(leaf.CertPEM), "ssl.keystore.key", string(leaf.KeyPEM)}, "need ssl.keystore.type=PEM"},
		{[]string{"ssl.keystore.type", "PEM", "ssl.keystore.certificate.chain", string(leaf.CertPEM), "ssl.keystore.key", string(ca.Server(t, "other").KeyPEM)}, "does not match"},
		{append(pemKS, "ssl.truststore.type", "PEM", "ssl.truststore.location", ks, "ssl.truststore.password", "x"), "PEM truststore"},
	} {
		_, err := ServerConfig(propsOf(tc.kv...))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: error %v, want one containing %q", tc.kv, err, tc.want)
		}
		if err != nil && strings.Contains(err.Error(), "PRIVATE KEY") {
			t.Errorf("error shows key material: %v", err)
		}
	}
}

func TestVersionsAndSuites(t *testing.T) {
	ca := testcerts.NewCA(t)
	leaf := ca.Server(t, "broker1")
	ks := testcerts.Write(t, t.TempDir(), "ks.pem", leaf.KeystorePEM())
	srv := func(kv ...string) *tls.Config {
		c, err := ServerConfig(propsOf(append([]string{"ssl.keystore.type", "PEM", "ssl.keystore.location", ks}, kv...)...))
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	_, cs, err := handshake(t, srv(), clientFor(t, ca))
	if err != nil || cs.Version != tls.VersionTLS13 {
		t.Fatalf("defaults: version %x, %v; want TLS 1.3", cs.Version, err)
	}
	_, cs, err = handshake(t, srv(), clientFor(t, ca, "ssl.protocol", "TLSv1.2"))
	if err != nil || cs.Version != tls.VersionTLS12 {
		t.Fatalf("client ssl.protocol=TLSv1.2: version %x, %v; want TLS 1.2", cs.Version, err)
	}
	if _, _, err = handshake(t, srv("ssl.enabled.protocols", "TLSv1.3"), clientFor(t, ca, "ssl.enabled.protocols", "TLSv1.2")); err == nil {
		t.Fatal("a TLS 1.3-only server accepted a TLS 1.2-only client")
	}
	suite := "TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384"
	_, cs, err = handshake(t, srv("ssl.cipher.suites", suite+", TLS_AES_128_GCM_SHA256"), clientFor(t, ca, "ssl.enabled.protocols", "TLSv1.2"))
	if err != nil || tls.CipherSuiteName(cs.CipherSuite) != suite {
		t.Fatalf("ssl.cipher.suites: negotiated %s, %v; want %s", tls.CipherSuiteName(cs.CipherSuite), err, suite)
	}
	if _, _, err = handshake(t, srv("ssl.cipher.suites", "TLS_AES_128_GCM_SHA256"), clientFor(t, ca, "ssl.enabled.protocols", "TLSv1.2")); err == nil {
		t.Fatal("TLS 1.3 suites only: a TLS 1.2 client was accepted")
	}
}

func TestEndpointIdentification(t *testing.T) {
	ca := testcerts.NewCA(t)
	leaf := ca.Server(t, "broker1")
	srv, err := ServerConfig(propsOf("ssl.keystore.type", "PEM", "ssl.keystore.location", testcerts.Write(t, t.TempDir(), "ks.pem", leaf.KeystorePEM())))
	if err != nil {
		t.Fatal(err)
	}
	wrongHost := func(c *tls.Config) *tls.Config { c.ServerName = "broker.example.com"; return c }
	if _, _, err := handshake(t, srv, wrongHost(clientFor(t, ca))); err == nil {
		t.Fatal("default (https): a certificate for another host was accepted")
	}
	if _, _, err := handshake(t, srv, wrongHost(clientFor(t, ca, "ssl.endpoint.identification.algorithm", "HTTPS"))); err == nil {
		t.Fatal("https: a certificate for another host was accepted")
	}
	if _, _, err := handshake(t, srv, wrongHost(clientFor(t, ca, "ssl.endpoint.identification.algorithm", ""))); err != nil {
		t.Fatalf("empty: host name not checked, yet: %v", err)
	}
	other := testcerts.NewCA(t)
	if _, _, err := handshake(t, srv, wrongHost(clientFor(t, other, "ssl.endpoint.identification.algorithm", ""))); err == nil {
		t.Fatal("empty: an untrusted chain was accepted")
	}
	if _, err := ClientConfig(propsOf("security.protocol", "SSL", "ssl.endpoint.identification.algorithm", "ldap")); err == nil {
		t.Fatal("ssl.endpoint.identification.algorithm=ldap accepted")
	}
}

func TestReload(t *testing.T) {
	ca := testcerts.NewCA(t)
	first, second, third := ca.Server(t, "broker1"), ca.Server(t, "broker1"), ca.Server(t, "broker1")
	dir := t.TempDir()
	ksPath := testcerts.Write(t, dir, "ks.pem", first.KeystorePEM())
	var mu sync.Mutex
	now := time.Unix(1000, 0)
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	advance := func() { mu.Lock(); now = now.Add(1100 * time.Millisecond); mu.Unlock() }
	logs := &logbuf.Buffer{}
	s, err := NewServer(propsOf("ssl.keystore.type", "PEM", "ssl.keystore.location", ksPath),
		Options{Now: clock, Logger: slog.New(slog.NewTextHandler(logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	served := func() *x509.Certificate {
		t.Helper()
		_, cs, err := handshake(t, s.Config(), clientFor(t, ca))
		if err != nil {
			t.Fatalf("handshake: %v", err)
		}
		return cs.PeerCertificates[0]
	}
	if served().SerialNumber.Cmp(first.Cert.SerialNumber) != 0 {
		t.Fatal("not serving the first certificate")
	}
	replace(t, ksPath, second.KeystorePEM())
	if served().SerialNumber.Cmp(first.Cert.SerialNumber) != 0 {
		t.Fatal("reloaded before the check interval passed")
	}
	advance()
	if got := served().SerialNumber; got.Cmp(second.Cert.SerialNumber) != 0 {
		t.Fatalf("after the change and the interval: serial %v, want the second %v", got, second.Cert.SerialNumber)
	}
	// A broken file keeps the current certificate and is logged once.
	replace(t, ksPath, []byte("-----BEGIN GARBAGE-----\n"))
	for range 3 {
		advance()
		if got := served().SerialNumber; got.Cmp(second.Cert.SerialNumber) != 0 {
			t.Fatalf("a broken keystore replaced the certificate: serial %v", got)
		}
	}
	if n := strings.Count(logs.String(), "reload failed"); n != 1 {
		t.Fatalf("%d reload failure lines, want 1:\n%s", n, logs.String())
	}
	// The same content again (a touch) is no reload; new content is.
	replace(t, ksPath, third.KeystorePEM())
	advance()
	if got := served().SerialNumber; got.Cmp(third.Cert.SerialNumber) != 0 {
		t.Fatalf("after fixing the file: serial %v, want the third", got)
	}
	reloads := strings.Count(logs.String(), "reloaded")
	replace(t, ksPath, third.KeystorePEM())
	advance()
	served()
	if n := strings.Count(logs.String(), "reloaded"); n != reloads {
		t.Fatalf("rewriting identical content reloaded (%d lines, want %d)", n, reloads)
	}
	if strings.Contains(logs.String(), "PRIVATE KEY") {
		t.Fatal("a log line shows key material")
	}
}

func TestReloadTruststore(t *testing.T) {
	ca, ca2 := testcerts.NewCA(t), testcerts.NewCA(t)
	leaf := ca.Server(t, "broker1")
	client := ca2.Client(t, "bob", pkix.Name{CommonName: "bob"})
	dir := t.TempDir()
	ts := testcerts.Write(t, dir, "ts.pem", ca.CertPEM)
	now := time.Unix(1000, 0)
	s, err := NewServer(propsOf("ssl.keystore.type", "PEM", "ssl.keystore.location", testcerts.Write(t, dir, "ks.pem", leaf.KeystorePEM()),
		"ssl.truststore.type", "PEM", "ssl.truststore.location", ts, "ssl.client.auth", "required"),
		Options{Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	cc := clientFor(t, ca)
	cc.Certificates = []tls.Certificate{{Certificate: [][]byte{client.Cert.Raw}, PrivateKey: client.Key(t)}}
	if _, _, err := handshake(t, s.Config(), cc); err == nil {
		t.Fatal("a client of an untrusted CA was accepted")
	}
	replace(t, ts, append(append([]byte(nil), ca.CertPEM...), ca2.CertPEM...))
	now = now.Add(2 * time.Second)
	ss, _, err := handshake(t, s.Config(), cc)
	if err != nil {
		t.Fatalf("after adding its CA to the truststore: %v", err)
	}
	if p, _, _ := s.Principal(ss); p != "User:CN=bob" {
		t.Fatalf("principal %q", p)
	}
}

// TestInlinePEMAsKafkaWritesIt: KIP-651's inline values in a
// server.properties, the PEM joined into one line by backslash
// continuations (Java's .properties drops the newlines), load as files do;
// a legacy encrypted key (Proc-Type headers) is refused naming
// ssl.key.password.
func TestInlinePEMAsKafkaWritesIt(t *testing.T) {
	ca := testcerts.NewCA(t)
	leaf := ca.Server(t, "broker1")
	continued := func(pemText []byte) string {
		lines := strings.Split(strings.TrimSpace(string(pemText)), "\n")
		return strings.Join(lines, " \\\n    ")
	}
	text := "ssl.keystore.type=PEM\nssl.keystore.certificate.chain=" + continued(leaf.CertPEM) +
		"\nssl.keystore.key=" + continued(leaf.KeyPEM) + "\n"
	p, err := props.Parse(strings.NewReader(text))
	if err != nil {
		t.Fatal(err)
	}
	if v, _ := p.Get("ssl.keystore.key"); strings.Contains(v, "\n") {
		t.Fatalf("the test's value still has newlines: %q", v)
	}
	srv, err := ServerConfig(p)
	if err != nil {
		t.Fatalf("ServerConfig: %v", err)
	}
	if _, cs, err := handshake(t, srv, clientFor(t, ca)); err != nil || cs.PeerCertificates[0].SerialNumber.Cmp(leaf.Cert.SerialNumber) != 0 {
		t.Fatalf("handshake: %v", err)
	}
	legacy := "-----BEGIN RSA PRIVATE KEY-----\nProc-Type: 4,ENCRYPTED\nDEK-Info: AES-128-CBC,00112233445566778899AABBCCDDEEFF\n\nAAAA\n-----END RSA PRIVATE KEY-----\n"
	_, err = ServerConfig(propsOf("ssl.keystore.type", "PEM", "ssl.keystore.certificate.chain", string(leaf.CertPEM), "ssl.keystore.key", legacy))
	if err == nil || !strings.Contains(err.Error(), "ssl.key.password") {
		t.Fatalf("legacy encrypted key: %v", err)
	}
}

// TestClientKeystoreForMTLS: a client's ssl.keystore.* is its certificate
// for a broker that requires one (PEM file and JKS).
func TestClientKeystoreForMTLS(t *testing.T) {
	ca := testcerts.NewCA(t)
	leaf := ca.Server(t, "broker1")
	app := ca.Client(t, "app", pkix.Name{CommonName: "app", OrganizationalUnit: []string{"clients"}})
	dir := t.TempDir()
	s, err := NewServer(propsOf("ssl.keystore.type", "PEM", "ssl.keystore.location", leaf.KeystoreFile,
		"ssl.truststore.type", "PEM", "ssl.truststore.location", ca.File, "ssl.client.auth", "required"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	for name, kv := range map[string][]string{
		"PEM": {"ssl.keystore.type", "PEM", "ssl.keystore.location", app.KeystoreFile},
		"JKS": {"ssl.keystore.type", "JKS", "ssl.keystore.password", "pw",
			"ssl.keystore.location", testcerts.Write(t, dir, "app.jks", jksKeystoreBytes(t, app, ca, "pw", "pw"))},
	} {
		ss, _, err := handshake(t, s.Config(), clientFor(t, ca, kv...))
		if err != nil {
			t.Fatalf("%s client keystore: %v", name, err)
		}
		if p, ok, err := s.Principal(ss); err != nil || !ok || p != "User:CN=app,OU=clients" {
			t.Fatalf("%s client keystore: principal %q %v %v", name, p, ok, err)
		}
	}
}

package tlsconf

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	keystore "github.com/pavlo-v-chernykh/keystore-go/v4"
	"software.sslmate.com/src/go-pkcs12"

	"github.com/verbatim-kafka/verbatim/internal/testcerts"
	"github.com/verbatim-kafka/verbatim/props"
)

func propsOf(kv ...string) *props.Props {
	p := props.New()
	for i := 0; i+1 < len(kv); i += 2 {
		p.Set(kv[i], kv[i+1])
	}
	return p
}

// handshake runs a TLS handshake over a pipe and returns both sides'
// states (or the first error).
func handshake(t *testing.T, server, client *tls.Config) (tls.ConnectionState, tls.ConnectionState, error) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	type result struct {
		c   *tls.Conn
		err error
	}
	sc := make(chan result, 1)
	go func() {
		nc, err := ln.Accept()
		if err != nil {
			sc <- result{err: err}
			return
		}
		_ = nc.SetDeadline(time.Now().Add(10 * time.Second))
		c := tls.Server(nc, server)
		// The server's handshake includes the client's certificate and
		// Finished (in TLS 1.3 the client is done before), so a refused
		// client certificate is its error.
		sc <- result{c, c.Handshake()}
	}()
	nc, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	_ = nc.SetDeadline(time.Now().Add(10 * time.Second))
	cli := tls.Client(nc, client)
	cerr := cli.Handshake()
	sr := <-sc
	if sr.c != nil {
		defer sr.c.Close()
	}
	if sr.err != nil {
		return tls.ConnectionState{}, tls.ConnectionState{}, sr.err
	}
	if cerr != nil {
		return tls.ConnectionState{}, tls.ConnectionState{}, cerr
	}
	return sr.c.ConnectionState(), cli.ConnectionState(), nil
}

func clientFor(t *testing.T, ca *testcerts.CA, extra ...string) *tls.Config {
	t.Helper()
	dir := t.TempDir()
	kv := append([]string{"security.protocol", "SSL", "ssl.truststore.type", "PEM",
		"ssl.truststore.location", testcerts.Write(t, dir, "ca.pem", ca.CertPEM)}, extra...)
	c, err := ClientConfig(propsOf(kv...))
	if err != nil {
		t.Fatalf("ClientConfig: %v", err)
	}
	c.ServerName = "localhost"
	return c
}

func pkcs12Keystore(t *testing.T, l testcerts.Pair, ca *testcerts.CA, pw string) []byte {
	t.Helper()
	data, err := pkcs12.Modern.Encode(l.Key(t), l.Cert, []*x509.Certificate{ca.Cert}, pw)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func pkcs12Truststore(t *testing.T, ca *testcerts.CA, pw string) []byte {
	t.Helper()
	data, err := pkcs12.Modern.EncodeTrustStore([]*x509.Certificate{ca.Cert}, pw)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func jksKeystoreBytes(t *testing.T, l testcerts.Pair, ca *testcerts.CA, storePW, keyPW string) []byte {
	t.Helper()
	ks := keystore.New()
	der, err := x509.MarshalPKCS8PrivateKey(l.Key(t))
	if err != nil {
		t.Fatal(err)
	}
	e := keystore.PrivateKeyEntry{CreationTime: time.Now(), PrivateKey: der, CertificateChain: []keystore.Certificate{
		{Type: "X509", Content: l.Cert.Raw}, {Type: "X509", Content: ca.Cert.Raw}}}
	if err := ks.SetPrivateKeyEntry("broker", e, []byte(keyPW)); err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := ks.Store(&buf, []byte(storePW)); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func jksTruststoreBytes(t *testing.T, ca *testcerts.CA, pw string) []byte {
	t.Helper()
	ks := keystore.New()
	if err := ks.SetTrustedCertificateEntry("ca", keystore.TrustedCertificateEntry{CreationTime: time.Now(),
		Certificate: keystore.Certificate{Type: "X509", Content: ca.Cert.Raw}}); err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := ks.Store(&buf, []byte(pw)); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// replace writes data to path atomically (a rename), as an operator's
// deployment tool would.
func replace(t *testing.T, path string, data []byte) {
	t.Helper()
	tmp := filepath.Join(filepath.Dir(path), ".tmp-"+filepath.Base(path))
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

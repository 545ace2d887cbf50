package testcerts

import (
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"testing"
)

func TestChainVerifies(t *testing.T) {
	ca := NewCA(t)
	srv := ca.Server(t, "broker")
	cli := ca.Client(t, "alice", pkix.Name{CommonName: "alice", Organization: []string{"eng"}})
	pool := x509.NewCertPool()
	pool.AddCert(ca.Cert)
	if _, err := srv.Cert.Verify(x509.VerifyOptions{Roots: pool, DNSName: "localhost"}); err != nil {
		t.Errorf("server cert: %v", err)
	}
	if _, err := cli.Cert.Verify(x509.VerifyOptions{Roots: pool, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
		t.Errorf("client cert: %v", err)
	}
	if _, err := tls.LoadX509KeyPair(srv.CertFile, srv.KeyFile); err != nil {
		t.Errorf("key pair files: %v", err)
	}
	if _, err := tls.LoadX509KeyPair(srv.KeystoreFile, srv.KeystoreFile); err != nil {
		t.Errorf("keystore file: %v", err)
	}
}

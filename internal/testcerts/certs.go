package testcerts

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"
)

// CA is a test certificate authority.
type CA struct {
	Cert    *x509.Certificate
	key     *ecdsa.PrivateKey
	CertPEM []byte
	// File is the CA certificate as a PEM file (a truststore).
	File string
	dir  string
}

// Pair is a certificate and its key.
type Pair struct {
	Cert    *x509.Certificate
	CertPEM []byte // the certificate, then the CA's (the chain)
	KeyPEM  []byte // PKCS#8
	// CertFile and KeyFile hold CertPEM and KeyPEM; KeystoreFile holds
	// the key followed by the chain, Kafka's PEM keystore file layout.
	CertFile, KeyFile, KeystoreFile string
}

var serial atomic.Int64

// NewCA makes a CA whose files live under t.TempDir().
func NewCA(t testing.TB) *CA {
	t.Helper()
	key := newKey(t)
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(serial.Add(1)),
		Subject:               pkix.Name{CommonName: "Verbatim Test CA", Organization: []string{"verbatim-tests"}},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatalf("testcerts: %v", err)
	}
	cert, _ := x509.ParseCertificate(der)
	ca := &CA{Cert: cert, key: key, CertPEM: pemBlock("CERTIFICATE", der), dir: t.TempDir()}
	ca.File = write(t, ca.dir, "ca.pem", ca.CertPEM)
	return ca
}

// Server issues a server certificate for the hosts (IPs or DNS names;
// default 127.0.0.1 and localhost).
func (ca *CA) Server(t testing.TB, name string, hosts ...string) Pair {
	if len(hosts) == 0 {
		hosts = []string{"127.0.0.1", "localhost"}
	}
	return ca.issue(t, name, pkix.Name{CommonName: name, Organization: []string{"verbatim-tests"}}, hosts,
		[]x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth})
}

// Client issues a client certificate with the given subject.
func (ca *CA) Client(t testing.TB, name string, subject pkix.Name) Pair {
	return ca.issue(t, name, subject, nil, []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth})
}

func (ca *CA) issue(t testing.TB, name string, subject pkix.Name, hosts []string, usage []x509.ExtKeyUsage) Pair {
	t.Helper()
	key := newKey(t)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(serial.Add(1)),
		Subject:      subject,
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		ExtKeyUsage:  usage,
	}
	for _, h := range hosts {
		if ip := net.ParseIP(h); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else {
			tmpl.DNSNames = append(tmpl.DNSNames, h)
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatalf("testcerts: %v", err)
	}
	cert, _ := x509.ParseCertificate(der)
	pk, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatalf("testcerts: %v", err)
	}
	p := Pair{Cert: cert, CertPEM: append(pemBlock("CERTIFICATE", der), ca.CertPEM...), KeyPEM: pemBlock("PRIVATE KEY", pk)}
	p.CertFile = write(t, ca.dir, name+".crt.pem", p.CertPEM)
	p.KeyFile = write(t, ca.dir, name+".key.pem", p.KeyPEM)
	p.KeystoreFile = write(t, ca.dir, name+".keystore.pem", append(append([]byte{}, p.KeyPEM...), p.CertPEM...))
	return p
}

func newKey(t testing.TB) *ecdsa.PrivateKey {
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatalf("testcerts: %v", err)
	}
	return k
}

func pemBlock(typ string, der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der})
}

func write(t testing.TB, dir, name string, b []byte) string {
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, b, 0o600); err != nil {
		t.Fatalf("testcerts: %v", err)
	}
	return p
}

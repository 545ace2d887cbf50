// Package testcerts makes certificates for tests at test time: a CA and
// the leaf certificates it signs, as PEM, so that no private key is ever
// committed. It is imported only by _test files and holds no product
// logic; it depends on the standard library only, so any package's tests
// (tlsconf's included) can use it without an import cycle.
package testcerts

import (
	"crypto"
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
	"testing"
	"time"
)

// CA is a certificate authority made for one test.
type CA struct {
	Cert *x509.Certificate
	Key  crypto.Signer
	// PEM is the CA certificate, PEM-encoded (a truststore's content).
	PEM []byte
}

// Leaf is a certificate the CA issued, with its key.
type Leaf struct {
	Cert *x509.Certificate
	Key  crypto.Signer
	// CertPEM is the leaf then the CA certificate (a chain as a keystore
	// holds it); KeyPEM the unencrypted PKCS#8 key.
	CertPEM []byte
	KeyPEM  []byte
}

// Serial returns a fresh random serial number.
func Serial(t testing.TB) *big.Int {
	t.Helper()
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		t.Fatal(err)
	}
	return n.Add(n, big.NewInt(1))
}

func newKey(t testing.TB) *ecdsa.PrivateKey {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// NewCA makes a self-signed CA named cn.
func NewCA(t testing.TB, cn string) *CA {
	t.Helper()
	key := newKey(t)
	tmpl := &x509.Certificate{
		SerialNumber:          Serial(t),
		Subject:               pkix.Name{CommonName: cn, Organization: []string{"Verbatim tests"}},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return &CA{Cert: cert, Key: key, PEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}
}

// Server issues a server certificate for localhost and 127.0.0.1 (usable
// as a client certificate too), with subject CN=cn,OU=ou when ou is set.
func (ca *CA) Server(t testing.TB, cn string) *Leaf {
	t.Helper()
	return ca.Issue(t, pkix.Name{CommonName: cn, OrganizationalUnit: []string{"broker"}, Organization: []string{"Verbatim tests"}})
}

// Issue issues a leaf with the given subject, valid for localhost and
// 127.0.0.1, for server and client authentication.
func (ca *CA) Issue(t testing.TB, subject pkix.Name) *Leaf {
	t.Helper()
	key := newKey(t)
	tmpl := &x509.Certificate{
		SerialNumber: Serial(t),
		Subject:      subject,
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		DNSNames:     []string{"localhost"},
		IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, &key.PublicKey, ca.Key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	chain := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	chain = append(chain, ca.PEM...)
	return &Leaf{Cert: cert, Key: key, CertPEM: chain, KeyPEM: pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kder})}
}

// KeystorePEM is the leaf's key then its chain: the content of a Kafka
// ssl.keystore.type=PEM file.
func (l *Leaf) KeystorePEM() []byte { return append(append([]byte(nil), l.KeyPEM...), l.CertPEM...) }

// Write writes data to dir/name and returns the path.
func Write(t testing.TB, dir, name string, data []byte) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

package testcerts

import (
	"crypto"
	"crypto/x509"
	"encoding/pem"
	"os"
	"path/filepath"
	"testing"
)

// Key parses the pair's private key (for tests that encode it into other
// keystore formats or hand it to crypto/tls).
func (p Pair) Key(t testing.TB) crypto.Signer {
	t.Helper()
	b, _ := pem.Decode(p.KeyPEM)
	if b == nil {
		t.Fatal("testcerts: no PEM key")
	}
	k, err := x509.ParsePKCS8PrivateKey(b.Bytes)
	if err != nil {
		t.Fatalf("testcerts: %v", err)
	}
	return k.(crypto.Signer)
}

// KeystorePEM is the key followed by the chain: the content of a Kafka
// ssl.keystore.type=PEM file (what KeystoreFile holds).
func (p Pair) KeystorePEM() []byte { return append(append([]byte(nil), p.KeyPEM...), p.CertPEM...) }

// Write writes data to dir/name (mode 0600) and returns the path.
func Write(t testing.TB, dir, name string, data []byte) string {
	t.Helper()
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatalf("testcerts: %v", err)
	}
	return path
}

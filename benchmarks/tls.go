package benchmarks

// TLS rows of bench-ingest: Verbatim on an SSL listener against the
// reference sink speaking TLS too, both with the same self-signed
// certificate made at run time (no key is committed), so the ratio is the
// broker's cost over the same cipher work.

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// Security protocols of bench-ingest's -security flag.
const (
	SecurityPlaintext = "plaintext"
	SecuritySSL       = "ssl"
)

// TLSMaterial is a run's certificate: the files the servers read and the
// client side trusting it.
type TLSMaterial struct {
	Dir      string
	CertFile string // PEM certificate
	KeyFile  string // PEM PKCS#8 key
	// ConfigFile is a server.properties for `verbatim serve --config`:
	// the PEM keystore (listeners come from --override).
	ConfigFile string
	Client     *tls.Config
}

// NewTLSMaterial makes a self-signed certificate for 127.0.0.1 and
// localhost under a new directory in dir.
func NewTLSMaterial(dir string) (*TLSMaterial, error) {
	d, err := os.MkdirTemp(dir, "tls-")
	if err != nil {
		return nil, err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()),
		Subject:      pkix.Name{CommonName: "bench-ingest"},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(48 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IsCA:         true, BasicConstraintsValid: true,
		DNSNames:    []string{"localhost"},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, err
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	kder, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, err
	}
	m := &TLSMaterial{Dir: d, CertFile: filepath.Join(d, "cert.pem"), KeyFile: filepath.Join(d, "key.pem"),
		ConfigFile: filepath.Join(d, "server.properties")}
	certPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	keyPEM := pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kder})
	for path, data := range map[string][]byte{
		m.CertFile:                       certPEM,
		m.KeyFile:                        keyPEM,
		filepath.Join(d, "keystore.pem"): append(append([]byte(nil), keyPEM...), certPEM...),
		m.ConfigFile: fmt.Appendf(nil, "ssl.keystore.type=PEM\nssl.keystore.location=%s\n",
			filepath.Join(d, "keystore.pem")),
	} {
		if err := os.WriteFile(path, data, 0o600); err != nil {
			return nil, err
		}
	}
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	m.Client = &tls.Config{RootCAs: pool, ServerName: "127.0.0.1", MinVersion: tls.VersionTLS12}
	return m, nil
}

// Close removes the material's files.
func (m *TLSMaterial) Close() { os.RemoveAll(m.Dir) }

// SinkListener wraps ln in TLS with the certificate at certFile/keyFile
// (the sink's --tls-cert/--tls-key).
func SinkListener(ln net.Listener, certFile, keyFile string) (net.Listener, error) {
	c, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return nil, err
	}
	return tls.NewListener(ln, &tls.Config{Certificates: []tls.Certificate{c}, MinVersion: tls.VersionTLS12}), nil
}

// securityTLS is the TLS client config of a security protocol's runs.
func (o *IngestOptions) securityTLS() *tls.Config {
	if o.security == SecuritySSL && o.tls != nil {
		return o.tls.Client
	}
	return nil
}

// verbatimSecurityArgs are serve's extra arguments for the security
// protocol of the running scenario: the SSL listener replaces --listen.
func (o *IngestOptions) verbatimSecurityArgs(argv []string) []string {
	if o.security != SecuritySSL {
		return argv
	}
	out := make([]string, 0, len(argv)+4)
	for i := 0; i < len(argv); i++ {
		if argv[i] == "--listen" && i+1 < len(argv) {
			i++
			continue
		}
		out = append(out, argv[i])
	}
	return append(out, "--config", o.tls.ConfigFile, "--override", "listeners=SSL://{addr}")
}

// sinkSecurityArgs are the sink's extra arguments.
func (o *IngestOptions) sinkSecurityArgs() []string {
	if o.security != SecuritySSL {
		return nil
	}
	return []string{"--tls-cert", o.tls.CertFile, "--tls-key", o.tls.KeyFile}
}

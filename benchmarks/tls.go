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
	"encoding/binary"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/plain"
)

// Security protocols of bench-ingest's -security flag.
const (
	SecurityPlaintext = "plaintext"
	SecuritySSL       = "ssl"
	// SecuritySASLSSL runs Verbatim on a SASL_SSL listener (SASL PLAIN
	// per connection, then the same TLS stream); the sink speaks TLS
	// only: SASL costs one exchange per connection, not per byte.
	SecuritySASLSSL = "sasl_ssl"
)

// The PLAIN user of the sasl_ssl runs.
const (
	benchSASLUser     = "bench"
	benchSASLPassword = "bench-secret"
)

// TLSMaterial is a run's certificate: the files the servers read and the
// client side trusting it.
type TLSMaterial struct {
	Dir      string
	CertFile string // PEM certificate
	KeyFile  string // PEM PKCS#8 key
	// ConfigFile and SASLConfigFile are server.properties files for
	// `verbatim serve --config`: the PEM keystore, and for SASL_SSL also
	// PLAIN with the bench user (listeners come from --override).
	ConfigFile, SASLConfigFile string
	Client                     *tls.Config
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
		ConfigFile: filepath.Join(d, "ssl.properties"), SASLConfigFile: filepath.Join(d, "sasl_ssl.properties")}
	certPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	keyPEM := pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kder})
	for path, data := range map[string][]byte{
		m.CertFile:                       certPEM,
		m.KeyFile:                        keyPEM,
		filepath.Join(d, "keystore.pem"): append(append([]byte(nil), keyPEM...), certPEM...),
		m.ConfigFile:                     fmt.Appendf(nil, "ssl.keystore.type=PEM\nssl.keystore.location=%s\n", filepath.Join(d, "keystore.pem")),
		m.SASLConfigFile: fmt.Appendf(nil, "ssl.keystore.type=PEM\nssl.keystore.location=%s\nsasl.enabled.mechanisms=PLAIN\n"+
			"listener.name.sasl_ssl.plain.sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required user_%s=\"%s\";\n",
			filepath.Join(d, "keystore.pem"), benchSASLUser, benchSASLPassword),
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

// securityTLS is the TLS client config of the running scenario's
// security protocol (nil: plaintext).
func (o *IngestOptions) securityTLS() *tls.Config {
	if o.security != SecurityPlaintext && o.security != "" && o.tls != nil {
		return o.tls.Client
	}
	return nil
}

// verbatimSecurityArgs are serve's arguments for the security protocol of
// the running scenario: the SSL or SASL_SSL listener replaces --listen.
func (o *IngestOptions) verbatimSecurityArgs(argv []string) []string {
	listener := map[string]string{SecuritySSL: "SSL", SecuritySASLSSL: "SASL_SSL"}[o.security]
	if listener == "" {
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
	file := o.tls.ConfigFile
	if o.security == SecuritySASLSSL {
		file = o.tls.SASLConfigFile
	}
	return append(out, "--config", file, "--override", "listeners="+listener+"://{addr}")
}

// sinkSecurityArgs are the sink's extra arguments: TLS for ssl and
// sasl_ssl alike.
func (o *IngestOptions) sinkSecurityArgs() []string {
	if o.securityTLS() == nil {
		return nil
	}
	return []string{"--tls-cert", o.tls.CertFile, "--tls-key", o.tls.KeyFile}
}

// verbatimSASL is the per-connection authentication of the running
// scenario against Verbatim (nil unless sasl_ssl).
func (o *IngestOptions) verbatimSASL() func(net.Conn) error {
	if o.security != SecuritySASLSSL {
		return nil
	}
	return func(c net.Conn) error { return SASLPlain(c, benchSASLUser, benchSASLPassword) }
}

// verbatimSASLMechanism is the SASL login of the thin client's
// connections (the mirror writer's registration) under SecuritySASLSSL.
func (o *IngestOptions) verbatimSASLMechanism() sasl.Mechanism {
	if o.security != SecuritySASLSSL {
		return nil
	}
	return plain.Auth{User: benchSASLUser, Pass: benchSASLPassword}.AsMechanism()
}

// verbatimAdminOpts are the kgo options of the admin client creating the
// topic on Verbatim.
func (o *IngestOptions) verbatimAdminOpts() []kgo.Opt {
	var opts []kgo.Opt
	if c := o.securityTLS(); c != nil {
		opts = append(opts, kgo.DialTLSConfig(c))
	}
	if o.security == SecuritySASLSSL {
		opts = append(opts, kgo.SASL(plain.Auth{User: benchSASLUser, Pass: benchSASLPassword}.AsMechanism()))
	}
	return opts
}

// SASLPlain authenticates c with SASL PLAIN: SaslHandshake v1, then
// SaslAuthenticate v2, as Kafka clients do.
func SASLPlain(c net.Conn, user, pass string) error {
	hs := kmsg.NewPtrSASLHandshakeRequest()
	hs.Version, hs.Mechanism = 1, "PLAIN"
	hsResp := kmsg.NewPtrSASLHandshakeResponse()
	hsResp.Version = 1
	if err := roundTrip(c, hs, hsResp, 1); err != nil {
		return fmt.Errorf("SaslHandshake: %w", err)
	}
	if hsResp.ErrorCode != 0 {
		return fmt.Errorf("SaslHandshake: error %d", hsResp.ErrorCode)
	}
	au := kmsg.NewPtrSASLAuthenticateRequest()
	au.Version, au.SASLAuthBytes = 2, []byte("\x00"+user+"\x00"+pass)
	auResp := kmsg.NewPtrSASLAuthenticateResponse()
	auResp.Version = 2
	if err := roundTrip(c, au, auResp, 2); err != nil {
		return fmt.Errorf("SaslAuthenticate: %w", err)
	}
	if auResp.ErrorCode != 0 {
		return fmt.Errorf("SaslAuthenticate: error %d", auResp.ErrorCode)
	}
	return nil
}

// roundTrip writes req (request header v1, or v2 for flexible versions)
// and reads resp.
func roundTrip(c net.Conn, req kmsg.Request, resp kmsg.Response, version int16) error {
	flexible := req.IsFlexible()
	frame := make([]byte, 4, 128)
	frame = binary.BigEndian.AppendUint16(frame, uint16(req.Key()))
	frame = binary.BigEndian.AppendUint16(frame, uint16(version))
	frame = binary.BigEndian.AppendUint32(frame, 1)
	client := "bench-ingest"
	frame = binary.BigEndian.AppendUint16(frame, uint16(len(client)))
	frame = append(frame, client...)
	if flexible {
		frame = append(frame, 0)
	}
	frame = req.AppendTo(frame)
	binary.BigEndian.PutUint32(frame, uint32(len(frame)-4))
	if _, err := c.Write(frame); err != nil {
		return err
	}
	var hdr [4]byte
	if _, err := io.ReadFull(c, hdr[:]); err != nil {
		return err
	}
	n := binary.BigEndian.Uint32(hdr[:])
	if n < 4 || n > 1<<20 {
		return fmt.Errorf("response of %d bytes", n)
	}
	body := make([]byte, n)
	if _, err := io.ReadFull(c, body); err != nil {
		return err
	}
	body = body[4:] // correlation id
	if flexible {
		if len(body) == 0 {
			return errors.New("short response")
		}
		body = body[1:] // response header v1 tagged fields (none)
	}
	return resp.ReadFrom(body)
}

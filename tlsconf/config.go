package tlsconf

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"strings"

	"github.com/verbatim-kafka/verbatim/props"
)

// versions reads ssl.enabled.protocols (default TLSv1.2,TLSv1.3) and
// ssl.protocol (default TLSv1.3; TLSv1.2 caps the version at 1.2 as it
// does in Kafka) into Go's version range. TLS 1.0 and 1.1 are refused.
func versions(p *props.Props) (lo, hi uint16, err error) {
	enabled := "TLSv1.2,TLSv1.3"
	if v, ok := p.Get(PropEnabledProtocols); ok && strings.TrimSpace(v) != "" {
		enabled = v
	}
	for _, name := range props.List(enabled) {
		var ver uint16
		switch name {
		case "TLSv1.2":
			ver = tls.VersionTLS12
		case "TLSv1.3":
			ver = tls.VersionTLS13
		case "TLSv1", "TLSv1.1", "SSLv3", "SSLv2Hello":
			return 0, 0, fmt.Errorf("%s: %s is not supported: Verbatim speaks TLS 1.2 and 1.3 only (TLSv1.2,TLSv1.3)", PropEnabledProtocols, name)
		default:
			return 0, 0, fmt.Errorf("%s: unknown protocol %q (TLSv1.2 or TLSv1.3)", PropEnabledProtocols, name)
		}
		if lo == 0 || ver < lo {
			lo = ver
		}
		hi = max(hi, ver)
	}
	if lo == 0 {
		return 0, 0, fmt.Errorf("%s lists no protocol", PropEnabledProtocols)
	}
	switch proto := get(p, PropProtocol); proto {
	case "", "TLSv1.3", "TLS":
	case "TLSv1.2":
		hi = min(hi, tls.VersionTLS12)
	case "TLSv1", "TLSv1.1", "SSL", "SSLv3":
		return 0, 0, fmt.Errorf("%s=%s is not supported: Verbatim speaks TLS 1.2 and 1.3 only", PropProtocol, proto)
	default:
		return 0, 0, fmt.Errorf("%s: unknown protocol %q (TLSv1.3, TLSv1.2 or TLS)", PropProtocol, proto)
	}
	if lo > hi {
		return 0, 0, fmt.Errorf("%s=%s allows no version of %s=%s", PropProtocol, get(p, PropProtocol), PropEnabledProtocols, enabled)
	}
	return lo, hi, nil
}

// cipherSuites maps ssl.cipher.suites (IANA names, which are also the
// JSSE names Kafka uses) to Go's TLS 1.2 suite ids. TLS 1.3 suites are
// accepted but not configurable in Go (all three are always on); a list
// of TLS 1.3 suites only raises the minimum version to 1.3. Suites Go
// considers insecure are refused.
func cipherSuites(p *props.Props, lo, hi uint16) ([]uint16, uint16, error) {
	names := props.List(get(p, PropCipherSuites))
	if len(names) == 0 {
		return nil, lo, nil
	}
	secure := map[string]*tls.CipherSuite{}
	for _, cs := range tls.CipherSuites() {
		secure[cs.Name] = cs
	}
	insecure := map[string]bool{}
	for _, cs := range tls.InsecureCipherSuites() {
		insecure[cs.Name] = true
	}
	var ids []uint16
	only13 := true
	for _, n := range names {
		cs, ok := secure[n]
		switch {
		case insecure[n]:
			return nil, 0, fmt.Errorf("%s: %s is an insecure suite and is not supported", PropCipherSuites, n)
		case !ok:
			return nil, 0, fmt.Errorf("%s: unknown cipher suite %q (use IANA names such as TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256)", PropCipherSuites, n)
		}
		tls12 := false
		for _, v := range cs.SupportedVersions {
			if v == tls.VersionTLS12 {
				tls12 = true
			}
		}
		if tls12 {
			only13 = false
			ids = append(ids, cs.ID)
		}
	}
	if only13 {
		if hi < tls.VersionTLS13 {
			return nil, 0, fmt.Errorf("%s lists TLS 1.3 suites only but TLS 1.3 is not enabled", PropCipherSuites)
		}
		lo = tls.VersionTLS13
	}
	return ids, lo, nil
}

// ClientAuth is Kafka's ssl.client.auth.
func clientAuth(p *props.Props) (tls.ClientAuthType, error) {
	switch v := strings.ToLower(get(p, PropClientAuth)); v {
	case "", "none":
		return tls.NoClientCert, nil
	case "requested":
		return tls.VerifyClientCertIfGiven, nil
	case "required":
		return tls.RequireAndVerifyClientCert, nil
	default:
		return 0, fmt.Errorf("%s=%s: must be none, requested or required", PropClientAuth, v)
	}
}

// base is the part of a configuration that does not come from the
// stores: versions and suites.
func base(p *props.Props) (*tls.Config, error) {
	lo, hi, err := versions(p)
	if err != nil {
		return nil, err
	}
	ids, lo, err := cipherSuites(p, lo, hi)
	if err != nil {
		return nil, err
	}
	return &tls.Config{MinVersion: lo, MaxVersion: hi, CipherSuites: ids}, nil
}

// ClientConfig builds the client side of a connection to another cluster
// from Kafka client properties (security.protocol and ssl.*): nil for
// PLAINTEXT and SASL_PLAINTEXT (and when security.protocol is unset, Kafka's
// default being PLAINTEXT). The truststore's certificates are the roots
// (none configured: the system's); a keystore, when set, is the client
// certificate for mTLS. ssl.endpoint.identification.algorithm=https (the
// default) verifies the server's host name (the dialer sets ServerName);
// an empty value verifies the chain only.
func ClientConfig(p *props.Props) (*tls.Config, error) {
	switch sp := strings.ToUpper(get(p, PropSecurityProtocol)); sp {
	case "", "PLAINTEXT", "SASL_PLAINTEXT":
		return nil, nil
	case "SSL", "SASL_SSL":
	default:
		return nil, fmt.Errorf("%s=%s: must be PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL", PropSecurityProtocol, sp)
	}
	cfg, err := base(p)
	if err != nil {
		return nil, err
	}
	m, err := loadMaterial(p)
	if err != nil {
		return nil, err
	}
	if m.cert != nil {
		cfg.Certificates = []tls.Certificate{*m.cert}
	}
	cfg.RootCAs = m.roots
	alg, set := p.Get(PropEndpointIdentification)
	switch strings.ToLower(strings.TrimSpace(alg)) {
	case "https":
	case "":
		if !set {
			break // Kafka's default: https
		}
		roots := m.roots
		cfg.InsecureSkipVerify = true // the chain is still verified below
		cfg.VerifyConnection = func(cs tls.ConnectionState) error { return verifyChain(cs, roots) }
	default:
		return nil, fmt.Errorf("%s=%s: must be https or empty", PropEndpointIdentification, alg)
	}
	return cfg, nil
}

// verifyChain verifies the peer's chain against roots (nil: the system's)
// without checking the host name, as Kafka does with an empty
// ssl.endpoint.identification.algorithm.
func verifyChain(cs tls.ConnectionState, roots *x509.CertPool) error {
	if len(cs.PeerCertificates) == 0 {
		return errors.New("tls: the server sent no certificate")
	}
	inter := x509.NewCertPool()
	for _, c := range cs.PeerCertificates[1:] {
		inter.AddCert(c)
	}
	_, err := cs.PeerCertificates[0].Verify(x509.VerifyOptions{Roots: roots, Intermediates: inter})
	return err
}

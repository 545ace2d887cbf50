package tlsconf

import (
	"bytes"
	"crypto"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"errors"
	"fmt"
	"os"
	"regexp"
	"sort"
	"strings"
	"time"

	keystore "github.com/pavlo-v-chernykh/keystore-go/v4"
	"software.sslmate.com/src/go-pkcs12"

	"github.com/verbatim-kafka/verbatim/props"
)

// Kafka's ssl.* property names this package reads.
const (
	PropSecurityProtocol       = "security.protocol"
	PropKeystoreType           = "ssl.keystore.type"
	PropKeystoreLocation       = "ssl.keystore.location"
	PropKeystorePassword       = "ssl.keystore.password"
	PropKeyPassword            = "ssl.key.password"
	PropKeystoreChain          = "ssl.keystore.certificate.chain"
	PropKeystoreKey            = "ssl.keystore.key"
	PropTruststoreType         = "ssl.truststore.type"
	PropTruststoreLocation     = "ssl.truststore.location"
	PropTruststorePassword     = "ssl.truststore.password"
	PropTruststoreCerts        = "ssl.truststore.certificates"
	PropClientAuth             = "ssl.client.auth"
	PropEnabledProtocols       = "ssl.enabled.protocols"
	PropProtocol               = "ssl.protocol"
	PropCipherSuites           = "ssl.cipher.suites"
	PropEndpointIdentification = "ssl.endpoint.identification.algorithm"
	PropPrincipalMapping       = "ssl.principal.mapping.rules"
	PropAllowDNChanges         = "ssl.allow.dn.changes"
	PropAllowSANChanges        = "ssl.allow.san.changes"
)

// Store types (Kafka's ssl.keystore.type / ssl.truststore.type values;
// JKS is Kafka's default for both).
const (
	TypeJKS    = "JKS"
	TypePKCS12 = "PKCS12"
	TypePEM    = "PEM"
)

// fileStamp is what a reload check compares: a file's size and
// modification time first, its content hash when those changed.
type fileStamp struct {
	path  string
	size  int64
	mtime time.Time
	hash  [sha256.Size]byte
}

// material is what the stores gave: the certificate to present (nil when
// no keystore is configured), the roots to verify the peer with (nil:
// the system's), and the files they came from.
type material struct {
	cert  *tls.Certificate
	roots *x509.CertPool
	files []fileStamp
}

// reader reads the store files, recording their stamps (taken before the
// read, so a change during the read is seen by the next check).
type reader struct{ files []fileStamp }

func (r *reader) read(prop, path string) ([]byte, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", prop, err)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", prop, err)
	}
	r.files = append(r.files, fileStamp{path: path, size: st.Size(), mtime: st.ModTime(), hash: sha256.Sum256(data)})
	return data, nil
}

func get(p *props.Props, name string) string {
	v, _ := p.Get(name)
	return strings.TrimSpace(v)
}

// has reports whether name is set to something other than blanks (Kafka
// treats an empty value as unset for the store settings).
func has(p *props.Props, name string) bool { return get(p, name) != "" }

func storeType(p *props.Props, name string) (string, error) {
	t := strings.ToUpper(get(p, name))
	switch t {
	case "":
		return TypeJKS, nil
	case TypeJKS, TypePKCS12, TypePEM:
		return t, nil
	}
	return "", fmt.Errorf("%s=%s: supported types are JKS, PKCS12 and PEM", name, get(p, name))
}

// loadMaterial reads the keystore (when configured) and the truststore
// (when configured) named by p.
func loadMaterial(p *props.Props) (*material, error) {
	r := &reader{}
	cert, err := loadKeystore(p, r)
	if err != nil {
		return nil, err
	}
	roots, err := loadTruststore(p, r)
	if err != nil {
		return nil, err
	}
	return &material{cert: cert, roots: roots, files: r.files}, nil
}

func loadKeystore(p *props.Props, r *reader) (*tls.Certificate, error) {
	typ, err := storeType(p, PropKeystoreType)
	if err != nil {
		return nil, err
	}
	inline := has(p, PropKeystoreChain) || has(p, PropKeystoreKey)
	loc := get(p, PropKeystoreLocation)
	switch {
	case inline && loc != "":
		return nil, fmt.Errorf("%s and %s/%s are exclusive: set the file or the inline PEM, not both", PropKeystoreLocation, PropKeystoreChain, PropKeystoreKey)
	case inline:
		if typ != TypePEM {
			return nil, fmt.Errorf("%s and %s need %s=PEM", PropKeystoreChain, PropKeystoreKey, PropKeystoreType)
		}
		if !has(p, PropKeystoreChain) || !has(p, PropKeystoreKey) {
			return nil, fmt.Errorf("%s and %s must both be set", PropKeystoreChain, PropKeystoreKey)
		}
		if has(p, PropKeystorePassword) {
			return nil, fmt.Errorf("%s cannot be set for a PEM keystore (only %s)", PropKeystorePassword, PropKeyPassword)
		}
		chain, err := pemCerts(PropKeystoreChain, []byte(get(p, PropKeystoreChain)))
		if err != nil {
			return nil, err
		}
		key, err := pemKey(PropKeystoreKey, []byte(get(p, PropKeystoreKey)), has(p, PropKeyPassword))
		if err != nil {
			return nil, err
		}
		return certificate(PropKeystoreChain, chain, key)
	case loc == "":
		return nil, nil
	}
	data, err := r.read(PropKeystoreLocation, loc)
	if err != nil {
		return nil, err
	}
	switch typ {
	case TypePEM:
		if has(p, PropKeystorePassword) {
			return nil, fmt.Errorf("%s cannot be set for a PEM keystore (only %s)", PropKeystorePassword, PropKeyPassword)
		}
		chain, err := pemCerts(PropKeystoreLocation, data)
		if err != nil {
			return nil, err
		}
		key, err := pemKey(PropKeystoreLocation, data, has(p, PropKeyPassword))
		if err != nil {
			return nil, err
		}
		return certificate(PropKeystoreLocation, chain, key)
	case TypePKCS12:
		key, leaf, cas, err := pkcs12.DecodeChain(data, get(p, PropKeystorePassword))
		if err != nil {
			return nil, fmt.Errorf("%s (PKCS12): %v (check %s)", PropKeystoreLocation, err, PropKeystorePassword)
		}
		return certificate(PropKeystoreLocation, append([]*x509.Certificate{leaf}, cas...), key)
	default:
		return jksKeystore(p, data)
	}
}

func jksKeystore(p *props.Props, data []byte) (*tls.Certificate, error) {
	pw := get(p, PropKeystorePassword)
	if pw == "" {
		return nil, fmt.Errorf("%s is required for a JKS keystore", PropKeystorePassword)
	}
	ks := keystore.New()
	if err := ks.Load(bytes.NewReader(data), []byte(pw)); err != nil {
		return nil, fmt.Errorf("%s (JKS): %v (check %s)", PropKeystoreLocation, err, PropKeystorePassword)
	}
	keyPW := pw
	if v := get(p, PropKeyPassword); v != "" {
		keyPW = v
	}
	aliases := ks.Aliases()
	sort.Strings(aliases)
	for _, a := range aliases {
		if !ks.IsPrivateKeyEntry(a) {
			continue
		}
		e, err := ks.GetPrivateKeyEntry(a, []byte(keyPW))
		if err != nil {
			return nil, fmt.Errorf("%s (JKS) entry %q: %v (check %s)", PropKeystoreLocation, a, err, PropKeyPassword)
		}
		key, err := x509.ParsePKCS8PrivateKey(e.PrivateKey)
		if err != nil {
			return nil, fmt.Errorf("%s (JKS) entry %q: private key: %v", PropKeystoreLocation, a, err)
		}
		var chain []*x509.Certificate
		for _, c := range e.CertificateChain {
			cert, err := x509.ParseCertificate(c.Content)
			if err != nil {
				return nil, fmt.Errorf("%s (JKS) entry %q: certificate: %v", PropKeystoreLocation, a, err)
			}
			chain = append(chain, cert)
		}
		return certificate(PropKeystoreLocation, chain, key)
	}
	return nil, fmt.Errorf("%s (JKS) holds no private key entry", PropKeystoreLocation)
}

// certificate checks that key belongs to chain[0] and builds the
// tls.Certificate.
func certificate(prop string, chain []*x509.Certificate, key any) (*tls.Certificate, error) {
	if len(chain) == 0 || chain[0] == nil {
		return nil, fmt.Errorf("%s holds no certificate", prop)
	}
	signer, ok := key.(crypto.Signer)
	if !ok {
		return nil, fmt.Errorf("%s: unsupported private key type %T", prop, key)
	}
	pub, ok := chain[0].PublicKey.(interface{ Equal(crypto.PublicKey) bool })
	if !ok || !pub.Equal(signer.Public()) {
		return nil, fmt.Errorf("%s: the private key does not match the first certificate of the chain", prop)
	}
	c := &tls.Certificate{PrivateKey: signer, Leaf: chain[0]}
	for _, x := range chain {
		c.Certificate = append(c.Certificate, x.Raw)
	}
	return c, nil
}

func pemCerts(prop string, data []byte) ([]*x509.Certificate, error) {
	var out []*x509.Certificate
	for _, b := range decodePEM(data) {
		if b.typ != "CERTIFICATE" {
			continue
		}
		if b.err != nil {
			return nil, fmt.Errorf("%s: certificate %d: %v", prop, len(out)+1, b.err)
		}
		c, err := x509.ParseCertificate(b.der)
		if err != nil {
			return nil, fmt.Errorf("%s: certificate %d: %v", prop, len(out)+1, err)
		}
		out = append(out, c)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s holds no PEM certificate", prop)
	}
	return out, nil
}

// pemBlock is one PEM block: its type and DER (err when the base64 does
// not decode); headers is true for the legacy form with headers
// (Proc-Type, DEK-Info), which only encrypted keys use.
type pemBlock struct {
	typ     string
	der     []byte
	headers bool
	err     error
}

var pemRE = regexp.MustCompile(`-----BEGIN ([A-Z0-9 ]+)-----([\s\S]*?)-----END ([A-Z0-9 ]+)-----`)

// decodePEM reads PEM blocks as Kafka's PEM parser does: whitespace
// anywhere in the base64, so that a value written on one line or joined
// by .properties line continuations (KIP-651's inline
// ssl.keystore.certificate.chain, ssl.keystore.key and
// ssl.truststore.certificates) reads like a file.
func decodePEM(data []byte) []pemBlock {
	var out []pemBlock
	for _, m := range pemRE.FindAllSubmatch(data, -1) {
		if string(m[1]) != string(m[3]) {
			continue
		}
		b := pemBlock{typ: string(m[1])}
		body := string(m[2])
		if strings.Contains(body, ":") {
			b.headers = true
			out = append(out, b)
			continue
		}
		b.der, b.err = base64.StdEncoding.DecodeString(strings.Join(strings.Fields(body), ""))
		out = append(out, b)
	}
	return out
}

// errEncryptedKey is the refusal of a key this package cannot decrypt.
var errEncryptedKey = errors.New("is an encrypted private key, which Verbatim cannot read")

// pemKey reads the private key of a PEM keystore: PKCS#8 as Kafka writes
// it, and the PKCS#1 and SEC 1 forms too. An encrypted key is refused
// naming ssl.key.password: Go has no PKCS#8 decryption.
func pemKey(prop string, data []byte, keyPassword bool) (any, error) {
	for _, b := range decodePEM(data) {
		var (
			key any
			err error
		)
		switch {
		case b.typ == "ENCRYPTED PRIVATE KEY" || b.headers && strings.HasSuffix(b.typ, "PRIVATE KEY"):
			return nil, fmt.Errorf("%s %v (%s): store the key unencrypted (PKCS#8, file mode 0600) and unset %s", prop, errEncryptedKey, PropKeyPassword, PropKeyPassword)
		case !strings.HasSuffix(b.typ, "PRIVATE KEY"):
			continue
		case b.err != nil:
			err = b.err
		case b.typ == "PRIVATE KEY":
			key, err = x509.ParsePKCS8PrivateKey(b.der)
		case b.typ == "RSA PRIVATE KEY":
			key, err = x509.ParsePKCS1PrivateKey(b.der)
		case b.typ == "EC PRIVATE KEY":
			key, err = x509.ParseECPrivateKey(b.der)
		default:
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("%s: private key: %v", prop, err)
		}
		if keyPassword {
			return nil, fmt.Errorf("%s holds an unencrypted key but %s is set: unset it", prop, PropKeyPassword)
		}
		return key, nil
	}
	return nil, fmt.Errorf("%s holds no PEM private key", prop)
}

func loadTruststore(p *props.Props, r *reader) (*x509.CertPool, error) {
	typ, err := storeType(p, PropTruststoreType)
	if err != nil {
		return nil, err
	}
	loc := get(p, PropTruststoreLocation)
	inline := has(p, PropTruststoreCerts)
	var certs []*x509.Certificate
	switch {
	case inline && loc != "":
		return nil, fmt.Errorf("%s and %s are exclusive", PropTruststoreLocation, PropTruststoreCerts)
	case inline:
		if typ != TypePEM {
			return nil, fmt.Errorf("%s needs %s=PEM", PropTruststoreCerts, PropTruststoreType)
		}
		if has(p, PropTruststorePassword) {
			return nil, fmt.Errorf("%s cannot be set for a PEM truststore", PropTruststorePassword)
		}
		if certs, err = pemCerts(PropTruststoreCerts, []byte(get(p, PropTruststoreCerts))); err != nil {
			return nil, err
		}
	case loc == "":
		return nil, nil
	default:
		data, err := r.read(PropTruststoreLocation, loc)
		if err != nil {
			return nil, err
		}
		if certs, err = truststoreFile(p, typ, data); err != nil {
			return nil, err
		}
	}
	pool := x509.NewCertPool()
	for _, c := range certs {
		pool.AddCert(c)
	}
	return pool, nil
}

func truststoreFile(p *props.Props, typ string, data []byte) ([]*x509.Certificate, error) {
	pw := get(p, PropTruststorePassword)
	switch typ {
	case TypePEM:
		if pw != "" {
			return nil, fmt.Errorf("%s cannot be set for a PEM truststore", PropTruststorePassword)
		}
		return pemCerts(PropTruststoreLocation, data)
	case TypePKCS12:
		certs, err := pkcs12.DecodeTrustStore(data, pw)
		if err == nil && len(certs) > 0 {
			return certs, nil
		}
		// A keystore-like PKCS12 (key and chain) used as a truststore:
		// its certificates are trusted, as Java's trust manager does.
		if _, leaf, cas, err2 := pkcs12.DecodeChain(data, pw); err2 == nil {
			return append([]*x509.Certificate{leaf}, cas...), nil
		}
		if err == nil {
			err = errors.New("no certificate")
		}
		return nil, fmt.Errorf("%s (PKCS12): %v (check %s)", PropTruststoreLocation, err, PropTruststorePassword)
	default:
		if pw == "" {
			return nil, fmt.Errorf("%s is required for a JKS truststore (its integrity check needs it)", PropTruststorePassword)
		}
		ks := keystore.New()
		if err := ks.Load(bytes.NewReader(data), []byte(pw)); err != nil {
			return nil, fmt.Errorf("%s (JKS): %v (check %s)", PropTruststoreLocation, err, PropTruststorePassword)
		}
		var out []*x509.Certificate
		aliases := ks.Aliases()
		sort.Strings(aliases)
		for _, a := range aliases {
			var raw []byte
			if ks.IsTrustedCertificateEntry(a) {
				e, err := ks.GetTrustedCertificateEntry(a)
				if err != nil {
					return nil, fmt.Errorf("%s (JKS) entry %q: %v", PropTruststoreLocation, a, err)
				}
				raw = e.Certificate.Content
			} else if chain, err := ks.GetPrivateKeyEntryCertificateChain(a); err == nil && len(chain) > 0 {
				raw = chain[0].Content
			} else {
				continue
			}
			c, err := x509.ParseCertificate(raw)
			if err != nil {
				return nil, fmt.Errorf("%s (JKS) entry %q: %v", PropTruststoreLocation, a, err)
			}
			out = append(out, c)
		}
		if len(out) == 0 {
			return nil, fmt.Errorf("%s (JKS) holds no certificate", PropTruststoreLocation)
		}
		return out, nil
	}
}

package tlsconf

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/verbatim-kafka/verbatim/props"
)

// Options are a Server's collaborators; zero values take the defaults.
type Options struct {
	// Logger receives the reload lines (default: slog.Default() at the
	// time of logging).
	Logger *slog.Logger
	// Now is the clock of the reload checks (default time.Now).
	Now func() time.Time
	// CheckInterval is the least time between two checks of the store
	// files (default 1 s).
	CheckInterval time.Duration
}

// Server is the server side of an SSL or SASL_SSL listener: the
// tls.Config handed to tls.Server, which reloads the keystore and
// truststore files when they change, and the principal mapping of client
// certificates.
type Server struct {
	props  *props.Props
	opts   Options
	base   *tls.Config
	mapper *PrincipalMapper
	// allowDN and allowSAN are ssl.allow.dn.changes and
	// ssl.allow.san.changes: whether a reload may change the subject or
	// the alternative names (Kafka refuses both by default).
	allowDN, allowSAN bool
	cur               atomic.Pointer[serverState]
	outer             *tls.Config

	mu sync.Mutex
	// next is when the files may be checked again; files their stamps as
	// last loaded (or last seen failing).
	next  time.Time
	files []fileStamp
}

type serverState struct {
	cfg  *tls.Config
	leaf *x509.Certificate
}

// ServerConfig is NewServer(p, Options{}).Config().
func ServerConfig(p *props.Props) (*tls.Config, error) {
	s, err := NewServer(p, Options{})
	if err != nil {
		return nil, err
	}
	return s.Config(), nil
}

// NewServer builds the server side from the listener's ssl.* properties
// (prefixes already resolved): a keystore is required; the truststore
// verifies client certificates (none configured: the system's roots);
// ssl.client.auth says whether they are asked for.
func NewServer(p *props.Props, o Options) (*Server, error) {
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.CheckInterval <= 0 {
		o.CheckInterval = time.Second
	}
	cfg, err := base(p)
	if err != nil {
		return nil, err
	}
	if cfg.ClientAuth, err = clientAuth(p); err != nil {
		return nil, err
	}
	rules := "DEFAULT"
	if v, ok := p.Get(PropPrincipalMapping); ok && v != "" {
		rules = v
	}
	mapper, err := ParsePrincipalRules(rules)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", PropPrincipalMapping, err)
	}
	// A private copy: the caller may reuse p.
	own := props.New()
	own.Merge(p)
	s := &Server{props: own, opts: o, base: cfg, mapper: mapper,
		allowDN: strings.EqualFold(get(p, PropAllowDNChanges), "true"), allowSAN: strings.EqualFold(get(p, PropAllowSANChanges), "true")}
	m, err := loadMaterial(own)
	if err != nil {
		return nil, err
	}
	if m.cert == nil {
		return nil, fmt.Errorf("a TLS listener needs a keystore: set %s (or %s and %s with %s=PEM)", PropKeystoreLocation, PropKeystoreChain, PropKeystoreKey, PropKeystoreType)
	}
	s.install(m)
	s.next = o.Now().Add(o.CheckInterval)
	s.outer = &tls.Config{
		MinVersion:         cfg.MinVersion,
		MaxVersion:         cfg.MaxVersion,
		GetConfigForClient: s.configForClient,
	}
	return s, nil
}

// Config is the tls.Config for tls.Server: every handshake may first
// check the store files (at most once per CheckInterval) and then uses
// the current certificate and client roots.
func (s *Server) Config() *tls.Config { return s.outer }

// Leaf is the certificate the server currently presents.
func (s *Server) Leaf() *x509.Certificate { return s.cur.Load().leaf }

// ClientAuth is the listener's ssl.client.auth.
func (s *Server) ClientAuth() tls.ClientAuthType { return s.base.ClientAuth }

func (s *Server) configForClient(*tls.ClientHelloInfo) (*tls.Config, error) {
	s.maybeReload()
	return s.cur.Load().cfg, nil
}

func (s *Server) install(m *material) {
	c := s.base.Clone()
	c.Certificates = []tls.Certificate{*m.cert}
	c.ClientCAs = m.roots
	s.files = m.files
	s.cur.Store(&serverState{cfg: c, leaf: m.cert.Leaf})
}

func (s *Server) logger() *slog.Logger {
	if s.opts.Logger != nil {
		return s.opts.Logger
	}
	return slog.Default()
}

// maybeReload checks the store files once the interval has passed: when
// one's size or modification time changed it reloads them all, and when
// a content hash differs it installs the new material. A load that fails
// keeps the old material and is logged once (the stamps of what failed
// are kept, so the same bad files are not reported again).
func (s *Server) maybeReload() {
	now := s.opts.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	if now.Before(s.next) {
		return
	}
	s.next = now.Add(s.opts.CheckInterval)
	changed := false
	for _, f := range s.files {
		st, err := os.Stat(f.path)
		if err != nil || st.Size() != f.size || !st.ModTime().Equal(f.mtime) {
			changed = true
			break
		}
	}
	if !changed {
		return
	}
	m, err := loadMaterial(s.props)
	if err != nil {
		// Logged once: the new stamps stop this version from being
		// loaded again; a later change is tried (and reported) anew.
		s.logger().Warn("TLS keystore/truststore reload failed; keeping the previous certificate", "err", err.Error())
		s.restamp()
		return
	}
	if sameContent(s.files, m.files) {
		s.files = m.files
		return
	}
	if err := s.allowedChange(m.cert.Leaf); err != nil {
		s.logger().Warn("TLS keystore reload refused; keeping the previous certificate", "err", err.Error())
		s.restamp()
		return
	}
	s.install(m)
	s.logger().Info("TLS keystore/truststore reloaded", "subject", m.cert.Leaf.Subject.String(),
		"serial", m.cert.Leaf.SerialNumber.String(), "not_after", m.cert.Leaf.NotAfter)
}

// restamp records the files' current size and modification time (size -1
// for a file that cannot be read), keeping their last good hashes, so the
// next check only reloads once they change again.
func (s *Server) restamp() {
	for i := range s.files {
		st, err := os.Stat(s.files[i].path)
		if err != nil {
			s.files[i].size, s.files[i].mtime = -1, time.Time{}
			continue
		}
		s.files[i].size, s.files[i].mtime = st.Size(), st.ModTime()
	}
}

// allowedChange applies Kafka's ssl.allow.dn.changes and
// ssl.allow.san.changes to a reloaded certificate.
func (s *Server) allowedChange(next *x509.Certificate) error {
	prev := s.cur.Load().leaf
	if !s.allowDN && !bytes.Equal(prev.RawSubject, next.RawSubject) {
		return fmt.Errorf("the new certificate's subject %q differs from %q (set %s=true to allow)", next.Subject, prev.Subject, PropAllowDNChanges)
	}
	if !s.allowSAN && !sameSANs(prev, next) {
		return fmt.Errorf("the new certificate's subject alternative names differ (set %s=true to allow)", PropAllowSANChanges)
	}
	return nil
}

func sameSANs(a, b *x509.Certificate) bool {
	if !slices.Equal(a.DNSNames, b.DNSNames) || !slices.Equal(a.EmailAddresses, b.EmailAddresses) || len(a.IPAddresses) != len(b.IPAddresses) || len(a.URIs) != len(b.URIs) {
		return false
	}
	for i := range a.IPAddresses {
		if !a.IPAddresses[i].Equal(b.IPAddresses[i]) {
			return false
		}
	}
	for i := range a.URIs {
		if a.URIs[i].String() != b.URIs[i].String() {
			return false
		}
	}
	return true
}

func sameContent(a, b []fileStamp) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].path != b[i].path || !bytes.Equal(a[i].hash[:], b[i].hash[:]) {
			return false
		}
	}
	return true
}

// Principal is the principal of a connection after its handshake:
// "User:" + the name ssl.principal.mapping.rules gives the verified client
// certificate's RFC 2253 subject, or ok false when the client presented no
// verified certificate (the connection stays anonymous). An error means no
// rule applies: Kafka fails the authentication then.
func (s *Server) Principal(cs tls.ConnectionState) (principal string, ok bool, err error) {
	if len(cs.PeerCertificates) == 0 || len(cs.VerifiedChains) == 0 {
		return "", false, nil
	}
	name, err := s.mapper.Name(DistinguishedName(cs.PeerCertificates[0]))
	if err != nil {
		return "", false, err
	}
	return "User:" + name, true, nil
}

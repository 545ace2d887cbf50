package broker

// SASL configuration and the SCRAM credential store.
//
// Every SASL_PLAINTEXT or SASL_SSL listener has its enabled mechanisms
// (Kafka's sasl.enabled.mechanisms), PLAIN's users (the user_<name>
// options of listener.name.<l>.plain.sasl.jaas.config) and the longest
// session before re-authentication (connections.max.reauth.ms, KIP-368).
// SCRAM users are the broker's, in verbatim-meta/scram-credentials.json:
// per user and mechanism the salt, iterations, StoredKey and ServerKey
// (never a password), written atomically whenever
// AlterUserScramCredentials changes them and read at Open.

import (
	"errors"
	"fmt"
	"io/fs"
	"slices"
	"strings"
	"time"

	"github.com/verbatim-kafka/verbatim/authn"
	"github.com/verbatim-kafka/verbatim/storage"
)

// SASLListenerConfig is the SASL configuration of a listener. Unset
// fields (nil) take the value of Config.SASL's "" entry.
type SASLListenerConfig struct {
	// Mechanisms is Kafka's sasl.enabled.mechanisms: PLAIN,
	// SCRAM-SHA-256, SCRAM-SHA-512 (Kafka's default, GSSAPI, is not
	// implemented, so a SASL listener must name its mechanisms).
	Mechanisms []string
	// PlainUsers maps PLAIN's users to their passwords.
	PlainUsers map[string]string
	// MaxReauth is connections.max.reauth.ms: a session ends this long
	// after its authentication unless the client re-authenticates; 0 (the
	// default) keeps sessions for the connection's life.
	MaxReauth *time.Duration
	// OAuth configures OAUTHBEARER's validator, Kafka's unsecured one
	// (nil: its defaults). It checks no signature: any client may claim
	// any principal.
	OAuth *authn.OAuthUnsecured
}

// Kafka's defaults.
const (
	defaultSASLMaxReceiveSize        = 512 << 10
	defaultFailedAuthenticationDelay = 100 * time.Millisecond
)

// scramCredentialsFile is the SCRAM store's file under the data dir.
const scramCredentialsFile = "scram-credentials.json"

// saslClock is the time of session expiry and of the failed-authentication
// delay; tests drive it.
type saslClock interface {
	Now() time.Time
	After(d time.Duration) <-chan time.Time
}

type wallSASLClock struct{}

func (wallSASLClock) Now() time.Time                         { return time.Now() }
func (wallSASLClock) After(d time.Duration) <-chan time.Time { return time.After(d) }

// saslDefaults fills in and checks the SASL settings.
func (c *Config) saslDefaults() error {
	if c.SASLMaxReceiveSize == 0 {
		c.SASLMaxReceiveSize = defaultSASLMaxReceiveSize
	}
	if c.SASLMaxReceiveSize < 64 {
		return fmt.Errorf("broker: sasl.server.max.receive.size %d is too small", c.SASLMaxReceiveSize)
	}
	if c.FailedAuthenticationDelay == nil {
		d := defaultFailedAuthenticationDelay
		c.FailedAuthenticationDelay = &d
	}
	if *c.FailedAuthenticationDelay < 0 {
		return fmt.Errorf("broker: connection.failed.authentication.delay.ms %s is negative", *c.FailedAuthenticationDelay)
	}
	if c.saslClock == nil {
		c.saslClock = wallSASLClock{}
	}
	for name, l := range c.SASL {
		if l == nil {
			continue
		}
		for _, m := range l.Mechanisms {
			if !authn.Supported(m) {
				return fmt.Errorf("broker: listener %q: SASL mechanism %q is not supported (supported: %s)", name, m, strings.Join(authn.Mechanisms(), ", "))
			}
		}
		if l.MaxReauth != nil && *l.MaxReauth < 0 {
			return fmt.Errorf("broker: listener %q: connections.max.reauth.ms %s is negative", name, *l.MaxReauth)
		}
	}
	return nil
}

// saslListener is a listener's resolved SASL configuration.
type saslListener struct {
	mechanisms []string
	auth       *authn.Authenticator
	maxReauth  time.Duration
}

// saslFor resolves l's configuration: its own entry, then the "" entry.
func (s *Server) saslFor(l *Listener) *saslListener {
	own, all := s.cfg.SASL[l.Name], s.cfg.SASL[""]
	if own == nil {
		own = &SASLListenerConfig{}
	}
	if all == nil {
		all = &SASLListenerConfig{}
	}
	out := &saslListener{auth: &authn.Authenticator{Store: s.scram}}
	out.mechanisms = own.Mechanisms
	if out.mechanisms == nil {
		out.mechanisms = all.Mechanisms
	}
	out.auth.Plain = own.PlainUsers
	if out.auth.Plain == nil {
		out.auth.Plain = all.PlainUsers
	}
	out.auth.OAuth = own.OAuth
	if out.auth.OAuth == nil {
		out.auth.OAuth = all.OAuth
	}
	out.auth.Now = s.cfg.saslClock.Now
	switch {
	case own.MaxReauth != nil:
		out.maxReauth = *own.MaxReauth
	case all.MaxReauth != nil:
		out.maxReauth = *all.MaxReauth
	}
	return out
}

// checkSASLListener refuses a SASL listener that no client could
// authenticate on.
func (s *Server) checkSASLListener(l *Listener) error {
	if !l.Protocol.UsesSASL() {
		return nil
	}
	sl := s.saslFor(l)
	if len(sl.mechanisms) == 0 {
		return fmt.Errorf("broker: listener %s (%s) has no SASL mechanism enabled: set sasl.enabled.mechanisms (GSSAPI, Kafka's default, is not supported)", l.Name, l.Protocol)
	}
	if slices.Contains(sl.mechanisms, authn.PLAIN) && len(sl.auth.Plain) == 0 {
		return fmt.Errorf("broker: listener %s enables PLAIN but has no PLAIN user: set listener.name.%s.plain.sasl.jaas.config with user_<name>=\"<password>\" options", l.Name, strings.ToLower(l.Name))
	}
	if slices.Contains(sl.mechanisms, authn.OAUTHBEARER) {
		s.log.Warn("OAUTHBEARER is enabled with Kafka's unsecured validator: tokens are not signed, any client may log in as any principal; for tests only",
			"listener", l.Name)
	}
	return nil
}

// openSCRAMStore reads the SCRAM credentials (none when the file is
// absent).
func openSCRAMStore(fsys storage.FS) (*authn.Store, error) {
	persist := func(data []byte) error {
		if err := fsys.MkdirAll(metaDirName, 0o755); err != nil {
			return fmt.Errorf("%w: %v", errStorage, err)
		}
		if err := writeFileAtomic(fsys, metaDirName, scramCredentialsFile, data); err != nil {
			return fmt.Errorf("%w: persisting the SCRAM credentials: %v", errStorage, err)
		}
		return nil
	}
	data, err := readFile(fsys, metaDirName+"/"+scramCredentialsFile)
	if errors.Is(err, fs.ErrNotExist) {
		return authn.NewStore(persist), nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading %s/%s: %w", metaDirName, scramCredentialsFile, err)
	}
	st, err := authn.DecodeStore(data, persist)
	if err != nil {
		return nil, fmt.Errorf("%s/%s: %w", metaDirName, scramCredentialsFile, err)
	}
	return st, nil
}

package authn

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// Mechanism names as Kafka spells them (sasl.enabled.mechanisms).
const (
	PLAIN       = "PLAIN"
	SCRAMSHA256 = "SCRAM-SHA-256"
	SCRAMSHA512 = "SCRAM-SHA-512"
)

// Mechanisms lists the mechanisms this package implements.
func Mechanisms() []string { return []string{PLAIN, SCRAMSHA256, SCRAMSHA512, OAUTHBEARER} }

// Supported reports whether mechanism is implemented here.
func Supported(mechanism string) bool { return slices.Contains(Mechanisms(), mechanism) }

// Server is one authentication exchange on the server side.
type Server interface {
	// Step takes the client's next message and returns the server's
	// answer; done is true once the exchange has completed successfully
	// (out is then the last message to send, possibly empty). An error
	// ends the exchange: it is an *Error.
	Step(in []byte) (out []byte, done bool, err error)
	// Username is the authenticated user once Step reported done.
	Username() string
}

// Error is a failed authentication. Message is what Kafka's broker tells
// the client in SaslAuthenticate's error message; Detail says more for
// the broker's log (never a password, but it may name the user, which
// Kafka does not tell the client).
type Error struct {
	Message string
	Detail  string
}

func (e *Error) Error() string {
	if e.Detail == "" {
		return e.Message
	}
	return e.Message + ": " + e.Detail
}

// invalidCredentials is the error Kafka's SaslServerAuthenticator answers
// for a mechanism's SaslException: the client learns nothing about why
// (an unknown user and a wrong password look the same).
func invalidCredentials(mechanism, detail string) *Error {
	return &Error{
		Message: "Authentication failed during authentication due to invalid credentials with SASL mechanism " + mechanism,
		Detail:  detail,
	}
}

// Authenticator starts exchanges for one listener: its PLAIN users and the
// SCRAM credential store (nil: no SCRAM users).
type Authenticator struct {
	// Plain maps a PLAIN user to its password (PlainLoginModule's
	// user_<name>="<password>" options).
	Plain map[string]string
	// Store holds the SCRAM credentials.
	Store *Store
	// OAuth configures OAUTHBEARER's unsecured validator (nil: its
	// defaults).
	OAuth *OAuthUnsecured
	// Now is the clock OAUTHBEARER checks token times against (nil:
	// time.Now).
	Now func() time.Time
}

// Expirer is a Server whose credential expires (OAUTHBEARER's token):
// once done, the session must end by Expiry (KIP-368).
type Expirer interface {
	Expiry() time.Time
}

// Start begins an exchange of mechanism.
func (a *Authenticator) Start(mechanism string) (Server, error) {
	switch mechanism {
	case PLAIN:
		return &plainServer{users: a.Plain}, nil
	case SCRAMSHA256, SCRAMSHA512:
		m, _ := ScramMechanismByName(mechanism)
		return &scramServer{mech: m, store: a.Store}, nil
	case OAUTHBEARER:
		s := &oauthServer{now: a.Now}
		if a.OAuth != nil {
			s.cfg = *a.OAuth
		}
		if s.now == nil {
			s.now = time.Now
		}
		return s, nil
	}
	return nil, fmt.Errorf("authn: unsupported SASL mechanism %q", mechanism)
}

// PlainUsers reads PlainLoginModule's users from JAAS options: every
// `user_<name>` option is a user and its password. The login module's own
// username/password options (the broker's client identity) are not users.
func PlainUsers(options map[string]string) map[string]string {
	users := map[string]string{}
	for k, v := range options {
		if name, ok := strings.CutPrefix(k, "user_"); ok && name != "" {
			users[name] = v
		}
	}
	return users
}

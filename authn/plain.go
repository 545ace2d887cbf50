package authn

import (
	"bytes"
	"crypto/sha256"
	"crypto/subtle"
	"fmt"
)

// PLAIN (RFC 4616) as Kafka's PlainSaslServer: one message,
// [authzid] NUL authcid NUL passwd, answered with nothing.

// PlainMessage is a parsed PLAIN client message.
type PlainMessage struct {
	AuthzID, Username, Password string
}

// ParsePlain splits a PLAIN message into its three fields, with Kafka's
// messages for a malformed one.
func ParsePlain(msg []byte) (PlainMessage, error) {
	parts := bytes.Split(msg, []byte{0})
	if len(parts) != 3 {
		return PlainMessage{}, &Error{Message: fmt.Sprintf("Invalid SASL/PLAIN response: expected 3 tokens, got %d", len(parts))}
	}
	m := PlainMessage{AuthzID: string(parts[0]), Username: string(parts[1]), Password: string(parts[2])}
	if m.Username == "" {
		return m, &Error{Message: "Authentication failed: username not specified"}
	}
	if m.Password == "" {
		return m, &Error{Message: "Authentication failed: password not specified"}
	}
	return m, nil
}

type plainServer struct {
	users    map[string]string
	username string
	used     bool
}

func (p *plainServer) Username() string { return p.username }

func (p *plainServer) Step(in []byte) ([]byte, bool, error) {
	if p.used {
		return nil, false, &Error{Message: "Authentication failed: unexpected message after the PLAIN exchange"}
	}
	p.used = true
	m, err := ParsePlain(in)
	if err != nil {
		return nil, false, err
	}
	want, known := p.users[m.Username]
	// Compare digests so that neither the password's length nor whether
	// the user exists shows in the time taken.
	got := sha256.Sum256([]byte(m.Password))
	exp := sha256.Sum256([]byte(want))
	ok := subtle.ConstantTimeCompare(got[:], exp[:]) == 1
	if !known || !ok {
		return nil, false, &Error{Message: "Authentication failed: Invalid username or password", Detail: "user " + m.Username}
	}
	if m.AuthzID != "" && m.AuthzID != m.Username {
		return nil, false, &Error{Message: "Authentication failed: Client requested an authorization id that is different from username"}
	}
	p.username = m.Username
	return nil, true, nil
}

package authn

import (
	"crypto/hmac"
	"crypto/pbkdf2"
	"crypto/rand"
	"crypto/sha256"
	"crypto/sha512"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"hash"
	"strconv"
	"strings"
)

// SCRAM (RFC 5802, RFC 7677) as Kafka's ScramSaslServer speaks it: the
// gs2 header "n" only (no channel binding), an authorization id accepted
// only when it is the user itself, extensions in the client-first message
// accepted and ignored except `tokenauth`, which asks for delegation-token
// authentication and is refused (delegation tokens are not implemented).
// The messages follow Kafka's grammar (ScramMessages): ASCII names and
// values, strict base64.

// ScramMechanism is one SCRAM hash: its name, Kafka's type byte (the
// Mechanism field of the SCRAM credential APIs) and iteration bounds.
type ScramMechanism struct {
	Name string
	Type int8
	hash func() hash.Hash
	size int
}

// Kafka's iteration bounds: at least 4096 (ScramMechanism.minIterations
// for both hashes), at most 16384 (the controller's MAX_ITERATIONS).
const (
	MinIterations = 4096
	MaxIterations = 16384
)

var scramMechanisms = []ScramMechanism{
	{Name: SCRAMSHA256, Type: 1, hash: sha256.New, size: sha256.Size},
	{Name: SCRAMSHA512, Type: 2, hash: sha512.New, size: sha512.Size},
}

// ScramMechanismByName returns the SCRAM mechanism of that name.
func ScramMechanismByName(name string) (ScramMechanism, bool) {
	for _, m := range scramMechanisms {
		if m.Name == name {
			return m, true
		}
	}
	return ScramMechanism{}, false
}

// ScramMechanismByType returns the SCRAM mechanism of Kafka's type byte
// (1 SCRAM-SHA-256, 2 SCRAM-SHA-512).
func ScramMechanismByType(t int8) (ScramMechanism, bool) {
	for _, m := range scramMechanisms {
		if m.Type == t {
			return m, true
		}
	}
	return ScramMechanism{}, false
}

func (m ScramMechanism) hmac(key []byte, parts ...string) []byte {
	h := hmac.New(m.hash, key)
	for _, p := range parts {
		h.Write([]byte(p))
	}
	return h.Sum(nil)
}

func (m ScramMechanism) digest(b []byte) []byte {
	h := m.hash()
	h.Write(b)
	return h.Sum(nil)
}

// SaltedPassword is Hi(password, salt, iterations): PBKDF2 with the
// mechanism's HMAC and its hash's size (the password's UTF-8 bytes, as
// Kafka's ScramFormatter; no SASLprep).
func (m ScramMechanism) SaltedPassword(password string, salt []byte, iterations int) ([]byte, error) {
	return pbkdf2.Key(m.hash, password, salt, iterations, m.size)
}

// Credential derives the stored credential from a salted password, as
// Kafka does for AlterUserScramCredentials' upsertions.
func (m ScramMechanism) Credential(salt, saltedPassword []byte, iterations int) Credential {
	clientKey := m.hmac(saltedPassword, "Client Key")
	return Credential{
		Salt:       append([]byte(nil), salt...),
		Iterations: iterations,
		StoredKey:  m.digest(clientKey),
		ServerKey:  m.hmac(saltedPassword, "Server Key"),
	}
}

// NewCredential salts password with a fresh random salt.
func (m ScramMechanism) NewCredential(password string, iterations int) (Credential, error) {
	salt := make([]byte, 32)
	if _, err := rand.Read(salt); err != nil {
		return Credential{}, err
	}
	sp, err := m.SaltedPassword(password, salt, iterations)
	if err != nil {
		return Credential{}, err
	}
	return m.Credential(salt, sp, iterations), nil
}

// ClientFirst is a parsed client-first-message.
type ClientFirst struct {
	// AuthzID is the gs2 header's a= value ("" when absent); Username is
	// the decoded saslname; Nonce the client nonce.
	AuthzID, Username, Nonce string
	// Extensions are the key=value pairs after the nonce.
	Extensions map[string]string
	// Bare is client-first-message-bare: the message after the gs2
	// header, as the client sent it (it enters the AuthMessage).
	Bare string
}

// ClientFinal is a parsed client-final-message.
type ClientFinal struct {
	ChannelBinding []byte
	Nonce          string
	Proof          []byte
	// WithoutProof is client-final-message-without-proof as sent.
	WithoutProof string
}

var errScramFormat = errors.New("invalid SCRAM message format")

func isValueChar(c byte) bool     { return c >= 0x01 && c <= 0x7f && c != ',' }
func isPrintableChar(c byte) bool { return c >= 0x21 && c <= 0x7e && c != ',' }
func isAlpha(c byte) bool         { return c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' }

// decodeSaslName checks a saslname (ASCII without '=' and ',' except the
// escapes =2C and =3D) and decodes it.
func decodeSaslName(s string) (string, bool) {
	if s == "" {
		return "", false
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '=':
			switch {
			case strings.HasPrefix(s[i:], "=2C"):
				b.WriteByte(',')
			case strings.HasPrefix(s[i:], "=3D"):
				b.WriteByte('=')
			default:
				return "", false
			}
			i += 2
		case c == ',' || c == 0 || c > 0x7f:
			return "", false
		default:
			b.WriteByte(c)
		}
	}
	return b.String(), true
}

func allChars(s string, ok func(byte) bool) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if !ok(s[i]) {
			return false
		}
	}
	return true
}

// parseExtensions reads ",k=v" pairs (ALPHA keys, VALUE values).
func parseExtensions(fields []string) (map[string]string, bool) {
	ext := map[string]string{}
	for _, f := range fields {
		k, v, ok := strings.Cut(f, "=")
		if !ok || !allChars(k, isAlpha) || !allChars(v, isValueChar) {
			return nil, false
		}
		ext[k] = v
	}
	return ext, true
}

// ParseClientFirst parses a client-first-message by Kafka's grammar:
// "n," [ "a=" saslname ] "," [ "m=" value "," ] "n=" saslname ","
// "r=" printable *( "," alpha "=" value ).
func ParseClientFirst(msg []byte) (ClientFirst, error) {
	var m ClientFirst
	s := string(msg)
	if !strings.HasPrefix(s, "n,") {
		return m, fmt.Errorf("%w: the gs2 header must be \"n\" (channel binding is not supported)", errScramFormat)
	}
	authz, rest, ok := cutGS2Header(s)
	if !ok {
		return m, errScramFormat
	}
	m.AuthzID = authz
	m.Bare = rest
	fields := strings.Split(rest, ",")
	if strings.HasPrefix(fields[0], "m=") {
		if !allChars(fields[0][2:], isValueChar) {
			return m, errScramFormat
		}
		fields = fields[1:]
	}
	if len(fields) < 2 {
		return m, errScramFormat
	}
	name, ok := strings.CutPrefix(fields[0], "n=")
	if !ok {
		return m, errScramFormat
	}
	if m.Username, ok = decodeSaslName(name); !ok {
		return m, errScramFormat
	}
	if m.Nonce, m.Extensions, ok = nonceAndExtensions(fields[1:]); !ok {
		return m, errScramFormat
	}
	return m, nil
}

// nonceAndExtensions reads "r=" printable *( "," alpha "=" value ), the
// fields both client messages end with.
func nonceAndExtensions(fields []string) (string, map[string]string, bool) {
	nonce, ok := strings.CutPrefix(fields[0], "r=")
	if !ok || !allChars(nonce, isPrintableChar) {
		return "", nil, false
	}
	ext, ok := parseExtensions(fields[1:])
	return nonce, ext, ok
}

// cutGS2Header splits off the gs2 header "n," [ "a=" saslname ] "," that
// SCRAM and OAUTHBEARER messages start with, returning the decoded
// authorization id and the rest.
func cutGS2Header(s string) (authzID, rest string, ok bool) {
	rest, ok = strings.CutPrefix(s, "n,")
	if !ok {
		return "", "", false
	}
	authz, rest, ok := strings.Cut(rest, ",")
	if !ok {
		return "", "", false
	}
	if authz == "" {
		return "", rest, true
	}
	a, ok := strings.CutPrefix(authz, "a=")
	if !ok {
		return "", "", false
	}
	authzID, ok = decodeSaslName(a)
	return authzID, rest, ok
}

// decodeBase64 is strict standard base64 with padding; empty is allowed.
func decodeBase64(s string) ([]byte, bool) {
	b, err := base64.StdEncoding.Strict().DecodeString(s)
	return b, err == nil
}

// ParseClientFinal parses a client-final-message: "c=" base64 "," "r="
// printable *( "," alpha "=" value ) ",p=" base64.
func ParseClientFinal(msg []byte) (ClientFinal, error) {
	var m ClientFinal
	s := string(msg)
	i := strings.LastIndex(s, ",p=")
	if i < 0 {
		return m, errScramFormat
	}
	m.WithoutProof = s[:i]
	var ok bool
	if m.Proof, ok = decodeBase64(s[i+3:]); !ok {
		return m, errScramFormat
	}
	fields := strings.Split(m.WithoutProof, ",")
	if len(fields) < 2 {
		return m, errScramFormat
	}
	cb, ok := strings.CutPrefix(fields[0], "c=")
	if !ok {
		return m, errScramFormat
	}
	if m.ChannelBinding, ok = decodeBase64(cb); !ok {
		return m, errScramFormat
	}
	if m.Nonce, _, ok = nonceAndExtensions(fields[1:]); !ok {
		return m, errScramFormat
	}
	return m, nil
}

// randomNonce is 24 random bytes in URL-safe base64: printable, no comma.
func randomNonce() (string, error) {
	var b [24]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", err
	}
	return base64.RawURLEncoding.EncodeToString(b[:]), nil
}

type scramState int

const (
	scramWantFirst scramState = iota
	scramWantFinal
	scramDone
	scramFailed
)

type scramServer struct {
	mech     ScramMechanism
	store    *Store
	state    scramState
	cred     Credential
	first    ClientFirst
	s1       string
	nonce    string
	username string
	// serverNonce makes the server's part of the nonce (nil: random;
	// tests pin it to replay published exchanges).
	serverNonce func() (string, error)
}

func (s *scramServer) Username() string {
	if s.state != scramDone {
		return ""
	}
	return s.username
}

func (s *scramServer) fail(err *Error) ([]byte, bool, error) {
	s.state = scramFailed
	s.cred = Credential{}
	return nil, false, err
}

func (s *scramServer) Step(in []byte) ([]byte, bool, error) {
	switch s.state {
	case scramWantFirst:
		return s.stepFirst(in)
	case scramWantFinal:
		return s.stepFinal(in)
	}
	return s.fail(invalidCredentials(s.mech.Name, "unexpected message after the SCRAM exchange ended"))
}

func (s *scramServer) stepFirst(in []byte) ([]byte, bool, error) {
	m, err := ParseClientFirst(in)
	if err != nil {
		return s.fail(invalidCredentials(s.mech.Name, "client-first-message: "+err.Error()))
	}
	if v, ok := m.Extensions["tokenauth"]; ok && strings.EqualFold(v, "true") {
		return s.fail(invalidCredentials(s.mech.Name, "delegation token authentication (tokenauth) is not supported"))
	}
	var cred Credential
	found := false
	if s.store != nil {
		cred, found = s.store.Lookup(m.Username, s.mech.Name)
	}
	if !found {
		return s.fail(invalidCredentials(s.mech.Name, "no "+s.mech.Name+" credential for user "+m.Username))
	}
	if m.AuthzID != "" && m.AuthzID != m.Username {
		return s.fail(&Error{Message: "Authentication failed: Client requested an authorization id that is different from username"})
	}
	if cred.Iterations < MinIterations {
		return s.fail(invalidCredentials(s.mech.Name, fmt.Sprintf("iterations %d is less than the minimum %d", cred.Iterations, MinIterations)))
	}
	gen := s.serverNonce
	if gen == nil {
		gen = randomNonce
	}
	sn, err := gen()
	if err != nil {
		return s.fail(invalidCredentials(s.mech.Name, "no randomness for the server nonce: "+err.Error()))
	}
	s.first, s.cred, s.username = m, cred, m.Username
	s.nonce = m.Nonce + sn
	s.s1 = "r=" + s.nonce + ",s=" + base64.StdEncoding.EncodeToString(cred.Salt) + ",i=" + strconv.Itoa(cred.Iterations)
	s.state = scramWantFinal
	return []byte(s.s1), false, nil
}

func (s *scramServer) stepFinal(in []byte) ([]byte, bool, error) {
	m, err := ParseClientFinal(in)
	if err != nil {
		return s.fail(invalidCredentials(s.mech.Name, "client-final-message: "+err.Error()))
	}
	// librdkafka before 2.6.1 sends its own nonce again before the
	// combined one (librdkafka#4895). Kafka 3.8.1-3.9 accepted that (the
	// nonce had to end with the server's); Kafka 4 refuses it. It is
	// accepted here, exactly that form and no other: the server's nonce is
	// still required, so a replayed exchange still fails, and kcat from
	// Debian (librdkafka 2.0.2) can log in.
	if subtle.ConstantTimeCompare([]byte(m.Nonce), []byte(s.nonce)) != 1 &&
		subtle.ConstantTimeCompare([]byte(m.Nonce), []byte(s.first.Nonce+s.nonce)) != 1 {
		return s.fail(invalidCredentials(s.mech.Name, "invalid client nonce in the final client message"))
	}
	if len(m.Proof) != s.mech.size {
		return s.fail(invalidCredentials(s.mech.Name, "client proof of the wrong length"))
	}
	authMsg := s.first.Bare + "," + s.s1 + "," + m.WithoutProof
	sig := s.mech.hmac(s.cred.StoredKey, authMsg)
	clientKey := make([]byte, len(sig))
	subtle.XORBytes(clientKey, m.Proof, sig)
	if !hmac.Equal(s.mech.digest(clientKey), s.cred.StoredKey) {
		return s.fail(invalidCredentials(s.mech.Name, "invalid client credentials for user "+s.username))
	}
	serverSig := s.mech.hmac(s.cred.ServerKey, authMsg)
	s.cred = Credential{}
	s.state = scramDone
	return []byte("v=" + base64.StdEncoding.EncodeToString(serverSig)), true, nil
}

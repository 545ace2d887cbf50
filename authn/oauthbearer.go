package authn

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// OAUTHBEARER (RFC 7628) with Kafka's unsecured validator
// (OAuthBearerUnsecuredValidatorCallbackHandler, Kafka's default for the
// mechanism when listener.name.<l>.oauthbearer.sasl.server.callback.handler.class
// is not set): the token is an unsecured JWS ({"alg":"none"}, no
// signature) whose claims name the principal and its expiry. It proves
// nothing about the client, so anyone who can reach the listener logs in
// as whomever it likes: for tests, as in Kafka.

// OAUTHBEARER is the mechanism's name.
const OAUTHBEARER = "OAUTHBEARER"

// OAuthUnsecured holds the unsecured validator's options (the
// unsecuredValidator* options of OAuthBearerLoginModule's JAAS entry).
type OAuthUnsecured struct {
	// PrincipalClaim names the claim holding the principal (default
	// "sub"); ScopeClaim the one holding the scope (default "scope").
	PrincipalClaim, ScopeClaim string
	// RequiredScope lists scope values every token must hold.
	RequiredScope []string
	// ClockSkew is tolerated on exp and iat.
	ClockSkew time.Duration
}

// ParseOAuthUnsecured reads the unsecuredValidator* JAAS options.
func ParseOAuthUnsecured(options map[string]string) (OAuthUnsecured, error) {
	o := OAuthUnsecured{PrincipalClaim: "sub", ScopeClaim: "scope"}
	if v := strings.TrimSpace(options["unsecuredValidatorPrincipalClaimName"]); v != "" {
		o.PrincipalClaim = v
	}
	if v := strings.TrimSpace(options["unsecuredValidatorScopeClaimName"]); v != "" {
		o.ScopeClaim = v
	}
	o.RequiredScope = strings.Fields(options["unsecuredValidatorRequiredScope"])
	if v := strings.TrimSpace(options["unsecuredValidatorAllowableClockSkewMs"]); v != "" {
		n, err := strconv.ParseInt(v, 10, 32)
		if err != nil || n < 0 {
			return o, fmt.Errorf("unsecuredValidatorAllowableClockSkewMs: %q is not a number of milliseconds >= 0", v)
		}
		o.ClockSkew = time.Duration(n) * time.Millisecond
	}
	return o, nil
}

// OAuthInitial is a parsed OAUTHBEARER client initial response.
type OAuthInitial struct {
	AuthzID, Token string
	Extensions     map[string]string
}

// ParseOAuthInitial parses a client initial response by Kafka's grammar:
// "n," ["a=" saslname] "," %x01 *(key "=" value %x01) %x01, with an
// auth=Bearer <token> pair among the key/value pairs.
func ParseOAuthInitial(msg []byte) (OAuthInitial, error) {
	var m OAuthInitial
	bad := fmt.Errorf("invalid OAUTHBEARER client first message")
	authz, rest, ok := cutGS2Header(string(msg))
	if !ok {
		return m, bad
	}
	m.AuthzID = authz
	if rest == "\x01\x01" {
		return m, fmt.Errorf("invalid OAUTHBEARER client first message: 'auth' not specified")
	}
	if len(rest) < 3 || rest[0] != 0x01 || !strings.HasSuffix(rest, "\x01\x01") {
		return m, bad
	}
	pairs := map[string]string{}
	for _, kv := range strings.Split(rest[1:len(rest)-2], "\x01") {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || !allChars(k, isAlpha) || !allChars(v, isOAuthValueChar) {
			return m, bad
		}
		pairs[k] = v
	}
	auth, ok := pairs["auth"]
	if !ok {
		return m, fmt.Errorf("invalid OAUTHBEARER client first message: 'auth' not specified")
	}
	delete(pairs, "auth")
	m.Extensions = pairs
	scheme, token, ok := strings.Cut(auth, " ")
	token = strings.TrimLeft(token, " ")
	if !ok || !allChars(scheme, isWordChar) || !allChars(token, isTokenChar) {
		return m, fmt.Errorf("invalid OAUTHBEARER client first message: invalid 'auth' format")
	}
	if !strings.EqualFold(scheme, "bearer") {
		return m, fmt.Errorf("invalid scheme in OAUTHBEARER client first message: %s", scheme)
	}
	m.Token = token
	return m, nil
}

func isOAuthValueChar(c byte) bool {
	return c >= 0x21 && c <= 0x7e || c == ' ' || c == '\t' || c == '\r' || c == '\n'
}
func isWordChar(c byte) bool { return isAlpha(c) || c >= '0' && c <= '9' || c == '_' }
func isTokenChar(c byte) bool {
	return isAlpha(c) || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.'
}

// UnsecuredToken is a validated unsecured JWS.
type UnsecuredToken struct {
	Principal string
	Scope     []string
	// Expiry is the exp claim.
	Expiry time.Time
}

// tokenRefusal is a token the validator refused: Status is RFC 6750's
// ("invalid_token", "insufficient_scope"), Scope the required scope.
type tokenRefusal struct {
	status, scope, reason string
}

// ValidateUnsecured checks token as Kafka's unsecured validator does.
func (o OAuthUnsecured) ValidateUnsecured(token string, now time.Time) (UnsecuredToken, error) {
	t, r := o.validate(token, now)
	if r != nil {
		return t, fmt.Errorf("%s: %s", r.status, r.reason)
	}
	return t, nil
}

func (o OAuthUnsecured) validate(token string, now time.Time) (UnsecuredToken, *tokenRefusal) {
	var t UnsecuredToken
	fail := func(format string, args ...any) (UnsecuredToken, *tokenRefusal) {
		return t, &tokenRefusal{status: "invalid_token", reason: fmt.Sprintf(format, args...)}
	}
	if strings.Contains(token, "..") {
		return fail("malformed compact serialization contains '..'")
	}
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		return fail("unsecured JWS compact serializations must have 3 dot-separated Base64URL-encoded values")
	}
	header, err := jwsPart(parts[0])
	if err != nil {
		return fail("header: %v", err)
	}
	claims, err := jwsPart(parts[1])
	if err != nil {
		return fail("claims: %v", err)
	}
	if alg, _ := header["alg"].(string); alg != "none" {
		return fail("unsecured JWS must have 'none' for an algorithm")
	}
	if parts[2] != "" {
		return fail("unsecured JWS must not contain a digital signature")
	}
	switch sc := claims[o.scopeClaim()].(type) {
	case nil:
	case string:
		if s := strings.TrimSpace(sc); s != "" {
			t.Scope = []string{s}
		}
	case []any:
		for _, e := range sc {
			if s := strings.TrimSpace(fmt.Sprint(e)); s != "" {
				t.Scope = append(t.Scope, s)
			}
		}
	default:
		return fail("the '%s' claim is not a string or a list", o.scopeClaim())
	}
	exp, ok, err := numberClaim(claims, "exp")
	if err != nil || !ok {
		return fail("no expiration time (a number) in JWT")
	}
	principal, _ := claims[o.principalClaim()].(string)
	if strings.TrimSpace(principal) == "" {
		return fail("no principal name in JWT claim: %s", o.principalClaim())
	}
	iat, hasIat, err := numberClaim(claims, "iat")
	if err != nil {
		return fail("the iat claim is not a number")
	}
	nowMs := float64(now.UnixMilli())
	skew := float64(o.ClockSkew.Milliseconds())
	if hasIat && 1000*iat > nowMs+skew {
		return fail("the Issued At value (%f seconds) was after the indicated time (%.0f ms) plus allowable clock skew (%.0f ms)", iat, nowMs, skew)
	}
	if nowMs-skew >= 1000*exp {
		return fail("the indicated time (%.0f ms) minus allowable clock skew (%.0f ms) was on or after the Expiration Time value (%f seconds)", nowMs, skew, exp)
	}
	if hasIat && exp <= iat {
		return fail("the Expiration Time (%f seconds) was not after the Issued At time (%f seconds)", exp, iat)
	}
	for _, need := range o.RequiredScope {
		found := false
		for _, s := range t.Scope {
			found = found || s == need
		}
		if !found {
			return t, &tokenRefusal{status: "insufficient_scope", scope: "[" + strings.Join(o.RequiredScope, ", ") + "]",
				reason: fmt.Sprintf("the provided scope %v was missing a required scope (%s)", t.Scope, need)}
		}
	}
	t.Principal = principal
	t.Expiry = time.UnixMilli(int64(math.Round(exp * 1000)))
	return t, nil
}

func (o OAuthUnsecured) principalClaim() string {
	if o.PrincipalClaim == "" {
		return "sub"
	}
	return o.PrincipalClaim
}

func (o OAuthUnsecured) scopeClaim() string {
	if o.ScopeClaim == "" {
		return "scope"
	}
	return o.ScopeClaim
}

// jwsPart decodes one base64url (or base64) JSON object of a JWS.
func jwsPart(s string) (map[string]any, error) {
	var raw []byte
	var err error
	for _, enc := range []*base64.Encoding{base64.RawURLEncoding, base64.URLEncoding, base64.RawStdEncoding, base64.StdEncoding} {
		if raw, err = enc.DecodeString(s); err == nil {
			break
		}
	}
	if err != nil {
		return nil, fmt.Errorf("malformed Base64 URL encoded value")
	}
	d := json.NewDecoder(bytes.NewReader(raw))
	d.UseNumber()
	var m map[string]any
	if err := d.Decode(&m); err != nil || m == nil || d.More() {
		return nil, fmt.Errorf("malformed JSON")
	}
	return m, nil
}

// numberClaim returns a numeric claim; ok is false when it is absent.
func numberClaim(claims map[string]any, name string) (float64, bool, error) {
	v, present := claims[name]
	if !present || v == nil {
		return 0, false, nil
	}
	n, isNum := v.(json.Number)
	if !isNum {
		return 0, true, fmt.Errorf("%s is not a number", name)
	}
	f, err := n.Float64()
	if err != nil || math.IsInf(f, 0) || math.IsNaN(f) || math.Abs(f) > 1e12 {
		return 0, true, fmt.Errorf("%s is out of range", name)
	}
	return f, true, nil
}

type oauthServer struct {
	cfg      OAuthUnsecured
	now      func() time.Time
	errMsg   string
	username string
	expiry   time.Time
	done     bool
}

func (s *oauthServer) Username() string {
	if !s.done {
		return ""
	}
	return s.username
}

// Expiry is when the credential (the token) expires: the session ends
// then at the latest (KIP-368).
func (s *oauthServer) Expiry() time.Time { return s.expiry }

func (s *oauthServer) Step(in []byte) ([]byte, bool, error) {
	if s.done {
		return nil, false, invalidCredentials(OAUTHBEARER, "unexpected message after the OAUTHBEARER exchange")
	}
	if len(in) == 1 && in[0] == 0x01 && s.errMsg != "" {
		return nil, false, &Error{Message: s.errMsg}
	}
	s.errMsg = ""
	m, err := ParseOAuthInitial(in)
	if err != nil {
		return nil, false, invalidCredentials(OAUTHBEARER, err.Error())
	}
	t, r := s.cfg.validate(m.Token, s.now())
	if r != nil {
		// RFC 7628: the error is a challenge, the client answers %x01,
		// and then the exchange fails with this message (as Kafka).
		s.errMsg = `{"status":"` + r.status + `"`
		if r.scope != "" {
			s.errMsg += `, "scope":"` + r.scope + `"`
		}
		s.errMsg += "}"
		return []byte(s.errMsg), false, nil
	}
	if m.AuthzID != "" && m.AuthzID != t.Principal {
		return nil, false, &Error{Message: fmt.Sprintf("Authentication failed: Client requested an authorization id (%s) that is different from the token's principal name (%s)", m.AuthzID, t.Principal)}
	}
	s.username, s.expiry, s.done = t.Principal, t.Expiry, true
	return []byte{}, true, nil
}

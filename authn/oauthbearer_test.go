package authn

import (
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/sasl/oauth"
)

func unsecuredToken(claims string) string {
	enc := base64.RawURLEncoding.EncodeToString
	return enc([]byte(`{"alg":"none"}`)) + "." + enc([]byte(claims)) + "."
}

func TestOAuthBearerUnsecured(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	a := &Authenticator{Now: func() time.Time { return now }}
	exp := now.Add(time.Hour).Unix()
	login := func(auth oauth.Auth) (Server, error) {
		s, err := a.Start(OAUTHBEARER)
		if err != nil {
			t.Fatal(err)
		}
		return s, exchange(t, auth.AsMechanism(), s)
	}
	s, err := login(oauth.Auth{Token: unsecuredToken(fmt.Sprintf(`{"sub":"admin","exp":%d}`, exp))})
	if err != nil {
		t.Fatal(err)
	}
	if s.Username() != "admin" || !s.(Expirer).Expiry().Equal(time.Unix(exp, 0)) {
		t.Fatalf("username %q expiry %v", s.Username(), s.(Expirer).Expiry())
	}

	// Refused tokens: the error challenge, then Kafka's failure with it.
	for name, tok := range map[string]string{
		"expired":       unsecuredToken(fmt.Sprintf(`{"sub":"admin","exp":%d}`, now.Add(-time.Minute).Unix())),
		"no exp":        unsecuredToken(`{"sub":"admin"}`),
		"no sub":        unsecuredToken(fmt.Sprintf(`{"exp":%d}`, exp)),
		"future iat":    unsecuredToken(fmt.Sprintf(`{"sub":"a","exp":%d,"iat":%d}`, exp, now.Add(time.Minute).Unix())),
		"signed":        unsecuredToken(fmt.Sprintf(`{"sub":"a","exp":%d}`, exp)) + "c2ln",
		"alg HS256":     base64.RawURLEncoding.EncodeToString([]byte(`{"alg":"HS256"}`)) + "." + base64.RawURLEncoding.EncodeToString([]byte(`{"sub":"a","exp":99999999999}`)) + ".",
		"not json":      base64.RawURLEncoding.EncodeToString([]byte(`{"alg":"none"}`)) + ".bm90IGpzb24.",
		"two parts":     "eyJhbGciOiJub25lIn0.eyJzdWIiOiJhIn0",
		"string exp":    unsecuredToken(`{"sub":"a","exp":"soon"}`),
		"numeric sub":   unsecuredToken(fmt.Sprintf(`{"sub":7,"exp":%d}`, exp)),
		"exp not > iat": unsecuredToken(fmt.Sprintf(`{"sub":"a","exp":%d,"iat":%d}`, now.Add(time.Second).Unix(), now.Add(time.Second).Unix())),
	} {
		s, err := login(oauth.Auth{Token: tok})
		var ae *Error
		if !errors.As(err, &ae) || ae.Message != `{"status":"invalid_token"}` || s.Username() != "" {
			t.Errorf("%s: %v", name, err)
		}
	}

	// Required scope: insufficient_scope.
	a.OAuth = &OAuthUnsecured{RequiredScope: []string{"kafka"}}
	if _, err := login(oauth.Auth{Token: unsecuredToken(fmt.Sprintf(`{"sub":"a","exp":%d,"scope":["other"]}`, exp))}); err == nil ||
		!strings.Contains(err.Error(), `"status":"insufficient_scope", "scope":"[kafka]"`) {
		t.Errorf("missing scope: %v", err)
	}
	if _, err := login(oauth.Auth{Token: unsecuredToken(fmt.Sprintf(`{"sub":"a","exp":%d,"scope":"kafka"}`, exp))}); err != nil {
		t.Errorf("scope present: %v", err)
	}
	// Options: another principal claim, clock skew.
	o, err := ParseOAuthUnsecured(map[string]string{"unsecuredValidatorPrincipalClaimName": "user", "unsecuredValidatorAllowableClockSkewMs": "120000"})
	if err != nil {
		t.Fatal(err)
	}
	a.OAuth = &o
	s, err = login(oauth.Auth{Token: unsecuredToken(fmt.Sprintf(`{"user":"bob","exp":%d}`, now.Add(-time.Minute).Unix()))})
	if err != nil || s.Username() != "bob" {
		t.Fatalf("claim name and skew: %v %q", err, s.Username())
	}
	if _, err := ParseOAuthUnsecured(map[string]string{"unsecuredValidatorAllowableClockSkewMs": "-1"}); err == nil {
		t.Error("negative skew accepted")
	}
	// An authorization id other than the principal.
	a.OAuth = nil
	if _, err := login(oauth.Auth{Zid: "root", Token: unsecuredToken(fmt.Sprintf(`{"sub":"admin","exp":%d}`, exp))}); err == nil ||
		!strings.Contains(err.Error(), "authorization id (root) that is different from the token's principal name (admin)") {
		t.Errorf("authzid: %v", err)
	}

}

func TestParseOAuthInitial(t *testing.T) {
	m, err := ParseOAuthInitial([]byte("n,a=u,\x01auth=Bearer abc.def.\x01k=v w\x01\x01"))
	if err != nil || m.AuthzID != "u" || m.Token != "abc.def." || m.Extensions["k"] != "v w" {
		t.Fatalf("%+v %v", m, err)
	}
	for _, bad := range []string{"", "n,,", "n,,\x01\x01", "n,,\x01auth=Bearer x\x01", "n,,\x01auth=Basic x\x01\x01", "n,,\x01auth=Bearer x!\x01\x01",
		"n,,\x01k=v\x01\x01", "y,,\x01auth=Bearer x\x01\x01", "n,,\x01\x01auth=Bearer x\x01\x01", "n,,\x01auth=Bearerx\x01\x01", "n,,\x01a uth=Bearer x\x01\x01"} {
		if _, err := ParseOAuthInitial([]byte(bad)); err == nil {
			t.Errorf("ParseOAuthInitial(%q) accepted", bad)
		}
	}
}

func FuzzOAuthBearer(f *testing.F) {
	f.Add([]byte("n,,\x01auth=Bearer " + unsecuredToken(`{"sub":"admin","exp":1900000000}`) + "\x01\x01"))
	f.Add([]byte("n,a=x,\x01auth=Bearer a.b.\x01k=v\x01\x01"))
	f.Add([]byte("\x01"))
	now := time.Unix(1_800_000_000, 0)
	f.Fuzz(func(t *testing.T, b []byte) {
		s := &oauthServer{now: func() time.Time { return now }}
		out, done, err := s.Step(b)
		if err != nil {
			return
		}
		if !done {
			if _, _, err := s.Step([]byte{1}); err == nil {
				t.Fatal("the 0x01 after an error challenge did not fail")
			}
			_ = out
			return
		}
		m, perr := ParseOAuthInitial(b)
		if perr != nil {
			t.Fatalf("authenticated from an unparsable message %q", b)
		}
		tok, verr := (OAuthUnsecured{}).ValidateUnsecured(m.Token, now)
		if verr != nil || tok.Principal != s.Username() || !tok.Expiry.After(now) {
			t.Fatalf("authenticated %q from %q: %v", s.Username(), b, verr)
		}
	})
}

package authn

import (
	"bytes"
	"strings"
	"testing"
	"time"
)

func FuzzParseClientFirst(f *testing.F) {
	for _, s := range []string{"n,,n=user,r=rOprNGfwEbeRWgbNEkqO", "n,a=u,n=u,r=x,tokenauth=true", "n,,m=x,n=a=2C,r=y", "y,,n=u,r=x"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := ParseClientFirst(b)
		if err != nil {
			return
		}
		if m.Username == "" || m.Nonce == "" || !strings.HasSuffix(string(b), m.Bare) || strings.ContainsRune(m.Nonce, ',') {
			t.Fatalf("%q parsed as %+v", b, m)
		}
	})
}

func FuzzParseClientFinal(f *testing.F) {
	for _, s := range []string{"c=biws,r=abc,p=AAEC", "c=biws,r=a,x=y,p=", "c=,r=a,p=AAEC"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := ParseClientFinal(b)
		if err != nil {
			return
		}
		if m.Nonce == "" || !strings.HasPrefix(string(b), m.WithoutProof+",p=") {
			t.Fatalf("%q parsed as %+v", b, m)
		}
	})
}

func FuzzParsePlain(f *testing.F) {
	for _, s := range []string{"\x00alice\x00secret", "a\x00b\x00c", "x", "\x00\x00"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := ParsePlain(b)
		if err != nil {
			return
		}
		if got := m.AuthzID + "\x00" + m.Username + "\x00" + m.Password; got != string(b) || m.Username == "" || m.Password == "" {
			t.Fatalf("%q parsed as %+v", b, m)
		}
	})
}

func FuzzParseAddScram(f *testing.F) {
	for _, s := range []string{
		"SCRAM-SHA-512=[name=admin,password=admin-secret,iterations=4096]",
		"SCRAM-SHA-256=[name=alice,salt=MWx2NHBkbnc0ZndxN25vdGN4bTB5eTFrN3E=,saltedpassword=mT0yyUUxnlJaC99HXgRTSYlbuqa4FSGtJCJfTMvjYCE=,iterations=8192]",
		"SCRAM-SHA-256=[name=\"a\",password=\"b\"]", "SCRAM-SHA-1=[]", "=",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		e, err := ParseAddScram(s)
		if err != nil {
			return
		}
		if e.User == "" || e.Mechanism.check(e.Credential) != nil {
			t.Fatalf("%q parsed as %+v", s, e)
		}
	})
}

func FuzzDecodeStore(f *testing.F) {
	f.Add([]byte(`{"version":1,"users":{}}`))
	f.Add([]byte(`{"version":1,"users":{"a":{"SCRAM-SHA-256":{"salt":"AA==","iterations":4096,"stored_key":"AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=","server_key":"AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA="}}}}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		st, err := DecodeStore(b, nil)
		if err != nil {
			return
		}
		enc, err := st.Encode()
		if err != nil {
			t.Fatal(err)
		}
		st2, err := DecodeStore(enc, nil)
		if err != nil {
			t.Fatalf("re-decoding the encoding: %v", err)
		}
		if len(st2.Users()) != len(st.Users()) {
			t.Fatal("users changed through an encode/decode round trip")
		}
	})
}

// FuzzAuthenticate drives every mechanism's state machine with arbitrary
// messages (split at 0xff bytes): it never panics, and it never
// authenticates a client that does not know the password (for PLAIN the
// message then holds the password; a SCRAM proof cannot be found by a
// fuzzer, so done never happens there).
func FuzzAuthenticate(f *testing.F) {
	f.Add(uint8(0), []byte("\x00alice\x00alice-secret"))
	f.Add(uint8(0), []byte("\x00alice\x00wrong"))
	f.Add(uint8(1), []byte("n,,n=alice,r=abc\xffc=biws,r=abc,p=AAAA"))
	f.Add(uint8(2), []byte("n,,n=alice,r=abc,tokenauth=true\xff\xff"))
	a := &Authenticator{Plain: map[string]string{"alice": "alice-secret"}, Now: fuzzNow}
	st := NewStore(nil)
	for _, m := range scramMechanisms {
		c, _ := m.NewCredential("alice-secret", 4096)
		_ = st.Update(func(tx *Tx) error { tx.Put("alice", m.Name, c); return nil })
	}
	a.Store = st
	f.Fuzz(func(t *testing.T, which uint8, data []byte) {
		mech := Mechanisms()[int(which)%len(Mechanisms())]
		s, err := a.Start(mech)
		if err != nil {
			t.Fatal(err)
		}
		for _, msg := range bytes.Split(data, []byte{0xff}) {
			_, done, err := s.Step(msg)
			if err != nil {
				if s.Username() != "" {
					t.Fatal("username after a failure")
				}
				return
			}
			if done {
				switch {
				case mech == PLAIN && bytes.HasSuffix(msg, []byte("\x00alice-secret")) && s.Username() == "alice":
				case mech == OAUTHBEARER && validUnsecured(msg, s.Username()):
					// An unsecured token proves nothing by design.
				default:
					t.Fatalf("%s authenticated %q with %q", mech, s.Username(), data)
				}
				return
			}
		}
	})
}

var fuzzNow = func() time.Time { return time.Unix(1_800_000_000, 0) }

// validUnsecured reports whether msg is an OAUTHBEARER initial response
// with a valid unsecured token for principal.
func validUnsecured(msg []byte, principal string) bool {
	m, err := ParseOAuthInitial(msg)
	if err != nil {
		return false
	}
	tok, err := (OAuthUnsecured{}).ValidateUnsecured(m.Token, fuzzNow())
	return err == nil && tok.Principal == principal
}

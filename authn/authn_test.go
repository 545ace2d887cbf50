package authn

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"
)

// exchange runs a franz-go client mechanism against srv to the end.
func exchange(t *testing.T, client sasl.Mechanism, srv Server) error {
	t.Helper()
	sess, msg, err := client.Authenticate(context.Background(), "broker:9092")
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 5; i++ {
		out, done, err := srv.Step(msg)
		if err != nil {
			return err
		}
		cdone, next, cerr := sess.Challenge(out)
		if cerr != nil {
			t.Fatalf("client refused the server's message %q: %v", out, cerr)
		}
		if done {
			if !cdone {
				t.Fatalf("server done, client not")
			}
			return nil
		}
		if cdone {
			t.Fatalf("client done before the server")
		}
		msg = next
	}
	t.Fatal("exchange did not end")
	return nil
}

func TestPlain(t *testing.T) {
	a := &Authenticator{Plain: map[string]string{"alice": "alice-secret", "bob": "b"}}
	start := func() Server {
		s, err := a.Start(PLAIN)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	s := start()
	if err := exchange(t, plain.Auth{User: "alice", Pass: "alice-secret"}.AsMechanism(), s); err != nil {
		t.Fatal(err)
	}
	if s.Username() != "alice" {
		t.Fatalf("username %q", s.Username())
	}
	for _, c := range []struct {
		msg, want string
	}{
		{"\x00alice\x00wrong", "Authentication failed: Invalid username or password"},
		{"\x00nobody\x00alice-secret", "Authentication failed: Invalid username or password"},
		{"\x00alice\x00alice-secret\x00", "Invalid SASL/PLAIN response: expected 3 tokens, got 4"},
		{"alice", "Invalid SASL/PLAIN response: expected 3 tokens, got 1"},
		{"\x00\x00x", "Authentication failed: username not specified"},
		{"\x00alice\x00", "Authentication failed: password not specified"},
		{"bob\x00alice\x00alice-secret", "Authentication failed: Client requested an authorization id that is different from username"},
	} {
		s := start()
		_, done, err := s.Step([]byte(c.msg))
		var ae *Error
		if done || !errors.As(err, &ae) || ae.Message != c.want {
			t.Errorf("%q: done %v err %v, want %q", c.msg, done, err, c.want)
		}
		if s.Username() != "" {
			t.Errorf("%q: username %q after a failure", c.msg, s.Username())
		}
		if strings.Contains(err.Error(), "alice-secret") {
			t.Errorf("%q: the error shows the password: %v", c.msg, err)
		}
	}
	// authzid equal to the user is accepted.
	s = start()
	if _, done, err := s.Step([]byte("alice\x00alice\x00alice-secret")); !done || err != nil {
		t.Fatalf("authzid = user: done %v err %v", done, err)
	}
	if _, _, err := s.Step([]byte("\x00alice\x00alice-secret")); err == nil {
		t.Fatal("a second PLAIN message was accepted")
	}
}

func TestPlainUsers(t *testing.T) {
	u := PlainUsers(map[string]string{"username": "admin", "password": "x", "user_admin": "x", "user_alice": "a", "user_": "no"})
	if len(u) != 2 || u["admin"] != "x" || u["alice"] != "a" {
		t.Fatalf("users %v", u)
	}
}

func scramStore(t *testing.T, user, pass string) *Store {
	t.Helper()
	st := NewStore(nil)
	if err := st.Update(func(tx *Tx) error {
		for _, m := range scramMechanisms {
			c, err := m.NewCredential(pass, 8192)
			if err != nil {
				return err
			}
			tx.Put(user, m.Name, c)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return st
}

func TestScramWithFranzGo(t *testing.T) {
	a := &Authenticator{Store: scramStore(t, "admin", "admin-secret")}
	for _, m := range scramMechanisms {
		client := func(auth scram.Auth) sasl.Mechanism {
			if m.Name == SCRAMSHA256 {
				return auth.AsSha256Mechanism()
			}
			return auth.AsSha512Mechanism()
		}
		t.Run(m.Name, func(t *testing.T) {
			s, _ := a.Start(m.Name)
			if err := exchange(t, client(scram.Auth{User: "admin", Pass: "admin-secret"}), s); err != nil {
				t.Fatal(err)
			}
			if s.Username() != "admin" {
				t.Fatalf("username %q", s.Username())
			}
			want := "Authentication failed during authentication due to invalid credentials with SASL mechanism " + m.Name
			for name, auth := range map[string]scram.Auth{
				"wrong password": {User: "admin", Pass: "nope"},
				"unknown user":   {User: "mallory", Pass: "admin-secret"},
				"token":          {User: "admin", Pass: "admin-secret", IsToken: true},
			} {
				s, _ := a.Start(m.Name)
				err := exchange(t, client(auth), s)
				var ae *Error
				if !errors.As(err, &ae) || ae.Message != want {
					t.Errorf("%s: %v, want %q", name, err, want)
				}
				if s.Username() != "" {
					t.Errorf("%s: username %q after a failure", name, s.Username())
				}
			}
			s, _ = a.Start(m.Name)
			err := exchange(t, client(scram.Auth{Zid: "root", User: "admin", Pass: "admin-secret"}), s)
			var ae *Error
			if !errors.As(err, &ae) || !strings.Contains(ae.Message, "authorization id that is different") {
				t.Errorf("authzid: %v", err)
			}
		})
	}
}

// TestScramRFC7677 replays RFC 7677's SCRAM-SHA-256 example exchange.
func TestScramRFC7677(t *testing.T) {
	m, _ := ScramMechanismByName(SCRAMSHA256)
	salt, _ := base64.StdEncoding.DecodeString("W22ZaJ0SNY7soEsUEjb6gQ==")
	sp, err := m.SaltedPassword("pencil", salt, 4096)
	if err != nil {
		t.Fatal(err)
	}
	st := NewStore(nil)
	_ = st.Update(func(tx *Tx) error { tx.Put("user", SCRAMSHA256, m.Credential(salt, sp, 4096)); return nil })
	s := &scramServer{mech: m, store: st, serverNonce: func() (string, error) { return "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0", nil }}
	out, done, err := s.Step([]byte("n,,n=user,r=rOprNGfwEbeRWgbNEkqO"))
	if err != nil || done {
		t.Fatal(done, err)
	}
	if want := "r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096"; string(out) != want {
		t.Fatalf("server-first %q, want %q", out, want)
	}
	out, done, err = s.Step([]byte("c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ="))
	if err != nil || !done {
		t.Fatal(done, err)
	}
	if want := "v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="; string(out) != want {
		t.Fatalf("server-final %q, want %q", out, want)
	}
	if _, _, err := s.Step([]byte("again")); err == nil {
		t.Fatal("a message after the exchange was accepted")
	}
}

func TestParseClientFirst(t *testing.T) {
	m, err := ParseClientFirst([]byte("n,a=a=2Cb,n=a=2Cb=3Dc,r=abc,tokenauth=true,x=y"))
	if err != nil {
		t.Fatal(err)
	}
	if m.AuthzID != "a,b" || m.Username != "a,b=c" || m.Nonce != "abc" || m.Extensions["tokenauth"] != "true" || m.Extensions["x"] != "y" {
		t.Fatalf("%+v", m)
	}
	if m.Bare != "n=a=2Cb=3Dc,r=abc,tokenauth=true,x=y" {
		t.Fatalf("bare %q", m.Bare)
	}
	if m, err := ParseClientFirst([]byte("n,,m=ext,n=u,r=n")); err != nil || m.Username != "u" {
		t.Fatalf("reserved m=: %+v %v", m, err)
	}
	for _, bad := range []string{
		"", "n", "n,,", "y,,n=u,r=x", "p=tls-unique,,n=u,r=x", "n,,n=,r=x", "n,,n=u", "n,,n=u,r=", "n,,n=u=,r=x",
		"n,,n=u=2X,r=x", "n,,n=\xc3\xa9,r=x", "n,,r=x,n=u", "n,b=x,n=u,r=x", "n,,n=u,r=x,1=2", "n,,n=u,r=x,k", "n,,n=u,r=x y",
	} {
		if _, err := ParseClientFirst([]byte(bad)); err == nil {
			t.Errorf("ParseClientFirst(%q) accepted", bad)
		}
	}
}

func TestParseClientFinal(t *testing.T) {
	m, err := ParseClientFinal([]byte("c=biws,r=abc,e=f,p=AAEC"))
	if err != nil {
		t.Fatal(err)
	}
	if string(m.ChannelBinding) != "n,," || m.Nonce != "abc" || !bytes.Equal(m.Proof, []byte{0, 1, 2}) || m.WithoutProof != "c=biws,r=abc,e=f" {
		t.Fatalf("%+v", m)
	}
	for _, bad := range []string{"", "p=AAEC", "c=biws,p=AAEC", "c=biws,r=abc,p=AAE", "c=bi!s,r=abc,p=AAEC", "r=abc,c=biws,p=AAEC", "c=biws,r=a,b,p=AAEC"} {
		if _, err := ParseClientFinal([]byte(bad)); err == nil {
			t.Errorf("ParseClientFinal(%q) accepted", bad)
		}
	}
}

func TestScramStateMachineRefusals(t *testing.T) {
	a := &Authenticator{Store: scramStore(t, "u", "p")}
	s, _ := a.Start(SCRAMSHA256)
	if _, _, err := s.Step([]byte("n,,n=u,r=abc")); err != nil {
		t.Fatal(err)
	}
	// Wrong nonce, then the exchange is over.
	if _, done, err := s.Step([]byte("c=biws,r=abd,p=" + base64.StdEncoding.EncodeToString(make([]byte, 32)))); done || err == nil {
		t.Fatal("wrong nonce accepted")
	}
	if _, done, err := s.Step([]byte("n,,n=u,r=abc")); done || err == nil {
		t.Fatal("a failed exchange went on")
	}
	// A proof of the wrong length.
	s, _ = a.Start(SCRAMSHA256)
	out, _, _ := s.Step([]byte("n,,n=u,r=abc"))
	nonce := strings.TrimPrefix(strings.Split(string(out), ",")[0], "r=")
	if _, done, err := s.Step([]byte("c=biws,r=" + nonce + ",p=AAEC")); done || err == nil {
		t.Fatal("short proof accepted")
	}
	if _, err := a.Start("GSSAPI"); err == nil {
		t.Fatal("GSSAPI started")
	}
	// No store: every SCRAM user is unknown.
	s, _ = (&Authenticator{}).Start(SCRAMSHA512)
	if _, _, err := s.Step([]byte("n,,n=u,r=abc")); err == nil {
		t.Fatal("a user authenticated without a store")
	}
}

// TestScramLibrdkafkaDoubledNonce: librdkafka before 2.6.1 repeats its
// nonce before the combined one; that exact form is accepted, any other
// nonce is not.
func TestScramLibrdkafkaDoubledNonce(t *testing.T) {
	m, _ := ScramMechanismByName(SCRAMSHA256)
	salt, _ := base64.StdEncoding.DecodeString("W22ZaJ0SNY7soEsUEjb6gQ==")
	sp, _ := m.SaltedPassword("pencil", salt, 4096)
	st := NewStore(nil)
	_ = st.Update(func(tx *Tx) error { tx.Put("user", SCRAMSHA256, m.Credential(salt, sp, 4096)); return nil })
	run := func(finalNonce string) error {
		s := &scramServer{mech: m, store: st, serverNonce: func() (string, error) { return "SRV", nil }}
		first := "n,,n=user,r=CLI"
		s1, _, err := s.Step([]byte(first))
		if err != nil {
			t.Fatal(err)
		}
		wop := "c=biws,r=" + finalNonce
		authMsg := "n=user,r=CLI," + string(s1) + "," + wop
		clientKey := m.hmac(sp, "Client Key")
		sig := m.hmac(m.digest(clientKey), authMsg)
		proof := make([]byte, len(sig))
		for i := range sig {
			proof[i] = clientKey[i] ^ sig[i]
		}
		_, done, err := s.Step([]byte(wop + ",p=" + base64.StdEncoding.EncodeToString(proof)))
		if err == nil && !done {
			t.Fatal("not done")
		}
		return err
	}
	if err := run("CLISRV"); err != nil {
		t.Fatalf("RFC nonce: %v", err)
	}
	if err := run("CLICLISRV"); err != nil {
		t.Fatalf("librdkafka's doubled nonce: %v", err)
	}
	for _, bad := range []string{"CLI", "SRV", "XCLISRV", "CLICLICLISRV", "CLISRVX"} {
		if err := run(bad); err == nil {
			t.Errorf("nonce %q accepted", bad)
		}
	}
}

package broker

import (
	"bytes"
	"io"
	"log/slog"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/verbatim-kafka/verbatim/authn"
)

// fuzzSASLFrame is a request frame (no size prefix) as a client sends it.
func fuzzSASLFrame(req kmsg.Request) []byte {
	return appendRequestFrame(nil, req, 1, "fuzz")[4:]
}

// FuzzSASLGate drives a SASL connection's gate and handlers with
// arbitrary request frames (split at "\xff\xfe"): it never panics, never
// serves a request other than ApiVersions and the SASL ones before
// authentication, and never authenticates a client that did not send the
// password (SCRAM proofs cannot be found by a fuzzer; PLAIN's password is
// in the input when it succeeds).
func FuzzSASLGate(f *testing.F) {
	hs := func(m string) []byte {
		r := kmsg.NewPtrSASLHandshakeRequest()
		r.Version, r.Mechanism = 1, m
		return fuzzSASLFrame(r)
	}
	au := func(v int16, tok string) []byte {
		r := kmsg.NewPtrSASLAuthenticateRequest()
		r.Version, r.SASLAuthBytes = v, []byte(tok)
		return fuzzSASLFrame(r)
	}
	md := kmsg.NewPtrMetadataRequest()
	md.Version = 12
	sep := []byte("\xff\xfe")
	join := func(frames ...[]byte) []byte { return bytes.Join(frames, sep) }
	f.Add(join(apiVersionsFrame(1, 3)[4:], hs("PLAIN"), au(2, "\x00alice\x00alice-secret"), fuzzSASLFrame(md), hs("PLAIN"), au(2, "\x00alice\x00alice-secret")))
	f.Add(join(hs("PLAIN"), au(1, "\x00alice\x00nope")))
	f.Add(join(hs("SCRAM-SHA-256"), au(2, "n,,n=alice,r=abc"), au(2, "c=biws,r=abc,p=AAAA")))
	f.Add(join(hs("SCRAM-SHA-512"), au(0, "n,,n=alice,r=abc,tokenauth=true")))
	f.Add(join(fuzzSASLFrame(md)))
	f.Add(join(hs("GSSAPI")))

	st := authn.NewStore(nil)
	for _, name := range []string{authn.SCRAMSHA256, authn.SCRAMSHA512} {
		m, _ := authn.ScramMechanismByName(name)
		c, err := m.NewCredential("alice-secret", 4096)
		if err != nil {
			f.Fatal(err)
		}
		_ = st.Update(func(tx *authn.Tx) error { tx.Put("alice", name, c); return nil })
	}
	cfg := Config{SASLMaxReceiveSize: defaultSASLMaxReceiveSize, saslClock: wallSASLClock{}}
	listener := &saslListener{
		mechanisms: []string{authn.PLAIN, authn.SCRAMSHA256, authn.SCRAMSHA512},
		auth:       &authn.Authenticator{Plain: map[string]string{"alice": "alice-secret"}, Store: st},
	}
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	f.Fuzz(func(t *testing.T, data []byte) {
		c := &conn{s: &Server{cfg: cfg}, principal: AnonymousPrincipal, log: logger}
		sc := &saslConn{c: c, cfg: listener, limited: true}
		for _, frame := range bytes.Split(data, sep) {
			if sc.admit(frame) != nil {
				return
			}
			p, _, req, err := decodeFrame(frame)
			if err != nil {
				return
			}
			if p.reply != nil {
				continue
			}
			switch req.Key {
			case kmsg.SASLHandshake.Int16():
				sc.handshake(req.Msg.(*kmsg.SASLHandshakeRequest), kmsg.NewPtrSASLHandshakeResponse())
			case kmsg.SASLAuthenticate.Int16():
				sc.authenticate(req.Msg.(*kmsg.SASLAuthenticateRequest), kmsg.NewPtrSASLAuthenticateResponse())
			case kmsg.ApiVersions.Int16():
			default:
				if c.principal == AnonymousPrincipal {
					t.Fatalf("%s admitted before authentication", kmsg.NameForKey(req.Key))
				}
			}
			if sc.takeClosing() != nil {
				return
			}
			if c.principal != AnonymousPrincipal && (c.principal != "User:alice" || !bytes.Contains(data, []byte("\x00alice-secret"))) {
				t.Fatalf("authenticated as %s from %q", c.principal, data)
			}
		}
	})
}

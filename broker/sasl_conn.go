package broker

// The SASL gate of a connection on a SASL_PLAINTEXT or SASL_SSL listener,
// as Kafka's SaslServerAuthenticator keeps it:
//
//   - Before authentication only ApiVersions and SaslHandshake (v1: the
//     SASL tokens travel in SaslAuthenticate), then only SaslAuthenticate
//     until the mechanism's exchange ends, are served; any other request
//     closes the connection, unanswered. Frames are bounded by
//     sasl.server.max.receive.size (Config.SASLMaxReceiveSize) until then:
//     a larger size prefix closes the connection before its body is read
//     (the frame reader's limit is lowered while unauthenticated), and
//     these frames are handled on the reader goroutine, so the limit
//     changes before the next frame is read.
//   - A failed handshake or authentication is answered, then the
//     connection is closed after connection.failed.authentication.delay.ms
//     (its own reader waits: no other connection's goroutine nor the
//     broker's is held).
//   - On success the connection's principal is "User:<name>".
//   - KIP-368: with connections.max.reauth.ms the answer carries the
//     session's lifetime; a client that authenticated with SaslAuthenticate
//     v1+ may re-authenticate (SaslHandshake and SaslAuthenticate again on
//     the authenticated connection, same mechanism and principal, else it
//     is refused and closed); once the session has expired, any request but
//     a re-authentication closes the connection.
//
// Every close is logged once, rate-limited, with the client's address.

import (
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/verbatim-kafka/verbatim/authn"
	"github.com/verbatim-kafka/verbatim/hotpath"
)

type saslPhase int

const (
	// saslWantHandshake: ApiVersions or SaslHandshake.
	saslWantHandshake saslPhase = iota
	// saslWantAuthenticate: SaslAuthenticate tokens of the exchange.
	saslWantAuthenticate
	// saslAuthenticated: everything; SaslHandshake begins a
	// re-authentication.
	saslAuthenticated
)

// saslConn is one connection's SASL state. It is used only by the
// goroutine handling frames (conn.handleFrame), except authed, which the
// reader reads to choose its frame limit.
type saslConn struct {
	c     *conn
	cfg   *saslListener
	phase saslPhase
	// mech is the mechanism of the exchange in progress or of the last
	// successful one; server the exchange in progress.
	mech   string
	server authn.Server
	// reauth is true while re-authenticating; badMech is the refusal of a
	// re-authentication that asked for another mechanism.
	reauth  bool
	badMech string
	// clientV1 is set once the client sent SaslAuthenticate v1+ (it then
	// knows about session lifetimes and may re-authenticate).
	clientV1 bool
	// expiry is when the session ends (zero: never).
	expiry time.Time
	// closing is set by a handler whose answer must be followed by the
	// connection's close.
	closing *saslRefusal
	// authed is set once the first authentication succeeded and never
	// cleared; limited says the reader's frame limit is the SASL one.
	authed  atomic.Bool
	limited bool
}

func (s *Server) newSASLConn(c *conn, l *Listener) *saslConn {
	return &saslConn{c: c, cfg: s.saslFor(l), limited: true}
}

// saslRefusal closes a SASL connection; delayed ones wait for
// connection.failed.authentication.delay.ms after their answer.
type saslRefusal struct {
	key     string
	msg     string
	delayed bool
}

func (e *saslRefusal) Error() string { return e.msg }

// Limiter keys (fixed: never a client's name).
const (
	saslKeyUnexpected = "sasl-unexpected-request"
	saslKeyFailed     = "sasl-authentication-failed"
	saslKeyExpired    = "sasl-session-expired"
	saslKeyTooLarge   = "sasl-frame-too-large"
)

// frameLimit is the frame limit the reader applies before its next read:
// the SASL one until the connection has authenticated.
func (c *conn) applySASLFrameLimit() {
	sc := c.sasl
	if sc == nil || !sc.limited || !sc.authed.Load() {
		return
	}
	sc.limited = false
	c.frames.SetMaxFrame(int(c.s.cfg.MaxFrameBytes))
}

// mayHandOff reports whether a large frame may go to the handler
// goroutine: not before authentication, whose frames must be handled
// before the next one is read.
func (c *conn) mayHandOff() bool { return c.sasl == nil || c.sasl.authed.Load() }

// saslFrameRefusal names a frame over sasl.server.max.receive.size
// before authentication (nil for any other frame failure).
func (c *conn) saslFrameRefusal(fe *hotpath.FrameError) error {
	if c.sasl == nil || !c.sasl.limited || !errors.Is(fe, hotpath.ErrFrameTooLarge) {
		return nil
	}
	return &saslRefusal{key: saslKeyTooLarge, msg: fmt.Sprintf("frame of %d bytes before SASL authentication exceeds sasl.server.max.receive.size %d", fe.Size, fe.Max)}
}

// admit decides whether the frame may be handled in the connection's SASL
// phase, before anything of it is decoded.
func (sc *saslConn) admit(frame []byte) error {
	if len(frame) < 4 {
		return nil // the header parser closes it
	}
	key := int16(binary.BigEndian.Uint16(frame))
	switch sc.phase {
	case saslWantHandshake:
		if key == kmsg.ApiVersions.Int16() || key == kmsg.SASLHandshake.Int16() {
			return nil
		}
		return &saslRefusal{key: saslKeyUnexpected, msg: fmt.Sprintf("unexpected %s request during the SASL handshake (not authenticated)", kmsg.NameForKey(key))}
	case saslWantAuthenticate:
		if key != kmsg.SASLAuthenticate.Int16() {
			return &saslRefusal{key: saslKeyUnexpected, msg: fmt.Sprintf("unexpected %s request during SASL %s", kmsg.NameForKey(key), sc.text())}
		}
		if sc.reauth && len(frame) > int(sc.c.s.cfg.SASLMaxReceiveSize) {
			return &saslRefusal{key: saslKeyTooLarge, msg: fmt.Sprintf("SASL re-authentication frame of %d bytes exceeds sasl.server.max.receive.size %d", len(frame), sc.c.s.cfg.SASLMaxReceiveSize)}
		}
		return nil
	}
	if key == kmsg.SASLHandshake.Int16() && sc.clientV1 {
		return nil // a re-authentication: allowed after expiry too
	}
	if !sc.expiry.IsZero() && !sc.c.s.cfg.saslClock.Now().Before(sc.expiry) {
		return &saslRefusal{key: saslKeyExpired, msg: fmt.Sprintf("SASL session of %s expired (connections.max.reauth.ms %d) and the client sent %s instead of re-authenticating",
			sc.c.principal, sc.cfg.maxReauth.Milliseconds(), kmsg.NameForKey(key))}
	}
	return nil
}

func (sc *saslConn) text() string {
	if sc.reauth {
		return "re-authentication"
	}
	return "authentication"
}

// handshake answers SaslHandshake on the connection's SASL state.
func (sc *saslConn) handshake(req *kmsg.SASLHandshakeRequest, resp *kmsg.SASLHandshakeResponse) {
	if sc.phase == saslWantAuthenticate || sc.phase == saslAuthenticated && !sc.clientV1 {
		resp.ErrorCode = kerr.IllegalSaslState.Code
		return
	}
	resp.SupportedMechanisms = append([]string(nil), sc.cfg.mechanisms...)
	mech := req.Mechanism
	enabled := false
	for _, m := range sc.cfg.mechanisms {
		enabled = enabled || m == mech
	}
	if !enabled {
		sc.c.lm.AuthFailed()
		resp.ErrorCode = kerr.UnsupportedSaslMechanism.Code
		sc.closing = &saslRefusal{key: saslKeyFailed, delayed: true,
			msg: fmt.Sprintf("SASL mechanism %q requested by the client is not enabled (enabled: %s)", printable(mech), strings.Join(sc.cfg.mechanisms, ", "))}
		return
	}
	sc.badMech = ""
	if sc.phase == saslAuthenticated {
		sc.reauth = true
		if mech != sc.mech {
			sc.badMech = fmt.Sprintf("SASL mechanism '%s' requested by client is not supported for re-authentication of mechanism '%s'", mech, sc.mech)
		}
	}
	server, err := sc.cfg.auth.Start(mech)
	if err != nil { // enabled mechanisms are checked at Open
		resp.ErrorCode = kerr.UnsupportedSaslMechanism.Code
		sc.closing = &saslRefusal{key: saslKeyFailed, delayed: true, msg: err.Error()}
		return
	}
	if sc.badMech == "" {
		sc.mech = mech
	}
	sc.server, sc.phase = server, saslWantAuthenticate
}

// authenticate answers one SaslAuthenticate token.
func (sc *saslConn) authenticate(req *kmsg.SASLAuthenticateRequest, resp *kmsg.SASLAuthenticateResponse) {
	if sc.phase != saslWantAuthenticate {
		resp.ErrorCode = kerr.IllegalSaslState.Code
		msg := "SaslAuthenticate request received after successful authentication"
		resp.ErrorMessage = &msg
		return
	}
	if req.Version >= 1 {
		sc.clientV1 = true
	}
	fail := func(clientMsg, detail string) {
		sc.c.lm.AuthFailed()
		resp.ErrorCode = kerr.SaslAuthenticationFailed.Code
		resp.ErrorMessage = &clientMsg
		resp.SASLAuthBytes = nil
		sc.server = nil
		log := clientMsg
		if detail != "" {
			log += " (" + detail + ")"
		}
		sc.closing = &saslRefusal{key: saslKeyFailed, delayed: true, msg: fmt.Sprintf("SASL %s failed with mechanism %s: %s", sc.text(), sc.mech, log)}
	}
	if sc.badMech != "" {
		fail(sc.badMech, "")
		return
	}
	out, done, err := sc.server.Step(req.SASLAuthBytes)
	if err != nil {
		msg, detail := err.Error(), ""
		if ae, ok := err.(*authn.Error); ok {
			msg, detail = ae.Message, ae.Detail
		}
		if sc.reauth {
			msg = strings.Replace(msg, "during authentication", "during re-authentication", 1)
		}
		fail(msg, detail)
		return
	}
	resp.SASLAuthBytes = out
	if resp.SASLAuthBytes == nil {
		resp.SASLAuthBytes = []byte{}
	}
	if !done {
		return
	}
	principal := "User:" + sc.server.Username()
	if sc.reauth && principal != sc.c.principal {
		prevType, prevName, _ := strings.Cut(sc.c.principal, ":")
		newType, newName, _ := strings.Cut(principal, ":")
		fail(fmt.Sprintf("Cannot change principals during re-authentication from %s.%s: %s.%s", prevType, prevName, newType, newName), "")
		return
	}
	sc.c.principal = principal
	sc.c.lm.AuthSucceeded()
	sc.expiry = time.Time{}
	if lifetime, ok := sc.sessionLifetime(); ok {
		sc.expiry = sc.c.s.cfg.saslClock.Now().Add(lifetime)
		resp.SessionLifetimeMillis = lifetime.Milliseconds()
	}
	sc.server, sc.reauth, sc.phase = nil, false, saslAuthenticated
	sc.authed.Store(true)
	sc.c.log.Debug("SASL authentication succeeded", "mechanism", sc.mech, "principal", principal)
}

// sessionLifetime is how long the session just authenticated lasts, as
// Kafka computes it: connections.max.reauth.ms, and no longer than the
// credential when it expires (an OAUTHBEARER token); false: unbounded.
func (sc *saslConn) sessionLifetime() (time.Duration, bool) {
	var d time.Duration
	set := false
	if e, ok := sc.server.(authn.Expirer); ok {
		d, set = max(e.Expiry().Sub(sc.c.s.cfg.saslClock.Now()), 0), true
	}
	if m := sc.cfg.maxReauth; m > 0 && (!set || m < d) {
		d, set = m, true
	}
	return d, set
}

// takeClosing returns (and clears) the close a handler asked for.
func (sc *saslConn) takeClosing() error {
	if sc == nil || sc.closing == nil {
		return nil
	}
	r := sc.closing
	sc.closing = nil
	return r
}

// waitFailedAuthDelay holds a refused connection open for the
// failed-authentication delay after its answer; done ends the wait early
// (shutdown).
func (c *conn) waitFailedAuthDelay(err error, done <-chan struct{}) {
	r, ok := err.(*saslRefusal)
	if !ok || !r.delayed {
		return
	}
	d := *c.s.cfg.FailedAuthenticationDelay
	if d <= 0 {
		return
	}
	select {
	case <-c.s.cfg.saslClock.After(d):
	case <-done:
	}
}

// logSASLRefusal writes the one WARN line of a SASL connection closed.
func (c *conn) logSASLRefusal(r *saslRefusal) {
	args := []any{"reason", r.msg}
	if c.clientID != "" {
		args = append(args, "client_id", c.clientID)
	}
	c.s.faults.Log(c.log, slog.LevelWarn, r.key, "connection closed", args...)
}

// printable keeps a client's string fit for a log line.
func printable(s string) string {
	if len(s) > 64 {
		s = s[:64] + "..."
	}
	return strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f {
			return '?'
		}
		return r
	}, s)
}

package client

// Transport security and authentication of a connection: TLS, and SASL
// through a franz-go sasl.Mechanism (PLAIN, SCRAM-SHA-256/512) as kgo
// drives it: SaslHandshake v1 naming the mechanism, then SaslAuthenticate
// round trips carrying the session's messages until it is done. When the
// broker answers a session lifetime (KIP-368, SessionLifetimeMs), the
// connection re-authenticates before it runs out: the next request after
// the renewal time first waits for the requests in flight to be answered
// (the pipeline drains, so the SASL exchange is alone on the wire), then
// repeats the exchange on the same connection.

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// AuthError is a failure to secure or authenticate a connection: a TLS
// certificate the client does not accept, a TLS handshake with something
// that does not speak TLS, or a SASL refusal. It is Permanent (retrying
// with the same configuration cannot help). Message is the broker's
// (SASL) and never holds a secret the client sent.
type AuthError struct {
	Addr    string
	What    string // "TLS" or "SASL <mechanism>"
	Err     error
	Message string
}

func (e *AuthError) Error() string {
	msg := fmt.Sprintf("%s authentication to %s failed: %v", e.What, e.Addr, e.Err)
	if e.Message != "" {
		msg += ": " + e.Message
	}
	return msg
}

func (e *AuthError) Unwrap() error { return e.Err }

// Permanent: an authentication failure is never retried.
func (e *AuthError) Permanent() bool { return true }

// tlsHandshakeTimeout bounds a handshake whose context has no deadline
// (Kafka's socket.connection.setup.timeout.ms default): a plaintext
// listener may wait for the rest of what it takes as a frame.
const tlsHandshakeTimeout = 10 * time.Second

// handshakeTLS runs the TLS handshake on nc (closed on failure).
func handshakeTLS(ctx context.Context, nc net.Conn, addr string, cfg *tls.Config) (net.Conn, error) {
	cfg = cfg.Clone()
	if cfg.ServerName == "" {
		if host, _, err := net.SplitHostPort(addr); err == nil {
			cfg.ServerName = host
		}
	}
	tc := tls.Client(nc, cfg)
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, tlsHandshakeTimeout)
		defer cancel()
	}
	if err := tc.HandshakeContext(ctx); err != nil {
		nc.Close()
		if permanentTLS(err) {
			return nil, &AuthError{Addr: addr, What: "TLS", Err: err}
		}
		return nil, fmt.Errorf("TLS handshake with %s: %w", addr, err)
	}
	return tc, nil
}

// permanentTLS reports handshake failures that a retry cannot mend: the
// server's certificate refused, a server that does not speak TLS, or a
// TLS alert from the server (it refused ours).
func permanentTLS(err error) bool {
	var (
		cv *tls.CertificateVerificationError
		ua x509.UnknownAuthorityError
		he x509.HostnameError
		ci x509.CertificateInvalidError
		rh tls.RecordHeaderError
		al tls.AlertError
	)
	return errors.As(err, &cv) || errors.As(err, &ua) || errors.As(err, &he) || errors.As(err, &ci) || errors.As(err, &rh) || errors.As(err, &al)
}

// roundTripLocked sends req and waits for its answer while the caller
// holds the write lock (the SASL exchange). REQUIRES: c.wmu.
func (c *Conn) roundTripLocked(ctx context.Context, req kmsg.Request) (kmsg.Response, error) {
	cl, err := c.sendLocked(ctx, req)
	if err != nil {
		return nil, err
	}
	return c.wait(ctx, cl)
}

// authenticateLocked runs the SASL exchange and records when the session
// must be renewed. REQUIRES: c.wmu.
func (c *Conn) authenticateLocked(ctx context.Context) error {
	m := c.opts.SASL
	fail := func(err error, msg string) error {
		return &AuthError{Addr: c.addr, What: "SASL " + m.Name(), Err: err, Message: msg}
	}
	if c.MaxVersion(kmsg.SASLHandshake.Int16()) < 1 || c.MaxVersion(kmsg.SASLAuthenticate.Int16()) < 0 {
		return fail(kerr.UnsupportedSaslMechanism, "the broker does not serve SaslHandshake v1 and SaslAuthenticate (is this a SASL listener?)")
	}
	start := c.opts.now()
	hs := kmsg.NewPtrSASLHandshakeRequest()
	hs.Version = 1
	hs.Mechanism = m.Name()
	resp, err := c.roundTripLocked(ctx, hs)
	if err != nil {
		return err
	}
	if hr := resp.(*kmsg.SASLHandshakeResponse); hr.ErrorCode != 0 {
		return fail(kerr.ErrorForCode(hr.ErrorCode), fmt.Sprintf("the broker enables %v", hr.SupportedMechanisms))
	}
	sess, msg, err := m.Authenticate(ctx, c.addr)
	if err != nil {
		return fail(err, "")
	}
	var lifetime int64
	for {
		ar := kmsg.NewPtrSASLAuthenticateRequest()
		ar.Version = min(c.MaxVersion(kmsg.SASLAuthenticate.Int16()), 2)
		ar.SASLAuthBytes = msg
		resp, err := c.roundTripLocked(ctx, ar)
		if err != nil {
			if ctx.Err() != nil {
				return err
			}
			// Some brokers (franz-go's kfake among them) close the
			// connection instead of answering a refused login.
			return fail(err, "the broker closed the connection during authentication: the credentials were most likely refused")
		}
		r := resp.(*kmsg.SASLAuthenticateResponse)
		if r.ErrorCode != 0 {
			em := ""
			if r.ErrorMessage != nil {
				em = *r.ErrorMessage
			}
			return fail(kerr.ErrorForCode(r.ErrorCode), em)
		}
		lifetime = r.SessionLifetimeMillis
		done, next, err := sess.Challenge(r.SASLAuthBytes)
		if err != nil {
			return fail(err, "")
		}
		if done {
			break
		}
		msg = next
	}
	c.reauthAt = time.Time{}
	if lifetime > 0 {
		const maxLifetime = 365 * 24 * time.Hour
		d := min(time.Duration(lifetime)*time.Millisecond, maxLifetime)
		c.reauthAt = start.Add(d - max(time.Second, d/20))
	}
	return nil
}

// reauthenticateLocked renews the SASL session on this connection once
// every request in flight is answered. REQUIRES: c.wmu.
func (c *Conn) reauthenticateLocked(ctx context.Context) error {
	for len(c.pending) > 0 {
		select {
		case <-c.drained:
		case <-c.closed:
			return c.closeErr()
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return c.authenticateLocked(ctx)
}

package broker

// SaslAuthenticate (key 36), versions 0-2.
//
// Behaviour:
//   - Carries one token of the mechanism chosen by SaslHandshake
//     (sasl_conn.go, mechanisms in package authn): the server's next
//     token is answered with NONE; when the exchange completes the
//     connection's principal becomes "User:<name>" and, from v1, the
//     answer's SessionLifetimeMs is connections.max.reauth.ms (0: the
//     session does not expire; an OAUTHBEARER session ends with its token
//     at the latest, as Kafka's).
//   - A failed exchange: SASL_AUTHENTICATION_FAILED with Kafka's message
//     ("Authentication failed: Invalid username or password" for PLAIN,
//     "Authentication failed during authentication due to invalid
//     credentials with SASL mechanism SCRAM-SHA-256" for SCRAM, which does
//     not tell an unknown user from a wrong password), then the
//     connection is closed after connection.failed.authentication.delay.ms.
//   - A re-authentication that changes the principal is refused with
//     Kafka's "Cannot change principals during re-authentication" and
//     closed the same way.
//   - Outside an exchange (a PLAINTEXT or SSL listener, an authenticated
//     connection): ILLEGAL_SASL_STATE, as Kafka's request handler answers.

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func init() { register(kmsg.SASLAuthenticate.Int16(), 0, 2, handleSaslAuthenticate) }

func handleSaslAuthenticate(_ context.Context, _ *Server, r *Request) (Reply, error) {
	req := r.Msg.(*kmsg.SASLAuthenticateRequest)
	resp := req.ResponseKind().(*kmsg.SASLAuthenticateResponse)
	if r.sasl == nil {
		resp.ErrorCode = kerr.IllegalSaslState.Code
		msg := "SaslAuthenticate request received after successful authentication"
		resp.ErrorMessage = &msg
		return resp, nil
	}
	r.sasl.authenticate(req, resp)
	return resp, nil
}

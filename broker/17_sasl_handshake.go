package broker

// SaslHandshake (key 17), versions 0-1 advertised as Kafka 4.4 does, 1
// served.
//
// Behaviour:
//   - On a SASL_PLAINTEXT or SASL_SSL connection (sasl_conn.go): the
//     mechanism is one of the listener's sasl.enabled.mechanisms: answered
//     with NONE and the enabled list, and the connection then expects
//     SaslAuthenticate. Otherwise UNSUPPORTED_SASL_MECHANISM with the
//     enabled list, then the connection is closed after
//     connection.failed.authentication.delay.ms.
//   - On an authenticated connection whose client used SaslAuthenticate
//     v1+: begins a re-authentication (KIP-368); another mechanism than
//     the session's is answered NONE, and the SaslAuthenticate that
//     follows fails, as Kafka's REAUTH_BAD_MECHANISM state does.
//   - On a PLAINTEXT or SSL listener, during an exchange, or on an
//     authenticated connection whose client cannot re-authenticate:
//     ILLEGAL_SASL_STATE (what Kafka's request handler answers).
//
// Deviations from Apache Kafka: v0 (after which the SASL tokens travel as
// bare size-prefixed frames, not in SaslAuthenticate) is advertised but
// refused, closing the connection, as Produce v0-2 are: librdkafka only
// uses SASL when it sees v0 advertised, and then (like the Java client and
// franz-go) sends v1.

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func init() {
	register(kmsg.SASLHandshake.Int16(), 0, 1, handleSaslHandshake, advertisedButRefusedBelow(1))
}

func handleSaslHandshake(_ context.Context, _ *Server, r *Request) (Reply, error) {
	req := r.Msg.(*kmsg.SASLHandshakeRequest)
	resp := req.ResponseKind().(*kmsg.SASLHandshakeResponse)
	if r.sasl == nil {
		resp.ErrorCode = kerr.IllegalSaslState.Code
		return resp, nil
	}
	r.sasl.handshake(req, resp)
	return resp, nil
}

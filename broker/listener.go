package broker

// Listeners and the identity of a connection's client.
//
// A broker serves one or more listeners (Kafka's `listeners`), each with a
// name and a security protocol (Kafka's `listener.security.protocol.map`).
// Every connection knows the listener it arrived on and, once it has
// authenticated (TLS client certificate or SASL), its principal; handlers
// see both on the Request, and the authorizer decides with the principal
// and the client's host.

import (
	"crypto/tls"
	"net"
)

// SecurityProtocol is a Kafka security protocol name.
type SecurityProtocol string

// Kafka's four security protocols.
const (
	ProtocolPlaintext     SecurityProtocol = "PLAINTEXT"
	ProtocolSSL           SecurityProtocol = "SSL"
	ProtocolSASLPlaintext SecurityProtocol = "SASL_PLAINTEXT"
	ProtocolSASLSSL       SecurityProtocol = "SASL_SSL"
)

// UsesTLS reports whether connections on the protocol start with a TLS
// handshake.
func (p SecurityProtocol) UsesTLS() bool { return p == ProtocolSSL || p == ProtocolSASLSSL }

// UsesSASL reports whether connections on the protocol must authenticate
// with SASL before anything but ApiVersions and the SASL requests.
func (p SecurityProtocol) UsesSASL() bool { return p == ProtocolSASLPlaintext || p == ProtocolSASLSSL }

// Valid reports whether p is one of Kafka's four protocols.
func (p SecurityProtocol) Valid() bool {
	switch p {
	case ProtocolPlaintext, ProtocolSSL, ProtocolSASLPlaintext, ProtocolSASLSSL:
		return true
	}
	return false
}

// AnonymousPrincipal is Kafka's principal of a connection that has not
// authenticated (PLAINTEXT, or SSL without a client certificate).
const AnonymousPrincipal = "User:ANONYMOUS"

// Listener is one endpoint the broker accepts connections on.
type Listener struct {
	// Name is the listener name ("PLAINTEXT", "SASL_SSL", "INTERNAL", ...),
	// as in Kafka's `listeners` and `listener.name.<name>.` prefixes.
	Name string
	// Protocol is the listener's security protocol.
	Protocol SecurityProtocol
	// Advertised is the host:port Metadata and friends name for this
	// listener; empty means derived from the bound address (and the
	// Config's AdvertisedHost/AdvertisedPort for the default listener).
	Advertised string
	// TLS is the server side of the handshake for SSL and SASL_SSL
	// listeners (nil otherwise). Its GetConfigForClient/GetCertificate
	// may reload certificates.
	TLS *tls.Config

	// TLS and listeners.
	//
	// Bind is the address to listen on (host:port, port 0 for any free
	// port) for whoever binds the listeners of Config.Listeners; Serve
	// and ServeListener take a bound net.Listener and ignore it.
	Bind string
	// Principal maps the state of a finished TLS handshake to the
	// connection's principal (tlsconf.Server.Principal: the mapped subject
	// of a verified client certificate): ok false leaves it anonymous, an
	// error fails the connection's authentication and closes it. Nil: TLS
	// connections stay anonymous.
	Principal func(tls.ConnectionState) (principal string, ok bool, err error)
}

// defaultListener is the listener Serve uses: plaintext, named as
// Kafka's default.
func defaultListener() *Listener {
	return &Listener{Name: string(ProtocolPlaintext), Protocol: ProtocolPlaintext}
}

// hostOf returns the IP of a remote address as the authorizer matches
// hosts ("127.0.0.1"), or the address's string when it has no IP.
func hostOf(a net.Addr) string {
	if ta, ok := a.(*net.TCPAddr); ok {
		return ta.IP.String()
	}
	if a == nil {
		return ""
	}
	if h, _, err := net.SplitHostPort(a.String()); err == nil {
		return h
	}
	return a.String()
}

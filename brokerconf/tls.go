package brokerconf

import (
	"fmt"
	"strings"

	"github.com/verbatim-kafka/verbatim/broker"
	"github.com/verbatim-kafka/verbatim/tlsconf"
)

// The ssl.* broker properties Verbatim implements, all listener-scoped
// (listener.name.<l>.ssl.* wins over ssl.* for listener l). They are read
// together by finishTLS, which builds each SSL and SASL_SSL listener's
// configuration with package tlsconf; Apply only checks what can be
// checked alone.
var tlsProperties = []struct {
	name   string
	secret bool
	check  func(string) error
	doc    string
}{
	{tlsconf.PropKeystoreType, false, oneOfFold("JKS", "PKCS12", "PEM"), "Keystore format: JKS (Kafka's default), PKCS12 or PEM."},
	{tlsconf.PropKeystoreLocation, false, nil, "Keystore file (reloaded when it changes)."},
	{tlsconf.PropKeystorePassword, true, nil, "Keystore password (JKS, PKCS12)."},
	{tlsconf.PropKeyPassword, true, nil, "Password of the key in a JKS keystore (encrypted PEM keys are refused)."},
	{tlsconf.PropKeystoreChain, false, nil, "Inline PEM certificate chain (with ssl.keystore.key and ssl.keystore.type=PEM)."},
	{tlsconf.PropKeystoreKey, true, nil, "Inline unencrypted PEM private key (PKCS#8)."},
	{tlsconf.PropTruststoreType, false, oneOfFold("JKS", "PKCS12", "PEM"), "Truststore format: JKS (Kafka's default), PKCS12 or PEM."},
	{tlsconf.PropTruststoreLocation, false, nil, "Truststore file verifying client certificates (reloaded when it changes)."},
	{tlsconf.PropTruststorePassword, true, nil, "Truststore password (JKS, PKCS12)."},
	{tlsconf.PropTruststoreCerts, false, nil, "Inline PEM trusted certificates (ssl.truststore.type=PEM)."},
	{tlsconf.PropClientAuth, false, oneOfFold("none", "requested", "required"), "Client certificates: none, requested or required."},
	{tlsconf.PropEnabledProtocols, false, nil, "TLS versions: TLSv1.2 and/or TLSv1.3 (older ones are refused)."},
	{tlsconf.PropProtocol, false, nil, "TLSv1.3 (default) or TLSv1.2 (caps the version)."},
	{tlsconf.PropCipherSuites, false, nil, "TLS 1.2 cipher suites by IANA name; default: Go's secure suites."},
	{tlsconf.PropEndpointIdentification, false, nil, "Accepted; a broker does not verify client host names."},
	{tlsconf.PropPrincipalMapping, false, checkRules, "Rules mapping a client certificate's RFC 2253 subject to the principal name (Kafka's syntax)."},
	{tlsconf.PropAllowDNChanges, false, oneOfFold("true", "false"), "Whether a reloaded keystore may change the certificate's subject (default false)."},
	{tlsconf.PropAllowSANChanges, false, oneOfFold("true", "false"), "Whether a reloaded keystore may change the certificate's subject alternative names (default false)."},
	// The JSSE algorithm names have a single meaning here; Kafka's
	// defaults are accepted.
	{"ssl.keymanager.algorithm", false, oneOfFold("SunX509", "PKIX", "NewSunX509"), "Accepted (Java's key manager; Go's is fixed)."},
	{"ssl.trustmanager.algorithm", false, oneOfFold("PKIX", "SunX509"), "Accepted (Java's trust manager; Go's is PKIX)."},
}

func init() {
	for _, tp := range tlsProperties {
		check := tp.check
		Register(Property{Name: tp.name, Scope: ScopeListener, Order: orderListenerTLS, Secret: tp.secret, Doc: tp.doc,
			Apply: func(_ *broker.Config, _, _, value string) error {
				if check == nil || strings.TrimSpace(value) == "" {
					return nil
				}
				return check(strings.TrimSpace(value))
			}})
	}
	RegisterFinish(finishTLS, buildListenerTLS)
}

func oneOfFold(vals ...string) func(string) error {
	return func(v string) error {
		for _, a := range vals {
			if strings.EqualFold(a, v) {
				return nil
			}
		}
		return fmt.Errorf("%q: must be one of %s", v, strings.Join(vals, ", "))
	}
}

func checkRules(v string) error {
	_, err := tlsconf.ParsePrincipalRules(v)
	return err
}

// buildListenerTLS gives every SSL and SASL_SSL listener its server
// configuration from its ssl.* properties.
func buildListenerTLS(cfg *broker.Config, st *State) error {
	for _, l := range cfg.Listeners {
		if !l.Protocol.UsesTLS() {
			continue
		}
		var o tlsconf.Options
		if cfg.Logger != nil {
			o.Logger = cfg.Logger.With("listener", l.Name)
		}
		srv, err := tlsconf.NewServer(st.ListenerProps(l.Name, "ssl."), o)
		if err != nil {
			return fmt.Errorf("listener %s (%s): %w", l.Name, l.Protocol, err)
		}
		l.TLS = srv.Config()
		if l.Protocol == broker.ProtocolSSL {
			// On SASL_SSL the principal is SASL's, as in Kafka.
			l.Principal = srv.Principal
		}
	}
	return nil
}

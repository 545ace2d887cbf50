package brokerconf

// SASL properties: Kafka's names for the broker's SASL settings
// (broker.Config's SASL block).

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/verbatim-kafka/verbatim/authn"
	"github.com/verbatim-kafka/verbatim/broker"
	"github.com/verbatim-kafka/verbatim/props"
)

// Kafka's login modules for the mechanisms Verbatim implements.
const (
	plainLoginModule = "org.apache.kafka.common.security.plain.PlainLoginModule"
	scramLoginModule = "org.apache.kafka.common.security.scram.ScramLoginModule"
	oauthLoginModule = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule"
)

// serverCallbackHandlers are Kafka's default sasl.server.callback.handler.class
// per mechanism, the only ones Verbatim implements.
var serverCallbackHandlers = map[string]string{
	authn.PLAIN:       "org.apache.kafka.common.security.plain.internals.PlainServerCallbackHandler",
	authn.SCRAMSHA256: "org.apache.kafka.common.security.scram.internals.ScramServerCallbackHandler",
	authn.SCRAMSHA512: "org.apache.kafka.common.security.scram.internals.ScramServerCallbackHandler",
	authn.OAUTHBEARER: "org.apache.kafka.common.security.oauthbearer.internals.unsecured.OAuthBearerUnsecuredValidatorCallbackHandler",
}

// saslOf returns the SASL entry of listener ("" for every listener),
// creating it.
func saslOf(cfg *broker.Config, listener string) *broker.SASLListenerConfig {
	if cfg.SASL == nil {
		cfg.SASL = map[string]*broker.SASLListenerConfig{}
	}
	l := cfg.SASL[listener]
	if l == nil {
		l = &broker.SASLListenerConfig{}
		cfg.SASL[listener] = l
	}
	return l
}

func parseMs(name, value string) (time.Duration, error) {
	n, err := strconv.ParseInt(strings.TrimSpace(value), 10, 64)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("%s: %q is not a number of milliseconds >= 0", name, value)
	}
	return time.Duration(n) * time.Millisecond, nil
}

func init() {
	Register(Property{
		Name:  "sasl.enabled.mechanisms",
		Scope: ScopeListener,
		Order: 10,
		Doc:   "SASL mechanisms a SASL listener accepts: PLAIN, SCRAM-SHA-256, SCRAM-SHA-512, OAUTHBEARER (unsecured tokens, tests only); GSSAPI, Kafka's default, is not implemented",
		Apply: func(cfg *broker.Config, listener, _, value string) error {
			mechs := []string{}
			for _, m := range strings.Split(value, ",") {
				m = strings.TrimSpace(m)
				if m == "" {
					continue
				}
				if !authn.Supported(m) {
					return fmt.Errorf("sasl.enabled.mechanisms: %s is not supported (supported: %s)", m, strings.Join(authn.Mechanisms(), ", "))
				}
				mechs = append(mechs, m)
			}
			saslOf(cfg, listener).Mechanisms = mechs
			return nil
		},
	})
	Register(Property{
		Name:   "sasl.jaas.config",
		Scope:  ScopeMechanism,
		Order:  10,
		Secret: true,
		Doc:    "per listener and mechanism (listener.name.<l>.<mechanism>.sasl.jaas.config): PLAIN's users as PlainLoginModule user_<name>=\"<password>\" options; for SCRAM the login module only (users are in the data dir)",
		Apply: func(cfg *broker.Config, listener, mechanism, value string) error {
			if listener == "" || mechanism == "" {
				return fmt.Errorf("sasl.jaas.config must be set per listener and mechanism, as listener.name.<listener>.<mechanism>.sasl.jaas.config")
			}
			j, err := props.ParseJAAS(value)
			if err != nil {
				return err
			}
			switch mechanism {
			case authn.PLAIN:
				if j.LoginModule != plainLoginModule {
					return fmt.Errorf("listener.name.%s.plain.sasl.jaas.config: login module %s, want %s", strings.ToLower(listener), j.LoginModule, plainLoginModule)
				}
				saslOf(cfg, listener).PlainUsers = authn.PlainUsers(j.Options)
			case authn.SCRAMSHA256, authn.SCRAMSHA512:
				if j.LoginModule != scramLoginModule {
					return fmt.Errorf("listener.name.%s.%s.sasl.jaas.config: login module %s, want %s", strings.ToLower(listener), strings.ToLower(mechanism), j.LoginModule, scramLoginModule)
				}
				// Its username/password are an inter-broker client's,
				// which a single node does not need.
			case authn.OAUTHBEARER:
				if j.LoginModule != oauthLoginModule {
					return fmt.Errorf("listener.name.%s.oauthbearer.sasl.jaas.config: login module %s, want %s", strings.ToLower(listener), j.LoginModule, oauthLoginModule)
				}
				o, err := authn.ParseOAuthUnsecured(j.Options)
				if err != nil {
					return fmt.Errorf("listener.name.%s.oauthbearer.sasl.jaas.config: %w", strings.ToLower(listener), err)
				}
				saslOf(cfg, listener).OAuth = &o
			default:
				return fmt.Errorf("sasl.jaas.config for mechanism %s: the mechanism is not supported (supported: %s)", mechanism, strings.Join(authn.Mechanisms(), ", "))
			}
			return nil
		},
	})
	Register(Property{
		Name:  "sasl.server.callback.handler.class",
		Scope: ScopeMechanism,
		Order: 10,
		Doc:   "per listener and mechanism: only Kafka's defaults (for OAUTHBEARER its unsecured validator, which checks no signature: for tests only)",
		Apply: func(_ *broker.Config, listener, mechanism, value string) error {
			value = strings.TrimSpace(value)
			if want, ok := serverCallbackHandlers[mechanism]; ok && (value == want || value == "") {
				return nil
			}
			return fmt.Errorf("sasl.server.callback.handler.class %q (listener %q, mechanism %q): only Kafka's default handler of each mechanism is implemented", value, listener, mechanism)
		},
	})
	Register(Property{
		Name:  "connections.max.reauth.ms",
		Scope: ScopeListener,
		Order: 10,
		Doc:   "longest SASL session before the client must re-authenticate (KIP-368); 0 (default): sessions last as long as the connection",
		Apply: func(cfg *broker.Config, listener, _, value string) error {
			d, err := parseMs("connections.max.reauth.ms", value)
			if err != nil {
				return err
			}
			saslOf(cfg, listener).MaxReauth = &d
			return nil
		},
	})
	Register(Property{
		Name:  "sasl.server.max.receive.size",
		Scope: ScopeBroker,
		Order: 10,
		Doc:   "largest frame a SASL connection may send before it has authenticated (default 524288)",
		Apply: func(cfg *broker.Config, _, _, value string) error {
			n, err := strconv.ParseInt(strings.TrimSpace(value), 10, 32)
			if err != nil || n < 64 {
				return fmt.Errorf("sasl.server.max.receive.size: %q is not a size >= 64", value)
			}
			cfg.SASLMaxReceiveSize = int32(n)
			return nil
		},
	})
	Register(Property{
		Name:  "connection.failed.authentication.delay.ms",
		Scope: ScopeBroker,
		Order: 10,
		Doc:   "how long a connection whose authentication failed stays open after the failure is answered (default 100)",
		Apply: func(cfg *broker.Config, _, _, value string) error {
			d, err := parseMs("connection.failed.authentication.delay.ms", value)
			if err != nil {
				return err
			}
			cfg.FailedAuthenticationDelay = &d
			return nil
		},
	})
	Register(Property{
		Name:  "sasl.mechanism.inter.broker.protocol",
		Scope: ScopeBroker,
		Order: 10,
		Doc:   "cluster mode: the SASL mechanism (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512) this broker authenticates with on a SASL inter-broker listener, with the username and password of listener.name.<l>.<mechanism>.sasl.jaas.config; ignored on a single node",
		Apply: func(*broker.Config, string, string, string) error { return nil },
	})
}

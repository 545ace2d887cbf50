package brokerconf

import (
	"fmt"
	"strings"

	"github.com/verbatim-kafka/verbatim/broker"
	"github.com/verbatim-kafka/verbatim/client"
	"github.com/verbatim-kafka/verbatim/props"
	"github.com/verbatim-kafka/verbatim/tlsconf"
)

// interBrokerClient is how this broker dials the others (followers'
// fetches, coordinators' markers and verifications), as a Kafka broker
// does on its inter-broker listener: the listener's security protocol;
// for SSL and SASL_SSL the listener's own ssl.* settings
// (listener.name.<l>.ssl.* over ssl.*) as the client side: its
// truststore verifies the other brokers, its keystore is the client
// certificate (mTLS), ssl.endpoint.identification.algorithm (default
// https) checks their host names; for SASL_PLAINTEXT and SASL_SSL the
// mechanism sasl.mechanism.inter.broker.protocol (PLAIN, SCRAM-SHA-256 or
// SCRAM-SHA-512) with the username and password of that listener's
// listener.name.<l>.<mechanism>.sasl.jaas.config (or sasl.jaas.config).
func interBrokerClient(cfg *broker.Config, all *props.Props, listener string) (client.Options, error) {
	var o client.Options
	proto := broker.ProtocolPlaintext
	for i, l := range cfg.Listeners {
		if (listener == "" && i == 0) || strings.EqualFold(l.Name, listener) {
			proto, listener = l.Protocol, l.Name
			break
		}
	}
	if proto.UsesTLS() {
		p := (&State{all: all}).ListenerProps(listener, "ssl.")
		p.Set(tlsconf.PropSecurityProtocol, string(proto))
		tc, err := tlsconf.ClientConfig(p)
		if err != nil {
			return o, fmt.Errorf("the inter-broker listener %s's client side: %w", listener, err)
		}
		o.TLS = tc
	}
	if proto != broker.ProtocolSASLPlaintext && proto != broker.ProtocolSASLSSL {
		return o, nil
	}
	mech, _ := all.Get("sasl.mechanism.inter.broker.protocol")
	mech = strings.ToUpper(strings.TrimSpace(mech))
	switch mech {
	case "PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512":
	case "":
		return o, fmt.Errorf("the inter-broker listener %s is %s: set sasl.mechanism.inter.broker.protocol (PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512; Kafka's default GSSAPI is not supported)", listener, proto)
	default:
		return o, fmt.Errorf("sasl.mechanism.inter.broker.protocol=%s is not supported: use PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512", mech)
	}
	jaasName := listenerPrefix + strings.ToLower(listener) + "." + strings.ToLower(mech) + ".sasl.jaas.config"
	jaas, ok := getFold(all, jaasName)
	if !ok {
		if jaas, ok = all.Get("sasl.jaas.config"); !ok {
			return o, fmt.Errorf("sasl.mechanism.inter.broker.protocol=%s needs %s with the brokers' username and password", mech, jaasName)
		}
	}
	sp := props.New()
	sp.Set(tlsconf.PropSecurityProtocol, string(broker.ProtocolSASLPlaintext))
	sp.Set("sasl.mechanism", mech)
	sp.Set("sasl.jaas.config", jaas)
	so, err := client.FromProps(sp)
	if err != nil {
		// Never the value: it holds the password.
		return o, fmt.Errorf("%s for the inter-broker client: %w", jaasName, err)
	}
	o.SASL = so.SASL
	return o, nil
}

// getFold is a property whose name matches without regard to case (the
// listener part of listener.name.<l>.*).
func getFold(p *props.Props, name string) (string, bool) {
	if v, ok := p.Get(name); ok {
		return v, true
	}
	for _, k := range p.Keys() {
		if strings.EqualFold(k, name) {
			return p.Get(k)
		}
	}
	return "", false
}

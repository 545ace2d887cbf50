package client

// Options from Kafka client properties (the --source-config and
// --dest-config files of the mirroring tools): security.protocol, ssl.*
// through tlsconf, sasl.mechanism PLAIN / SCRAM-SHA-256 / SCRAM-SHA-512
// and sasl.jaas.config in Kafka's PlainLoginModule / ScramLoginModule
// syntax, client.id. Every other Kafka client property (producer,
// consumer, admin and common ones) is accepted and has no effect; a name
// that is not one is refused, naming its line, so a typo cannot pass
// silently. No error names a value: passwords stay out of messages.

import (
	"fmt"
	"strings"

	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/verbatim-kafka/verbatim/props"
	"github.com/verbatim-kafka/verbatim/tlsconf"
)

// The JAAS login modules of Kafka's PLAIN and SCRAM client logins.
const (
	plainLoginModule = "org.apache.kafka.common.security.plain.PlainLoginModule"
	scramLoginModule = "org.apache.kafka.common.security.scram.ScramLoginModule"
)

// ReadConfig reads a Kafka client properties file into Options; errors
// name the file and the line.
func ReadConfig(path string) (Options, error) {
	p, err := props.ReadFile(path)
	if err != nil {
		return Options{}, err
	}
	o, err := FromProps(p)
	if err != nil {
		return Options{}, fmt.Errorf("%s: %w", path, err)
	}
	return o, nil
}

// FromProps builds connection options from Kafka client properties. The
// caller's defaults (ClientID) apply where the properties set nothing.
func FromProps(p *props.Props) (Options, error) {
	var o Options
	for _, k := range p.Keys() {
		if !isClientProperty(k) {
			return o, fmt.Errorf("line %d: %q is not a Kafka client property", p.Line(k), k)
		}
	}
	if v, ok := p.Get("client.id"); ok {
		o.ClientID = v
	}
	sp, _ := p.Get(tlsconf.PropSecurityProtocol)
	switch sp = strings.ToUpper(strings.TrimSpace(sp)); sp {
	case "", "PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL":
	default:
		return o, fmt.Errorf("line %d: %s=%s: must be PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL", p.Line(tlsconf.PropSecurityProtocol), tlsconf.PropSecurityProtocol, sp)
	}
	var err error
	if o.TLS, err = tlsconf.ClientConfig(p); err != nil {
		return o, err
	}
	if strings.HasPrefix(sp, "SASL_") {
		if o.SASL, err = mechanism(p); err != nil {
			return o, err
		}
	}
	return o, nil
}

// mechanism is the SASL client of sasl.mechanism and sasl.jaas.config.
func mechanism(p *props.Props) (sasl.Mechanism, error) {
	mech, ok := p.Get("sasl.mechanism")
	mech = strings.TrimSpace(mech)
	if !ok || mech == "" {
		mech = "GSSAPI" // Kafka's default
	}
	var module string
	switch mech {
	case "PLAIN":
		module = plainLoginModule
	case "SCRAM-SHA-256", "SCRAM-SHA-512":
		module = scramLoginModule
	default:
		return nil, fmt.Errorf("line %d: sasl.mechanism=%s is not supported: use PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512", p.Line("sasl.mechanism"), mech)
	}
	raw, ok := p.Get("sasl.jaas.config")
	if !ok {
		return nil, fmt.Errorf("sasl.mechanism=%s needs sasl.jaas.config (%s required username=\"...\" password=\"...\";)", mech, module)
	}
	line := p.Line("sasl.jaas.config")
	j, err := props.ParseJAAS(raw)
	if err != nil {
		return nil, fmt.Errorf("line %d: %w", line, err)
	}
	if j.LoginModule != module {
		return nil, fmt.Errorf("line %d: sasl.jaas.config: login module %s does not serve sasl.mechanism=%s (want %s)", line, j.LoginModule, mech, module)
	}
	user, pass := j.Options["username"], j.Options["password"]
	if user == "" {
		return nil, fmt.Errorf("line %d: sasl.jaas.config: no username", line)
	}
	if _, ok := j.Options["password"]; !ok {
		return nil, fmt.Errorf("line %d: sasl.jaas.config: no password", line)
	}
	switch mech {
	case "PLAIN":
		return plain.Auth{User: user, Pass: pass}.AsMechanism(), nil
	}
	a := scram.Auth{User: user, Pass: pass, IsToken: strings.EqualFold(j.Options["tokenauth"], "true")}
	if mech == "SCRAM-SHA-256" {
		return a.AsSha256Mechanism(), nil
	}
	return a.AsSha512Mechanism(), nil
}

// isClientProperty reports a Kafka (4.x) client configuration name:
// common, admin, producer and consumer ones.
func isClientProperty(k string) bool { return clientProperties[k] || securityProperties[k] }

// securityProperties are the client's ssl.*, sasl.* and metrics.* names
// (apart from clientProperties only to keep either list readable).
var securityProperties = set(
	"sasl.oauthbearer.clock.skew.seconds", "sasl.oauthbearer.expected.audience", "sasl.oauthbearer.expected.issuer",
	"sasl.oauthbearer.header.urlencode", "sasl.oauthbearer.jwks.endpoint.refresh.ms", "sasl.oauthbearer.jwks.endpoint.retry.backoff.max.ms",
	"sasl.oauthbearer.jwks.endpoint.retry.backoff.ms", "sasl.oauthbearer.jwks.endpoint.url", "sasl.oauthbearer.scope.claim.name",
	"sasl.oauthbearer.sub.claim.name", "sasl.oauthbearer.token.endpoint.url", "sasl.oauthbearer.jwt.retriever.class",
	"sasl.oauthbearer.jwt.validator.class", "sasl.oauthbearer.scope", "sasl.oauthbearer.client.credentials.client.id",
	"sasl.oauthbearer.client.credentials.client.secret", "sasl.oauthbearer.assertion.algorithm", "sasl.oauthbearer.assertion.claim.aud",
	"sasl.oauthbearer.assertion.claim.exp.seconds", "sasl.oauthbearer.assertion.claim.iss", "sasl.oauthbearer.assertion.claim.jti.include",
	"sasl.oauthbearer.assertion.claim.nbf.seconds", "sasl.oauthbearer.assertion.claim.sub", "sasl.oauthbearer.assertion.file",
	"sasl.oauthbearer.assertion.private.key.file", "sasl.oauthbearer.assertion.private.key.passphrase", "sasl.oauthbearer.assertion.template.file",
	"sasl.login.callback.handler.class", "sasl.login.class", "sasl.login.connect.timeout.ms", "sasl.login.read.timeout.ms",
	"sasl.login.refresh.buffer.seconds", "sasl.login.refresh.min.period.seconds", "sasl.login.refresh.window.factor",
	"sasl.login.refresh.window.jitter", "sasl.login.retry.backoff.max.ms", "sasl.login.retry.backoff.ms",
	"sasl.kerberos.kinit.cmd", "sasl.kerberos.min.time.before.relogin", "sasl.kerberos.service.name",
	"sasl.kerberos.ticket.renew.jitter", "sasl.kerberos.ticket.renew.window.factor",
	"metrics.num.samples", "metrics.recording.level", "metrics.sample.window.ms",
	"ssl.cipher.suites", "ssl.enabled.protocols", "ssl.endpoint.identification.algorithm", "ssl.engine.factory.class",
	"ssl.key.password", "ssl.keymanager.algorithm", "ssl.keystore.certificate.chain", "ssl.keystore.key",
	"ssl.keystore.location", "ssl.keystore.password", "ssl.keystore.type", "ssl.protocol", "ssl.provider",
	"ssl.secure.random.implementation", "ssl.trustmanager.algorithm", "ssl.truststore.certificates",
	"ssl.truststore.location", "ssl.truststore.password", "ssl.truststore.type",
)

var clientProperties = set(
	// Common and admin.
	"bootstrap.servers", "bootstrap.controllers", "client.dns.lookup", "client.id", "client.rack",
	"connections.max.idle.ms", "default.api.timeout.ms", "metadata.max.age.ms", "metadata.recovery.strategy",
	"metadata.recovery.rebootstrap.trigger.ms", "metric.reporters", "receive.buffer.bytes",
	"reconnect.backoff.max.ms", "reconnect.backoff.ms", "request.timeout.ms", "retries", "retry.backoff.max.ms",
	"retry.backoff.ms", "security.protocol", "security.providers", "send.buffer.bytes",
	"socket.connection.setup.timeout.max.ms", "socket.connection.setup.timeout.ms", "auto.include.jmx.reporter",
	"enable.metrics.push", "sasl.client.callback.handler.class", "sasl.jaas.config", "sasl.mechanism",
	// Producer.
	"acks", "batch.size", "buffer.memory", "compression.type", "compression.gzip.level", "compression.lz4.level",
	"compression.zstd.level", "delivery.timeout.ms", "enable.idempotence", "interceptor.classes", "key.serializer",
	"value.serializer", "linger.ms", "max.block.ms", "max.in.flight.requests.per.connection", "max.request.size",
	"metadata.max.idle.ms", "partitioner.class", "partitioner.ignore.keys", "partitioner.adaptive.partitioning.enable",
	"partitioner.availability.timeout.ms", "transaction.timeout.ms", "transactional.id", "transaction.two.phase.commit.enable",
	// Consumer.
	"allow.auto.create.topics", "auto.commit.interval.ms", "auto.offset.reset", "check.crcs", "enable.auto.commit",
	"exclude.internal.topics", "fetch.max.bytes", "fetch.max.wait.ms", "fetch.min.bytes", "group.id",
	"group.instance.id", "group.protocol", "group.remote.assignor", "heartbeat.interval.ms", "isolation.level",
	"key.deserializer", "value.deserializer", "max.partition.fetch.bytes", "max.poll.interval.ms", "max.poll.records",
	"partition.assignment.strategy", "session.timeout.ms", "share.acknowledgement.mode",
)

func set(names ...string) map[string]bool {
	m := make(map[string]bool, len(names))
	for _, n := range names {
		m[n] = true
	}
	return m
}

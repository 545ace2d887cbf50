package brokerconf

import (
	"strings"
	"testing"
	"time"

	"github.com/verbatim-kafka/verbatim/broker"
)

func apply(t *testing.T, cfg *broker.Config, name, listener, mechanism, value string) error {
	t.Helper()
	p, ok := Lookup(name)
	if !ok {
		t.Fatalf("%s is not registered", name)
	}
	return p.Apply(cfg, listener, mechanism, value)
}

func TestSASLProperties(t *testing.T) {
	var cfg broker.Config
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(apply(t, &cfg, "sasl.enabled.mechanisms", "", "", "SCRAM-SHA-512"))
	must(apply(t, &cfg, "sasl.enabled.mechanisms", "SASL_SSL", "", "PLAIN, SCRAM-SHA-256"))
	must(apply(t, &cfg, "sasl.jaas.config", "SASL_SSL", "PLAIN",
		`org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" password="admin-secret" user_admin="admin-secret" user_alice="a;b";`))
	must(apply(t, &cfg, "sasl.jaas.config", "SASL_SSL", "SCRAM-SHA-256", `org.apache.kafka.common.security.scram.ScramLoginModule required;`))
	must(apply(t, &cfg, "connections.max.reauth.ms", "SASL_SSL", "", "60000"))
	must(apply(t, &cfg, "sasl.server.max.receive.size", "", "", "1048576"))
	must(apply(t, &cfg, "connection.failed.authentication.delay.ms", "", "", "0"))
	must(apply(t, &cfg, "sasl.mechanism.inter.broker.protocol", "", "", "PLAIN"))
	must(apply(t, &cfg, "sasl.jaas.config", "SASL_SSL", "OAUTHBEARER",
		`org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required unsecuredValidatorRequiredScope="kafka admin" unsecuredValidatorAllowableClockSkewMs="3000";`))
	must(apply(t, &cfg, "sasl.server.callback.handler.class", "SASL_SSL", "OAUTHBEARER",
		"org.apache.kafka.common.security.oauthbearer.internals.unsecured.OAuthBearerUnsecuredValidatorCallbackHandler"))
	if o := cfg.SASL["SASL_SSL"].OAuth; o == nil || len(o.RequiredScope) != 2 || o.ClockSkew != 3*time.Second || o.PrincipalClaim != "sub" {
		t.Fatalf("oauth options %+v", o)
	}
	l := cfg.SASL["SASL_SSL"]
	if strings.Join(cfg.SASL[""].Mechanisms, ",") != "SCRAM-SHA-512" || strings.Join(l.Mechanisms, ",") != "PLAIN,SCRAM-SHA-256" {
		t.Fatalf("mechanisms %v / %v", cfg.SASL[""].Mechanisms, l.Mechanisms)
	}
	if len(l.PlainUsers) != 2 || l.PlainUsers["alice"] != "a;b" || l.PlainUsers["admin"] != "admin-secret" {
		t.Fatalf("plain users %v", l.PlainUsers)
	}
	if *l.MaxReauth != time.Minute || cfg.SASLMaxReceiveSize != 1<<20 || *cfg.FailedAuthenticationDelay != 0 {
		t.Fatalf("reauth %v max receive %d delay %v", *l.MaxReauth, cfg.SASLMaxReceiveSize, *cfg.FailedAuthenticationDelay)
	}
	for _, c := range []struct{ name, listener, mech, value string }{
		{"sasl.enabled.mechanisms", "", "", "GSSAPI"},
		{"sasl.enabled.mechanisms", "", "", "PLAIN,GSSAPI"},
		{"sasl.server.callback.handler.class", "SASL_SSL", "OAUTHBEARER", "org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler"},
		{"sasl.server.callback.handler.class", "SASL_SSL", "PLAIN", "com.example.MyHandler"},
		{"sasl.jaas.config", "SASL_SSL", "OAUTHBEARER", "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required unsecuredValidatorAllowableClockSkewMs=x;"},
		{"sasl.jaas.config", "", "", "x required;"},
		{"sasl.jaas.config", "SASL_SSL", "", "org.apache.kafka.common.security.plain.PlainLoginModule required;"},
		{"sasl.jaas.config", "SASL_SSL", "PLAIN", "org.apache.kafka.common.security.scram.ScramLoginModule required;"},
		{"sasl.jaas.config", "SASL_SSL", "PLAIN", `org.apache.kafka.common.security.plain.PlainLoginModule required user_a="secret-value"`},
		{"sasl.jaas.config", "SASL_SSL", "GSSAPI", "com.sun.security.auth.module.Krb5LoginModule required;"},
		{"connections.max.reauth.ms", "", "", "-1"},
		{"sasl.server.max.receive.size", "", "", "ten"},
		{"connection.failed.authentication.delay.ms", "", "", "1.5"},
	} {
		err := apply(t, &cfg, c.name, c.listener, c.mech, c.value)
		if err == nil {
			t.Errorf("%s=%q (listener %q, mechanism %q) accepted", c.name, c.value, c.listener, c.mech)
		} else if strings.Contains(err.Error(), "secret-value") {
			t.Errorf("%s: the error shows the secret: %v", c.name, err)
		}
	}
	if p, _ := Lookup("sasl.jaas.config"); !p.Secret {
		t.Error("sasl.jaas.config is not marked secret")
	}
}

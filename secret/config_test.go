package secret

import (
	"errors"
	"reflect"
	"strings"
	"testing"
)

func TestIsSecretName(t *testing.T) {
	for _, n := range []string{"sasl.jaas.config", "ssl.key.password", "ssl.keystore.password", "ssl.truststore.password",
		"ssl.keystore.key", "ssl.keystore.certificate.chain", "ssl.truststore.certificates",
		"sasl.oauthbearer.client.credentials.client.secret", "sasl.oauthbearer.assertion.private.key.passphrase", "some.future.password"} {
		if !IsSecretName(n) {
			t.Errorf("%s is not secret", n)
		}
	}
	for _, n := range []string{"security.protocol", "sasl.mechanism", "ssl.truststore.location", "ssl.keystore.type", "client.id"} {
		if IsSecretName(n) {
			t.Errorf("%s is secret", n)
		}
	}
}

func TestSealOpenMaskConfig(t *testing.T) {
	clear := map[string]string{
		"security.protocol": "SASL_SSL",
		"sasl.mechanism":    "SCRAM-SHA-512",
		"sasl.jaas.config":  `org.apache.kafka.common.security.scram.ScramLoginModule required username="m" password="hunter2";`,
		"ssl.key.password":  "", // empty: nothing to hide
	}
	e := mustNew(t, fast("s", ""))
	sealed, err := SealConfig(e, clear)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(sealed["sasl.jaas.config"], "hunter2") || !strings.Contains(sealed["sasl.jaas.config"], "encryptedPassword:") {
		t.Fatalf("sealed jaas config: %s", sealed["sasl.jaas.config"])
	}
	if sealed["security.protocol"] != "SASL_SSL" || sealed["ssl.key.password"] != "" {
		t.Fatalf("non-secret values changed: %v", sealed)
	}
	opened, err := OpenConfig(e, sealed)
	if err != nil || !reflect.DeepEqual(opened, clear) {
		t.Fatalf("OpenConfig = %v, %v", opened, err)
	}
	if m := MaskConfig(sealed); m["sasl.jaas.config"] != Hidden || m["sasl.mechanism"] != "SCRAM-SHA-512" {
		t.Fatalf("MaskConfig = %v", m)
	}
	// Without an encoder: refused, naming the property, never its value.
	_, err = SealConfig(nil, clear)
	if !errors.Is(err, ErrNoSecret) || !strings.Contains(err.Error(), "sasl.jaas.config") || strings.Contains(err.Error(), "hunter2") {
		t.Fatalf("SealConfig(nil) = %v", err)
	}
	plain := map[string]string{"security.protocol": "PLAINTEXT"}
	if got, err := SealConfig(nil, plain); err != nil || !reflect.DeepEqual(got, plain) {
		t.Fatalf("SealConfig(nil, no secrets) = %v, %v", got, err)
	}
	// Rotation rewrites what the old secret encoded.
	rot := mustNew(t, fast("new", "s"))
	re, changed, err := ReencodeConfig(rot, sealed)
	if err != nil || !changed {
		t.Fatalf("ReencodeConfig: %v %v", changed, err)
	}
	if got, err := OpenConfig(mustNew(t, fast("new", "")), re); err != nil || !reflect.DeepEqual(got, clear) {
		t.Fatalf("re-encoded config with the new secret: %v, %v", got, err)
	}
	if _, err := OpenConfig(mustNew(t, fast("other", "")), sealed); !errors.Is(err, ErrWrongSecret) || !strings.Contains(err.Error(), "sasl.jaas.config") {
		t.Fatalf("OpenConfig with a wrong secret: %v", err)
	}
}

package brokerconf

import (
	"strings"
	"testing"

	"github.com/verbatim-kafka/verbatim/secret"
)

func TestLoadPasswordEncoder(t *testing.T) {
	text := "password.encoder.secret=hunter2-current\npassword.encoder.old.secret=hunter2-old\n" +
		"password.encoder.cipher.algorithm=AES/GCM/NoPadding\npassword.encoder.key.length=256\n" +
		"password.encoder.iterations=2048\npassword.encoder.keyfactory.algorithm=PBKDF2WithHmacSHA256\n"
	cfg, warnings, err := Load(parse(t, text), nil)
	if err != nil || len(warnings) != 0 {
		t.Fatalf("Load: %v %v", warnings, err)
	}
	want := secret.Config{Secret: "hunter2-current", OldSecret: "hunter2-old", CipherAlgorithm: "AES/GCM/NoPadding",
		KeyLength: 256, Iterations: 2048, KeyFactoryAlgorithm: "PBKDF2WithHmacSHA256"}
	if cfg.LinkSecrets != want {
		t.Fatalf("LinkSecrets = %+v", cfg.LinkSecrets)
	}
	for _, p := range []string{"password.encoder.secret", "password.encoder.old.secret"} {
		if prop, _ := Lookup(p); !prop.Secret {
			t.Errorf("%s is not marked Secret", p)
		}
	}
	for _, bad := range []string{
		"password.encoder.secret=hunter2\npassword.encoder.iterations=1000\n",
		"password.encoder.secret=hunter2\npassword.encoder.key.length=64\n",
		"password.encoder.secret=hunter2\npassword.encoder.cipher.algorithm=DES\n",
		"password.encoder.old.secret=hunter2\n",
	} {
		_, _, err := Load(parse(t, bad), nil)
		if err == nil || strings.Contains(err.Error(), "hunter2") {
			t.Errorf("%q: %v, want a refusal without the secret", bad, err)
		}
	}
}

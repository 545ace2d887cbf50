package secret

import (
	"errors"
	"fmt"
	"sort"
	"strings"
)

// Hidden is what a secret value is shown as (Kafka's Password.toString).
const Hidden = "[hidden]"

// secretNames are Kafka's client configs of type PASSWORD (CommonClientConfigs,
// SslConfigs, SaslConfigs).
var secretNames = map[string]bool{
	"sasl.jaas.config":                                  true,
	"ssl.key.password":                                  true,
	"ssl.keystore.password":                             true,
	"ssl.truststore.password":                           true,
	"ssl.keystore.key":                                  true,
	"ssl.keystore.certificate.chain":                    true,
	"ssl.truststore.certificates":                       true,
	"sasl.oauthbearer.client.credentials.client.secret": true,
	"sasl.oauthbearer.assertion.private.key.passphrase": true,
}

// IsSecretName reports whether a Kafka client property holds a secret: a
// PASSWORD-typed config of Kafka's clients, or any name ending in
// .password, .secret or .passphrase (so a property added by a later Kafka
// is hidden rather than shown).
func IsSecretName(name string) bool {
	if secretNames[name] {
		return true
	}
	for _, suf := range []string{".password", ".secret", ".passphrase"} {
		if strings.HasSuffix(name, suf) {
			return true
		}
	}
	return false
}

// SecretNames lists the secret properties of m that have a value, sorted.
func SecretNames(m map[string]string) []string {
	var out []string
	for k, v := range m {
		if v != "" && IsSecretName(k) {
			out = append(out, k)
		}
	}
	sort.Strings(out)
	return out
}

// ErrNoSecret is wrapped by SealConfig's and OpenConfig's errors when the
// broker has no password.encoder.secret and the properties hold secrets.
var ErrNoSecret = errors.New("password.encoder.secret is not set on this broker (needed to store or read secret properties)")

// transform returns a copy of m with every non-empty secret value replaced
// by fn's result; errors name the property, never its value.
func transform(m map[string]string, fn func(string) (string, error)) (map[string]string, error) {
	if m == nil {
		return nil, nil
	}
	out := make(map[string]string, len(m))
	for k, v := range m {
		if v != "" && IsSecretName(k) {
			nv, err := fn(v)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", k, err)
			}
			v = nv
		}
		out[k] = v
	}
	return out, nil
}

// SealConfig returns m with its secret values encoded by e, for storing.
// With e nil, properties without secrets are returned as they are and
// properties with secrets are refused (ErrNoSecret, naming them), as
// Kafka refuses a dynamic password config without password.encoder.secret.
func SealConfig(e *Encoder, m map[string]string) (map[string]string, error) {
	if e == nil {
		return withoutEncoder(m)
	}
	return transform(m, e.Encode)
}

// withoutEncoder is m copied when it holds no secret, else ErrNoSecret
// naming the properties.
func withoutEncoder(m map[string]string) (map[string]string, error) {
	if names := SecretNames(m); len(names) > 0 {
		return nil, fmt.Errorf("%w (%s)", ErrNoSecret, strings.Join(names, ", "))
	}
	return transform(m, nil)
}

// OpenConfig returns stored properties with their secret values decoded.
func OpenConfig(e *Encoder, m map[string]string) (map[string]string, error) {
	if e == nil {
		return withoutEncoder(m)
	}
	return transform(m, e.Decode)
}

// ReencodeConfig returns stored properties with every secret value
// encoded with the current secret; changed reports whether any was
// encoded with the old one (the caller writes them back).
func ReencodeConfig(e *Encoder, m map[string]string) (out map[string]string, changed bool, err error) {
	if e == nil {
		return m, false, nil
	}
	out, err = transform(m, func(v string) (string, error) {
		nv, c, err := e.Reencode(v)
		changed = changed || c
		return nv, err
	})
	return out, changed, err
}

// MaskConfig returns m with its secret values shown as Hidden.
func MaskConfig(m map[string]string) map[string]string {
	out, _ := transform(m, func(string) (string, error) { return Hidden, nil })
	return out
}

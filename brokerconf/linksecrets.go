package brokerconf

// password.encoder.*: the secret with which the cluster link stores its
// source credentials at rest (broker.Config's cluster link secrets block,
// package secret). Kafka 3.x's names and defaults for its dynamic password
// configs; Kafka 4 dropped them with ZooKeeper mode, so they are not among
// Kafka 4.4's names and are registered here as Verbatim's.

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/verbatim-kafka/verbatim/broker"
	"github.com/verbatim-kafka/verbatim/secret"
)

// orderLinkSecrets: after the plain broker settings; nothing depends on it.
const orderLinkSecrets = 20

func registerLinkSecret(name string, isSecret bool, doc string, apply func(c *secret.Config, v string) error) {
	Register(Property{Name: name, Scope: ScopeBroker, Order: orderLinkSecrets, Secret: isSecret, Doc: doc,
		Apply: func(cfg *broker.Config, _, _, v string) error {
			if !isSecret {
				v = strings.TrimSpace(v)
			}
			return apply(&cfg.LinkSecrets, v)
		}})
}

func parseInt(v string, min int) (int, error) {
	n, err := strconv.Atoi(v)
	if err != nil || n < min {
		return 0, fmt.Errorf("%q is not a whole number >= %d", v, min)
	}
	return n, nil
}

func init() {
	registerLinkSecret("password.encoder.secret", true,
		"Secret with which cluster links' source credentials are stored encrypted (Kafka's password encoder); without it a link whose source config has a password is refused.",
		func(c *secret.Config, v string) error { c.Secret = v; return nil })
	registerLinkSecret("password.encoder.old.secret", true,
		"The previous password.encoder.secret while rotating it: stored credentials are re-encoded with the new secret at start.",
		func(c *secret.Config, v string) error { c.OldSecret = v; return nil })
	registerLinkSecret("password.encoder.keyfactory.algorithm", false,
		"PBKDF2 SecretKeyFactory of the password encoder (default PBKDF2WithHmacSHA512).",
		func(c *secret.Config, v string) error { c.KeyFactoryAlgorithm = v; return nil })
	registerLinkSecret("password.encoder.cipher.algorithm", false,
		"Cipher of the password encoder: AES/CBC/PKCS5Padding (default) or AES/GCM/NoPadding.",
		func(c *secret.Config, v string) error { c.CipherAlgorithm = v; return nil })
	registerLinkSecret("password.encoder.key.length", false,
		"Key length in bits of the password encoder: 128 (default), 192 or 256.",
		func(c *secret.Config, v string) (err error) { c.KeyLength, err = parseInt(v, 8); return err })
	registerLinkSecret("password.encoder.iterations", false,
		"PBKDF2 iterations of the password encoder (default 4096, at least 1024).",
		func(c *secret.Config, v string) (err error) {
			c.Iterations, err = parseInt(v, secret.MinIterations)
			return err
		})
	// The settings together: refused at load, not at the first link.
	RegisterFinish(900, func(cfg *broker.Config, _ *State) error {
		c := cfg.LinkSecrets
		if c.Secret == "" {
			if c.OldSecret != "" {
				return fmt.Errorf("password.encoder.old.secret is set without password.encoder.secret")
			}
			return nil
		}
		if _, err := secret.New(c); err != nil {
			return err
		}
		return nil
	})
}

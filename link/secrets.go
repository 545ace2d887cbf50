package link

// A link's source credentials at rest (docs/security.md "A link's source
// credentials at rest"): the link's definition is kept sealed, in memory
// as in its meta file, its secret properties (secret.IsSecretName)
// encoded with the broker's password.encoder.secret (package secret,
// Kafka's encoding). They are opened only to build the source's client
// options, and described masked.

import (
	"errors"
	"fmt"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/verbatim-kafka/verbatim/secret"
	"github.com/verbatim-kafka/verbatim/wireext"
)

// sealConfig returns cfg (as a client sent it) with its secret properties
// encoded for storing. Without password.encoder.secret a config holding a
// secret is refused with INVALID_CONFIG naming the properties, as Kafka
// refuses a dynamic password config without it.
func sealConfig(h syncHost, cfg wireext.LinkConfig) (wireext.LinkConfig, error) {
	sealed, err := secret.SealConfig(h.LinkSecretEncoder(), cfg.SourceConfig)
	if err != nil {
		if errors.Is(err, secret.ErrNoSecret) {
			return cfg, kafkaErr(kerr.InvalidConfig, "link %s: the source config holds secrets (%s) and this broker has no password.encoder.secret to store them encrypted; set it in the broker's properties",
				cfg.Name, strings.Join(secret.SecretNames(cfg.SourceConfig), ", "))
		}
		return cfg, kafkaErr(kerr.InvalidConfig, "link %s: encoding the source config's secrets: %v", cfg.Name, err)
	}
	cfg.SourceConfig = sealed
	return cfg, nil
}

// openConfig returns a stored cfg with its secret properties decoded.
func openConfig(h syncHost, cfg wireext.LinkConfig) (wireext.LinkConfig, error) {
	clear, err := secret.OpenConfig(h.LinkSecretEncoder(), cfg.SourceConfig)
	if err != nil {
		return cfg, fmt.Errorf("link %s: its stored source credentials cannot be used: %w", cfg.Name, err)
	}
	cfg.SourceConfig = clear
	return cfg, nil
}

// reencodeStored re-encodes, while password.encoder.old.secret is set,
// the secrets of a stored link that the old secret encoded; changed
// reports that lm must be written back.
func reencodeStored(h syncHost, lm *linkMeta) (changed bool, err error) {
	enc := h.LinkSecretEncoder()
	if enc == nil || !enc.Rotating() {
		return false, nil
	}
	out, changed, err := secret.ReencodeConfig(enc, lm.Config.SourceConfig)
	if err != nil || !changed {
		return false, err
	}
	lm.Config.SourceConfig = out
	return true, nil
}

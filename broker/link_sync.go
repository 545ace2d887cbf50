package broker

// The broker's side of the cluster link's continuous sync (link/sync.go,
// link/host_sync.go): the encoder of the links' source credentials
// (password.encoder.*), ...

import (
	"fmt"

	"github.com/verbatim-kafka/verbatim/secret"
)

// openLinkSecrets builds the encoder of password.encoder.* (nil without a
// secret). An old secret without a current one is refused: nothing could
// be re-encoded.
func openLinkSecrets(c secret.Config) (*secret.Encoder, error) {
	if c.Secret == "" {
		if c.OldSecret != "" {
			return nil, fmt.Errorf("broker: password.encoder.old.secret is set without password.encoder.secret")
		}
		return nil, nil
	}
	e, err := secret.New(c)
	if err != nil {
		return nil, fmt.Errorf("broker: %w", err)
	}
	return e, nil
}

// LinkSecretEncoder encodes and decodes the links' source credentials
// at rest; nil when the broker has no password.encoder.secret (links
// whose source config holds a secret are then refused).
func (s *Server) LinkSecretEncoder() *secret.Encoder { return s.linkSecrets }

package clustermeta

import (
	"context"
	"errors"
)

// EmbedConfig starts an etcd member inside the broker process
// (go.etcd.io/etcd/server/v3/embed): for small clusters and tests, one
// member per broker, the members listed in InitialCluster.
type EmbedConfig struct {
	// Name is the member's name (default "node-<id>").
	Name string
	// Dir is the member's data directory.
	Dir string
	// ClientURL and PeerURL are where the member listens
	// ("http://127.0.0.1:2379").
	ClientURL, PeerURL string
	// InitialCluster is "name=peerURL,..." of every member (etcd's
	// --initial-cluster); empty: this member alone.
	InitialCluster string
	// ClusterToken is etcd's --initial-cluster-token.
	ClusterToken string
}

// Embedded is a running embedded member.
type Embedded struct {
	// ClientURL is where clients reach it.
	ClientURL string
	impl      interface{ close() }
}

// StartEmbedded starts the member and waits until it serves (the
// cluster has a quorum) or ctx ends.
func StartEmbedded(ctx context.Context, c EmbedConfig) (*Embedded, error) {
	return nil, errors.New("clustermeta: not built yet")
}

// Close stops the member.
func (e *Embedded) Close() {
	if e != nil && e.impl != nil {
		e.impl.close()
	}
}

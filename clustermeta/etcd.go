package clustermeta

import (
	"context"
	"errors"
	"time"
)

// Config opens a Store over an etcd cluster.
type Config struct {
	// Endpoints are the etcd client URLs (metadata.etcd.endpoints).
	Endpoints []string
	// Prefix is the key prefix of this Verbatim cluster (default
	// "/verbatim/"): several clusters may share one etcd.
	Prefix string
	// DialTimeout bounds the first connection (default 5 s).
	DialTimeout time.Duration
}

// Open connects to etcd and returns the Store (creating the cluster id on
// first use).
func Open(ctx context.Context, c Config) (Store, error) {
	return nil, errors.New("clustermeta: not built yet")
}

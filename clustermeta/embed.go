package clustermeta

import (
	"context"
	"fmt"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"

	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap/zapcore"
)

// EmbedConfig starts an etcd member inside the broker process
// (go.etcd.io/etcd/server/v3/embed): for small clusters and tests, one
// member per broker, the members listed in InitialCluster.
type EmbedConfig struct {
	// Name is the member's name (required; serve names it "node-<id>").
	Name string
	// Dir is the member's data directory (created 0700 if absent). A
	// member restarts from it: the initial cluster is read only when it
	// is empty.
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

type embedded struct {
	e       *embed.Etcd
	once    sync.Once
	closing *atomic.Bool
}

func (m *embedded) close() {
	m.once.Do(func() {
		m.closing.Store(true)
		select {
		case <-m.e.Server.ReadyNotify():
		default:
			// Never ready (no quorum): embed's Close waits for client
			// serving that waits for the server to be ready or stopping,
			// so stop the server first.
			m.e.Server.HardStop()
		}
		m.e.Close()
	})
}

// Limits of the embedded member above etcd's defaults (128 operations,
// 1.5 MiB per request): CreateTopic writes one key per partition in one
// transaction.
const (
	embedMaxTxnOps       = 1 << 16
	embedMaxRequestBytes = 10 << 20
)

// StartEmbedded starts the member and waits until it serves (the
// cluster has a quorum) or ctx ends. The members of a new cluster must be
// started together: each waits for a quorum of the others.
func StartEmbedded(ctx context.Context, c EmbedConfig) (*Embedded, error) {
	if c.Name == "" {
		return nil, fmt.Errorf("clustermeta: embedded etcd member without a name")
	}
	if c.Dir == "" {
		return nil, fmt.Errorf("clustermeta: embedded etcd member %s without a data directory", c.Name)
	}
	cu, err := url.Parse(c.ClientURL)
	if err != nil || cu.Host == "" {
		return nil, fmt.Errorf("clustermeta: embedded etcd client URL %q", c.ClientURL)
	}
	pu, err := url.Parse(c.PeerURL)
	if err != nil || pu.Host == "" {
		return nil, fmt.Errorf("clustermeta: embedded etcd peer URL %q", c.PeerURL)
	}
	cfg := embed.NewConfig()
	cfg.Name = c.Name
	cfg.Dir = c.Dir
	cfg.ListenClientUrls, cfg.AdvertiseClientUrls = []url.URL{*cu}, []url.URL{*cu}
	cfg.ListenPeerUrls, cfg.AdvertisePeerUrls = []url.URL{*pu}, []url.URL{*pu}
	cfg.InitialCluster = c.InitialCluster
	if cfg.InitialCluster == "" {
		cfg.InitialCluster = c.Name + "=" + c.PeerURL
	}
	if c.ClusterToken != "" {
		cfg.InitialClusterToken = c.ClusterToken
	}
	cfg.ClusterState = embed.ClusterStateFlagNew
	closing := new(atomic.Bool)
	cfg.ZapLoggerBuilder = embed.NewZapLoggerBuilder(quietLogger(zapcore.WarnLevel, closing))
	cfg.MaxTxnOps = embedMaxTxnOps
	cfg.MaxRequestBytes = embedMaxRequestBytes
	// Keep the last 100000 revisions for watches that fall behind (a
	// compacted watch reloads), not every revision forever.
	cfg.AutoCompactionMode = embed.CompactorModeRevision
	cfg.AutoCompactionRetention = "100000"
	// Brokers speak gRPC to it; no JSON gateway.
	cfg.EnableGRPCGateway = false
	e, err := embed.StartEtcd(cfg)
	if err != nil {
		return nil, fmt.Errorf("clustermeta: starting etcd member %s: %w", c.Name, err)
	}
	m := &embedded{e: e, closing: closing}
	select {
	case <-e.Server.ReadyNotify():
	case err := <-e.Err():
		m.close()
		return nil, fmt.Errorf("clustermeta: etcd member %s: %w", c.Name, err)
	case <-ctx.Done():
		m.close()
		return nil, fmt.Errorf("clustermeta: etcd member %s not serving (members %s): %w", c.Name, strings.TrimSpace(cfg.InitialCluster), ctx.Err())
	}
	return &Embedded{ClientURL: c.ClientURL, impl: m}, nil
}

// Close stops the member.
func (e *Embedded) Close() {
	if e != nil && e.impl != nil {
		e.impl.close()
	}
}

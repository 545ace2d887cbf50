package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strconv"
	"time"

	"github.com/verbatim-kafka/verbatim/broker"
	"github.com/verbatim-kafka/verbatim/brokerconf"
	"github.com/verbatim-kafka/verbatim/clustermeta"
	"github.com/verbatim-kafka/verbatim/controller"
	"github.com/verbatim-kafka/verbatim/props"
	"github.com/verbatim-kafka/verbatim/replica"
)

// clusterNode is what `verbatim serve` runs besides the broker in cluster
// mode (docs/cluster.md): the embedded etcd member when configured, the
// store client, the replica fetchers and the controller candidate. Its
// steps run in serveMain's order: startCluster before broker.Open,
// attach after it, join once the listeners are bound, leave on a signal
// before the broker shuts down, close last.
type clusterNode struct {
	c         *brokerconf.Cluster
	log       *slog.Logger // component=cluster
	base      *slog.Logger // the command's, for the other components
	nodeID    int32
	embedded  *clustermeta.Embedded
	store     clustermeta.Store
	followers *replica.Manager
	// stopMember ends the broker's following of the store (JoinCluster's
	// context; the broker's Shutdown ends it too).
	stopMember context.CancelFunc
	// stopController ends the controller candidate; controllerDone
	// closes when it has returned.
	stopController context.CancelFunc
	controllerDone chan struct{}
}

// clusterStartTimeout bounds the embedded member's start (its peers may
// start seconds apart: the member waits for a quorum) and the first
// connection to the store.
const clusterStartTimeout = 60 * time.Second

// startCluster starts the embedded member (if any) and opens the store,
// and sets cfg.Cluster.
func startCluster(cfg *broker.Config, c *brokerconf.Cluster, log *slog.Logger) (*clusterNode, error) {
	n := &clusterNode{c: c, log: log.With("component", "cluster"), base: log, nodeID: cfg.NodeID}
	ctx, cancel := context.WithTimeout(context.Background(), clusterStartTimeout)
	defer cancel()
	if c.Embed != nil {
		e, err := clustermeta.StartEmbedded(ctx, *c.Embed)
		if err != nil {
			return nil, fmt.Errorf("embedded etcd member %s: %w", c.Embed.Name, err)
		}
		n.embedded = e
		n.log.Info("embedded etcd member serving", "name", c.Embed.Name, "client_url", e.ClientURL)
	}
	st, err := clustermeta.Open(ctx, c.Etcd)
	if err != nil {
		n.close()
		return nil, fmt.Errorf("cluster store at %v: %w", c.Etcd.Endpoints, err)
	}
	n.store = st
	bc := c.Broker
	bc.Store = st
	cfg.Cluster = &bc
	n.log.Info("cluster store open", "endpoints", c.Etcd.Endpoints, "prefix", c.Etcd.Prefix, "cluster_id", st.ClusterID())
	return n, nil
}

// attach installs the replica fetchers on the opened broker (before it
// joins: the first snapshot may make it a follower).
func (n *clusterNode) attach(srv *broker.Server) {
	fc := n.c.Fetch
	fc.Host, fc.Log = replica.BrokerHost(srv), n.base.With("component", "replica-fetcher")
	n.followers = replica.NewManager(fc)
	srv.SetFollowers(n.followers)
	// Followers' fetches and the coordinators' markers and verifications
	// dial the other brokers with the inter-broker listener's TLS and SASL.
	srv.SetInterBrokerClient(n.c.InterBroker)
}

// join registers the broker with the endpoints its listeners serve and
// starts the controller candidate.
func (n *clusterNode) join(srv *broker.Server, listeners []*broker.Listener, lns []net.Listener, cfg *broker.Config) error {
	eps := advertisedEndpoints(listeners, lns, cfg)
	// The broker follows the store until ctx ends: ctx lives until close,
	// cut short only if the registration itself takes too long.
	ctx, cancel := context.WithCancel(context.Background())
	n.stopMember = cancel
	joined := make(chan struct{})
	go func() {
		select {
		case <-joined:
		case <-time.After(clusterStartTimeout):
			cancel()
		}
	}()
	err := srv.JoinCluster(ctx, eps)
	close(joined)
	if err != nil {
		return fmt.Errorf("joining the cluster: %w", err)
	}
	cctx, stop := context.WithCancel(context.Background())
	n.stopController, n.controllerDone = stop, make(chan struct{})
	// The election lease of broker.session.timeout.ms, in whole seconds
	// as the registration's (0, not given: the controller's default).
	ttl := int64((n.c.Broker.SessionTimeout + time.Second - 1) / time.Second)
	go func() {
		defer close(n.controllerDone)
		err := controller.Run(cctx, controller.Config{Store: n.store, NodeID: n.nodeID, SessionTTL: ttl,
			UncleanLeaderElection: n.c.Broker.UncleanLeaderElection, Rebalance: n.c.Rebalance,
			Log: n.base.With("component", "controller")})
		if err != nil && cctx.Err() == nil {
			n.log.Error("controller candidate stopped", "err", err)
		}
	}()
	n.log.Info("serving as a cluster member", "node_id", n.nodeID, "endpoints", eps)
	return nil
}

// leave is the controlled shutdown (controlled.shutdown.enable): the
// registration says ShuttingDown, so the controller moves this broker's
// leaderships to other in-sync replicas and takes it out of the ISRs;
// leave waits, at most until ctx ends, until this broker leads no
// partition that another live in-sync replica could lead.
func (n *clusterNode) leave(ctx context.Context, srv *broker.Server) {
	if !n.c.Broker.ControlledShutdown {
		return
	}
	start := time.Now()
	if err := srv.MarkShuttingDown(ctx); err != nil {
		n.log.Warn("controlled shutdown: cannot mark this broker as shutting down; stopping without moving leadership", "err", err)
		return
	}
	for {
		led, err := n.leads(ctx)
		if err == nil && led == 0 {
			n.log.Info("controlled shutdown: this broker leads no partition another replica could", "took", time.Since(start).Round(time.Millisecond))
			return
		}
		select {
		case <-ctx.Done():
			n.log.Warn("controlled shutdown: leaderships not all moved in time; stopping anyway", "still_led", led, "err", err)
			return
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// leads counts the partitions the store says this broker leads that
// could move: another member of the ISR is registered and not shutting
// down itself (when the whole cluster stops, the last leaders have nowhere
// to go and need not wait).
func (n *clusterNode) leads(ctx context.Context) (int, error) {
	snap, err := n.store.Snapshot(ctx)
	if err != nil {
		return -1, err
	}
	return movableLeaderships(snap, n.nodeID), nil
}

func movableLeaderships(snap *clustermeta.Snapshot, node int32) int {
	led := 0
	for _, ps := range snap.Partitions {
		for _, p := range ps {
			if p.Leader != node {
				continue
			}
			for _, r := range p.ISR {
				if b, ok := snap.Brokers[r]; ok && r != node && !b.ShuttingDown {
					led++
					break
				}
			}
		}
	}
	return led
}

// stopReplication ends the controller candidate (resigning a
// controllership) and the replica fetchers: after leave, before the
// broker shuts down (no fetch appends to a closing log).
func (n *clusterNode) stopReplication() {
	if n.stopController != nil {
		n.stopController()
		<-n.controllerDone
		n.stopController = nil
	}
	if n.followers != nil {
		n.followers.Close()
		n.followers = nil
	}
}

// close releases the store and stops the embedded member, after the
// broker shut down (its registration is gone with its session).
func (n *clusterNode) close() {
	n.stopReplication()
	if n.stopMember != nil {
		n.stopMember()
	}
	if n.store != nil {
		_ = n.store.Close()
		n.store = nil
	}
	if n.embedded != nil {
		n.embedded.Close()
		n.embedded = nil
	}
}

// advertisedEndpoints are the endpoints the broker registers: each
// listener's advertised address, else its bound one (the default
// listener's --advertised-listener overriding; an unspecified IP
// advertised as localhost, as the broker's Metadata does).
func advertisedEndpoints(listeners []*broker.Listener, lns []net.Listener, cfg *broker.Config) []clustermeta.Endpoint {
	eps := make([]clustermeta.Endpoint, 0, len(listeners))
	for i, l := range listeners {
		host, port := "", 0
		if a, ok := lns[i].Addr().(*net.TCPAddr); ok {
			host, port = a.IP.String(), a.Port
			if a.IP.IsUnspecified() {
				host = "localhost"
			}
		}
		if len(cfg.Listeners) == 0 && cfg.AdvertisedHost != "" {
			host, port = cfg.AdvertisedHost, int(cfg.AdvertisedPort)
		}
		if h, p, err := net.SplitHostPort(l.Advertised); err == nil {
			if h != "" {
				host = h
			}
			if v, err := strconv.Atoi(p); err == nil && v > 0 {
				port = v
			}
		}
		eps = append(eps, clustermeta.Endpoint{Listener: l.Name, SecurityProtocol: string(l.Protocol), Host: host, Port: int32(port)})
	}
	return eps
}

// loadClusterConfig reads cluster mode's properties (after the flags were
// applied again: the member's default name is node-<node.id>); nil
// without any metadata.etcd.* setting.
func loadClusterConfig(cfg *broker.Config, p *props.Props, overrides []string, stderr io.Writer) (*brokerconf.Cluster, int) {
	c, warnings, err := brokerconf.LoadCluster(cfg, p, overrides)
	if err != nil {
		fmt.Fprintf(stderr, "verbatim serve: %v\n", err)
		return nil, 2
	}
	for _, w := range warnings {
		cfg.Logger.Warn(w)
	}
	return c, 0
}

package brokerconf

import (
	"fmt"
	"math"
	"net/url"
	"strings"
	"time"

	"github.com/verbatim-kafka/verbatim/broker"
	"github.com/verbatim-kafka/verbatim/client"
	"github.com/verbatim-kafka/verbatim/clustermeta"
	"github.com/verbatim-kafka/verbatim/controller"
	"github.com/verbatim-kafka/verbatim/props"
	"github.com/verbatim-kafka/verbatim/replica"
)

// Cluster is what cluster mode's properties say beyond broker.Config: the
// broker's cluster settings (Broker.Store is left nil: the command opens
// the store), where the store is (an external etcd, or the member this
// process embeds), and the replica fetchers' limits. LoadCluster builds
// it.
type Cluster struct {
	Broker broker.ClusterConfig
	// Etcd is the store's client configuration: metadata.etcd.endpoints,
	// or the embedded member's client URL when only the member is given;
	// metadata.etcd.prefix.
	Etcd clustermeta.Config
	// Embed is the embedded etcd member (metadata.etcd.embed.*); nil with
	// an external etcd only.
	Embed *clustermeta.EmbedConfig
	// Fetch is the replica fetcher manager's configuration (Host and Log
	// left for the command): replica.fetch.*, num.replica.fetchers.
	Fetch replica.Config
	// Rebalance is the controller's automatic preferred-leader rebalance
	// (auto.leader.rebalance.enable, leader.imbalance.*).
	Rebalance controller.RebalanceConfig
	// InterBroker is how this broker dials the others on their
	// inter-broker listener (interbroker.go): the listener's TLS and
	// SASL as a client.
	InterBroker client.Options

	// offsetsRF and txnRF are offsets.topic.replication.factor and
	// transaction.state.log.replication.factor as given (0: not given).
	offsetsRF, txnRF int16
	// etcdSet is set by any metadata.etcd.* name but the prefix;
	// csGiven by controlled.shutdown.enable (its default is true).
	etcdSet, csGiven bool
	// rebalanceGiven is set by auto.leader.rebalance.enable (default
	// true), imbalanceGiven by leader.imbalance.per.broker.percentage.
	rebalanceGiven, imbalanceGiven bool
}

// clusterProp is one cluster-mode property: its name, help line, and how
// its value sets a Cluster.
type clusterProp struct {
	name, doc string
	apply     func(c *Cluster, v string) error
}

// clusterProps are cluster mode's properties, Kafka's names first, then
// Verbatim's metadata.etcd.* (no Kafka equivalent: KRaft keeps the
// metadata in the brokers).
var clusterProps = []clusterProp{
	{"inter.broker.listener.name", "The listener whose advertised endpoint other brokers (followers, the controller) dial; default: the first listener. No effect on a single node.",
		func(c *Cluster, v string) error {
			c.Broker.InterBrokerListener = strings.ToUpper(v)
			return nil
		}},
	{"broker.rack", "This broker's rack: replicas are assigned across racks.",
		func(c *Cluster, v string) error { c.Broker.Rack = v; return nil }},
	{"default.replication.factor", "Replication factor of auto-created topics and of CreateTopics with -1 (default 1).",
		func(c *Cluster, v string) error {
			n, err := intIn(v, 1, math.MaxInt16)
			c.Broker.DefaultReplicationFactor = int16(n)
			return err
		}},
	{"offsets.topic.replication.factor", "Replication factor of __consumer_offsets (default 3, lowered to the live brokers when fewer).",
		func(c *Cluster, v string) error {
			n, err := intIn(v, 1, math.MaxInt16)
			c.offsetsRF = int16(n)
			return err
		}},
	{"transaction.state.log.replication.factor", "Replication factor of __transaction_state (default 3, lowered to the live brokers when fewer); must equal offsets.topic.replication.factor when both are set.",
		func(c *Cluster, v string) error {
			n, err := intIn(v, 1, math.MaxInt16)
			c.txnRF = int16(n)
			return err
		}},
	{"min.insync.replicas", "Broker default of the topic config min.insync.replicas: acks=all needs this many replicas in sync (default 1).",
		func(c *Cluster, v string) error {
			n, err := intIn(v, 1, math.MaxInt16)
			c.Broker.MinInsyncReplicas = n
			return err
		}},
	{"unclean.leader.election.enable", "Broker default of the topic config: elect a leader outside the ISR when none is in it (may lose acknowledged records; default false).",
		func(c *Cluster, v string) error {
			b, err := boolean(v)
			c.Broker.UncleanLeaderElection = b
			return err
		}},
	{"replica.lag.time.max.ms", "A follower not caught up to the leader's log end for this long leaves the ISR (default 30000).",
		func(c *Cluster, v string) error { return millis(v, &c.Broker.ReplicaLagTimeMax) }},
	{"broker.session.timeout.ms", "The broker's registration lease: a broker silent this long is fenced and loses its leaderships (default 9000; at least 1000, whole seconds).",
		func(c *Cluster, v string) error {
			if err := millis(v, &c.Broker.SessionTimeout); err != nil {
				return err
			}
			if c.Broker.SessionTimeout < time.Second {
				return fmt.Errorf("%q: must be at least 1000 (etcd leases are whole seconds)", v)
			}
			return nil
		}},
	{"controlled.shutdown.enable", "On SIGTERM, move this broker's leaderships away before stopping (default true).",
		func(c *Cluster, v string) error {
			b, err := boolean(v)
			c.Broker.ControlledShutdown, c.csGiven = b, true
			return err
		}},
	{"auto.leader.rebalance.enable", "The controller moves leaderships back to the preferred replicas (the first of each assignment) of brokers whose imbalance is above leader.imbalance.per.broker.percentage (default true).",
		func(c *Cluster, v string) error {
			b, err := boolean(v)
			c.Rebalance.Enable, c.rebalanceGiven = b, true
			return err
		}},
	{"leader.imbalance.check.interval.seconds", "How often the controller checks the leader imbalance (default 300).",
		func(c *Cluster, v string) error {
			n, err := intIn(v, 1, math.MaxInt32)
			c.Rebalance.Interval = time.Duration(n) * time.Second
			return err
		}},
	{"leader.imbalance.per.broker.percentage", "The share of a broker's preferred partitions, in percent, that may be led by others before the controller rebalances them (default 10).",
		func(c *Cluster, v string) error {
			n, err := intIn(v, 0, 100)
			c.Rebalance.PerBrokerPercentage, c.imbalanceGiven = n, true
			return err
		}},
	{"replica.selector.class", "KIP-392: " + broker.RackAwareReplicaSelector + " points consumers that send client.rack to an in-sync replica in their rack, and followers serve them; empty or Kafka's LeaderSelector: consumers read from leaders (default).",
		func(c *Cluster, v string) error {
			switch v {
			case broker.RackAwareReplicaSelector:
				c.Broker.RackAwareReplicaSelector = true
			case "", "org.apache.kafka.common.replica.LeaderSelector":
				c.Broker.RackAwareReplicaSelector = false
			default:
				return fmt.Errorf("%q: only %s and org.apache.kafka.common.replica.LeaderSelector are implemented", v, broker.RackAwareReplicaSelector)
			}
			return nil
		}},
	{"num.replica.fetchers", "Fetcher connections per leader broker (default 1).",
		func(c *Cluster, v string) error {
			n, err := intIn(v, 1, 64)
			c.Broker.NumReplicaFetchers, c.Fetch.Fetchers = n, n
			return err
		}},
	{"replica.fetch.max.bytes", "Bytes a follower's fetch asks of each partition (default 1048576; the first batch comes whole anyway).",
		func(c *Cluster, v string) error { return int32In(v, 1, &c.Fetch.PartitionMaxBytes) }},
	{"replica.fetch.response.max.bytes", "Bytes a follower's fetch response may carry (default 10485760).",
		func(c *Cluster, v string) error { return int32In(v, 1, &c.Fetch.MaxBytes) }},
	{"replica.fetch.min.bytes", "Bytes a follower's fetch waits for (default 1).",
		func(c *Cluster, v string) error { return int32In(v, 1, &c.Fetch.MinBytes) }},
	{"replica.fetch.wait.max.ms", "Longest a follower's fetch waits at the leader for replica.fetch.min.bytes (default 500).",
		func(c *Cluster, v string) error { return int32In(v, 0, &c.Fetch.MaxWaitMs) }},
	// Verbatim's own: where the cluster state is.
	{"metadata.etcd.endpoints", "Cluster mode: comma-separated client URLs of the etcd holding the cluster state (http://host:2379,...); default with an embedded member: its client URL.",
		func(c *Cluster, v string) error {
			urls, err := etcdURLs(v)
			c.Etcd.Endpoints, c.etcdSet = urls, true
			return err
		}},
	{"metadata.etcd.prefix", "Key prefix of this cluster in etcd (default /verbatim/): clusters sharing an etcd use different prefixes.",
		func(c *Cluster, v string) error {
			if !strings.HasPrefix(v, "/") {
				return fmt.Errorf("%q: must start with /", v)
			}
			if !strings.HasSuffix(v, "/") {
				v += "/"
			}
			c.Etcd.Prefix = v
			return nil
		}},
	{"metadata.etcd.embed.dir", "Cluster mode with an embedded etcd member: the member's data directory (not inside log.dirs).",
		func(c *Cluster, v string) error { c.embed().Dir = v; return nil }},
	{"metadata.etcd.embed.client.url", "The embedded member's client URL (http://127.0.0.1:2379).",
		func(c *Cluster, v string) error { return oneURL(v, &c.embed().ClientURL) }},
	{"metadata.etcd.embed.peer.url", "The embedded member's peer URL (http://127.0.0.1:2380).",
		func(c *Cluster, v string) error { return oneURL(v, &c.embed().PeerURL) }},
	{"metadata.etcd.embed.initial.cluster", "Every embedded member as node-<node.id>=<peer url>, comma-separated (etcd's --initial-cluster); default: this member alone.",
		func(c *Cluster, v string) error {
			for _, m := range props.List(v) {
				name, u, ok := strings.Cut(m, "=")
				if !ok || name == "" {
					return fmt.Errorf("%q: expected name=peerURL", m)
				}
				if err := oneURL(u, new(string)); err != nil {
					return err
				}
			}
			c.embed().InitialCluster = strings.Join(props.List(v), ",")
			return nil
		}},
}

func init() {
	for _, p := range clusterProps {
		// Checked here, with the property's line in errors; applied by
		// LoadCluster.
		registerBroker(p.name, 5, p.doc, func(_ *broker.Config, v string) error { return p.apply(&Cluster{}, v) })
	}
}

// LoadCluster reads cluster mode's properties from the same file and
// overrides LoadInto applied to cfg (which it must have succeeded on).
// It returns nil without any metadata.etcd.* setting other than the
// prefix: the single node of today, with a warning naming the cluster
// settings given that then have no effect.
func LoadCluster(cfg *broker.Config, p *props.Props, overrides []string) (*Cluster, []string, error) {
	all := props.New()
	if p != nil {
		all.Merge(p)
	}
	for _, o := range overrides {
		if k, v, ok := strings.Cut(o, "="); ok {
			all.Set(strings.TrimSpace(k), v)
		}
	}
	c := &Cluster{}
	var given []string
	for _, cp := range clusterProps {
		v, ok := all.Get(cp.name)
		if !ok {
			continue
		}
		if err := cp.apply(c, strings.TrimSpace(v)); err != nil {
			return nil, nil, fmt.Errorf("%s: %v", cp.name, err)
		}
		given = append(given, cp.name)
	}
	if !c.etcdSet {
		if c.Etcd.Prefix != "" {
			return nil, nil, fmt.Errorf("metadata.etcd.prefix is set but neither metadata.etcd.endpoints nor metadata.etcd.embed.*: cluster mode needs an etcd")
		}
		var noEffect []string
		for _, n := range given {
			if n != "inter.broker.listener.name" { // a KRaft file names it; harmless
				noEffect = append(noEffect, n)
			}
		}
		var warnings []string
		if len(noEffect) > 0 {
			warnings = append(warnings, "single node (no metadata.etcd.* setting): these cluster settings have no effect: "+strings.Join(noEffect, ", "))
		}
		return nil, warnings, nil
	}
	if err := c.finish(cfg); err != nil {
		return nil, nil, err
	}
	ib, err := interBrokerClient(cfg, all, c.Broker.InterBrokerListener)
	if err != nil {
		return nil, nil, err
	}
	c.InterBroker = ib
	return c, nil, nil
}

// finish checks what needs several properties together. Defaults are
// the components' own (the broker's ClusterConfig, the fetcher manager's,
// the controller's) but for controlled.shutdown.enable, a bool whose zero
// value is not Kafka's default.
func (c *Cluster) finish(cfg *broker.Config) error {
	b := &c.Broker
	if c.offsetsRF != 0 && c.txnRF != 0 && c.offsetsRF != c.txnRF {
		return fmt.Errorf("offsets.topic.replication.factor %d and transaction.state.log.replication.factor %d differ: Verbatim uses one replication factor for its internal topics", c.offsetsRF, c.txnRF)
	}
	b.InternalReplicationFactor = max(c.offsetsRF, c.txnRF)
	if !c.csGiven {
		b.ControlledShutdown = true
	}
	if !c.rebalanceGiven {
		c.Rebalance.Enable = true
	}
	if !c.imbalanceGiven {
		c.Rebalance.PerBrokerPercentage = controller.DefaultLeaderImbalancePercentage
	}
	if b.InterBrokerListener != "" && !hasListener(cfg, b.InterBrokerListener) {
		return fmt.Errorf("inter.broker.listener.name %s is not a listener of listeners", b.InterBrokerListener)
	}
	if e := c.Embed; e != nil {
		if e.Dir == "" || e.ClientURL == "" || e.PeerURL == "" {
			return fmt.Errorf("an embedded etcd member needs metadata.etcd.embed.dir, metadata.etcd.embed.client.url and metadata.etcd.embed.peer.url")
		}
		if e.Name == "" {
			e.Name = fmt.Sprintf("node-%d", cfg.NodeID)
		}
		if e.InitialCluster != "" && !strings.Contains(","+e.InitialCluster, ","+e.Name+"=") {
			return fmt.Errorf("metadata.etcd.embed.initial.cluster does not list this member (%s=<peer url>)", e.Name)
		}
		if len(c.Etcd.Endpoints) == 0 {
			c.Etcd.Endpoints = []string{e.ClientURL}
		}
	}
	if len(c.Etcd.Endpoints) == 0 {
		return fmt.Errorf("cluster mode needs metadata.etcd.endpoints or an embedded member (metadata.etcd.embed.*)")
	}
	if c.Etcd.Prefix == "" {
		c.Etcd.Prefix = "/verbatim/"
	}
	return nil
}

func (c *Cluster) embed() *clustermeta.EmbedConfig {
	if c.Embed == nil {
		c.Embed = &clustermeta.EmbedConfig{}
	}
	c.etcdSet = true
	return c.Embed
}

func millis(v string, d *time.Duration) error {
	n, err := intIn(v, 1, math.MaxInt32)
	*d = time.Duration(n) * time.Millisecond
	return err
}

func int32In(v string, lo int64, dst *int32) error {
	n, err := intIn(v, lo, math.MaxInt32)
	*dst = int32(n)
	return err
}

func oneURL(v string, dst *string) error {
	u, err := url.Parse(v)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("%q: expected an http:// or https:// URL with host:port", v)
	}
	*dst = v
	return nil
}

func etcdURLs(v string) ([]string, error) {
	var out []string
	for _, s := range props.List(v) {
		var u string
		if err := oneURL(s, &u); err != nil {
			return nil, err
		}
		out = append(out, u)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no endpoint in %q", v)
	}
	return out, nil
}

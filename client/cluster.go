package client

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Cluster is a minimal view of one Kafka cluster: its seed address, the
// broker addresses and partition leaders from Metadata, and one Conn per
// broker, re-dialled after failures.
type Cluster struct {
	seed string
	// seeds is the whole bootstrap list (seed is its first address).
	seeds []string
	opts  Options

	mu      sync.Mutex
	conns   map[string]*Conn
	dialing map[string]chan struct{} // closed when the dial ends
	brokers map[int32]string
	// ClusterID is the cluster id from the last Metadata response.
	clusterID string
}

// NewCluster returns a Cluster reached through seed: HOST:PORT, or a
// bootstrap list HOST:PORT,HOST:PORT,... whose addresses are tried in
// order (Kafka's bootstrap.servers); every connection it makes is
// dialled with o.
func NewCluster(seed string, o Options) (*Cluster, error) {
	var seeds []string
	for _, a := range strings.Split(seed, ",") {
		a = strings.TrimSpace(a)
		if a == "" {
			continue
		}
		if _, _, err := net.SplitHostPort(a); err != nil {
			return nil, fmt.Errorf("address %q: %w", a, err)
		}
		seeds = append(seeds, a)
	}
	if len(seeds) == 0 {
		return nil, fmt.Errorf("address %q: no HOST:PORT", seed)
	}
	return &Cluster{seed: seeds[0], seeds: seeds, opts: o, conns: map[string]*Conn{}, dialing: map[string]chan struct{}{}, brokers: map[int32]string{}}, nil
}

// Options are the connection options the cluster dials with.
func (c *Cluster) Options() Options { return c.opts }

// BrokerAddrs returns the broker addresses known from the last Metadata
// response (unordered).
func (c *Cluster) BrokerAddrs() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	addrs := make([]string, 0, len(c.brokers))
	for _, a := range c.brokers {
		addrs = append(addrs, a)
	}
	return addrs
}

// BrokerAddr is the address of the broker with the given node id, from
// the last Metadata response.
func (c *Cluster) BrokerAddr(id int32) (string, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	a, ok := c.brokers[id]
	return a, ok
}

// Seed is the address the cluster is reached through.
func (c *Cluster) Seed() string { return c.seed }

// ClusterID is the cluster id seen in the last Metadata response.
func (c *Cluster) ClusterID() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.clusterID
}

// Conn returns a live connection to addr, dialling when needed; callers
// asking at the same time share one dial, so a burst of requests to a
// broker opens one connection.
func (c *Cluster) Conn(ctx context.Context, addr string) (*Conn, error) {
	for {
		c.mu.Lock()
		cn := c.conns[addr]
		if cn != nil && !cn.Broken() {
			c.mu.Unlock()
			return cn, nil
		}
		if wait, ok := c.dialing[addr]; ok {
			c.mu.Unlock()
			select {
			case <-wait:
				continue
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
		done := make(chan struct{})
		c.dialing[addr] = done
		c.mu.Unlock()
		cn, err := Dial(ctx, addr, c.opts)
		c.mu.Lock()
		delete(c.dialing, addr)
		close(done)
		if err == nil {
			c.conns[addr] = cn
		}
		c.mu.Unlock()
		return cn, err
	}
}

// Any returns a connection to the first seed that answers, or to any
// known broker when none does.
func (c *Cluster) Any(ctx context.Context) (*Conn, error) {
	var err error
	for _, s := range c.seeds {
		var cn *Conn
		if cn, err = c.Conn(ctx, s); err == nil {
			return cn, nil
		}
	}
	for _, a := range c.BrokerAddrs() {
		if cn, err2 := c.Conn(ctx, a); err2 == nil {
			return cn, nil
		}
	}
	return nil, err
}

// BrokerConn returns a connection to the broker with the given node id.
func (c *Cluster) BrokerConn(ctx context.Context, id int32) (*Conn, error) {
	c.mu.Lock()
	addr, ok := c.brokers[id]
	c.mu.Unlock()
	if !ok {
		return nil, fmt.Errorf("broker %d of %s is unknown (no metadata yet)", id, c.seed)
	}
	return c.Conn(ctx, addr)
}

// Close closes every connection.
func (c *Cluster) Close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, cn := range c.conns {
		cn.Close()
	}
	c.conns = map[string]*Conn{}
}

// PartitionMeta is what Metadata says about one partition.
type PartitionMeta struct {
	Leader      int32
	LeaderEpoch int32
	Err         error
}

// TopicMeta is what Metadata says about one topic.
type TopicMeta struct {
	Name       string
	ID         [16]byte
	Err        error
	Partitions []PartitionMeta // by partition index
}

// ErrTopicMissing wraps UNKNOWN_TOPIC_OR_PARTITION answers of Metadata.
var ErrTopicMissing = errors.New("topic does not exist")

// Metadata asks for topics and records the brokers and cluster id.
func (c *Cluster) Metadata(ctx context.Context, topics []string) (map[string]*TopicMeta, error) {
	cn, err := c.Any(ctx)
	if err != nil {
		return nil, err
	}
	req := kmsg.NewPtrMetadataRequest()
	for _, t := range topics {
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic = kmsg.StringPtr(t)
		req.Topics = append(req.Topics, rt)
	}
	req.AllowAutoTopicCreation = false
	resp, err := cn.Request(ctx, req, 12)
	if err != nil {
		return nil, err
	}
	r := resp.(*kmsg.MetadataResponse)
	c.mu.Lock()
	for _, b := range r.Brokers {
		c.brokers[b.NodeID] = net.JoinHostPort(b.Host, strconv.Itoa(int(b.Port)))
	}
	if r.ClusterID != nil {
		c.clusterID = *r.ClusterID
	}
	c.mu.Unlock()
	out := make(map[string]*TopicMeta, len(r.Topics))
	for _, t := range r.Topics {
		if t.Topic == nil {
			continue
		}
		tm := &TopicMeta{Name: *t.Topic, ID: t.TopicID}
		if err := kerr.ErrorForCode(t.ErrorCode); err != nil {
			if errors.Is(err, kerr.UnknownTopicOrPartition) {
				err = fmt.Errorf("%w: %s on %s", ErrTopicMissing, *t.Topic, c.seed)
			}
			tm.Err = err
		}
		n := 0
		for _, p := range t.Partitions {
			if int(p.Partition)+1 > n {
				n = int(p.Partition) + 1
			}
		}
		tm.Partitions = make([]PartitionMeta, n)
		for i := range tm.Partitions {
			tm.Partitions[i] = PartitionMeta{Leader: -1, LeaderEpoch: -1, Err: kerr.UnknownTopicOrPartition}
		}
		for _, p := range t.Partitions {
			tm.Partitions[p.Partition] = PartitionMeta{Leader: p.Leader, LeaderEpoch: p.LeaderEpoch, Err: kerr.ErrorForCode(p.ErrorCode)}
		}
		out[tm.Name] = tm
	}
	return out, nil
}

// Leader returns a connection to the leader of topic/partition and the
// leader epoch Metadata reports.
func (c *Cluster) Leader(ctx context.Context, topic string, partition int32) (*Conn, int32, error) {
	addr, epoch, err := c.LeaderAddr(ctx, topic, partition)
	if err != nil {
		return nil, -1, err
	}
	cn, err := c.Conn(ctx, addr)
	return cn, epoch, err
}

// LeaderAddr returns the address of the leader of topic/partition and the
// leader epoch Metadata reports.
func (c *Cluster) LeaderAddr(ctx context.Context, topic string, partition int32) (string, int32, error) {
	md, err := c.Metadata(ctx, []string{topic})
	if err != nil {
		return "", -1, err
	}
	tm := md[topic]
	switch {
	case tm == nil:
		return "", -1, fmt.Errorf("%w: %s on %s", ErrTopicMissing, topic, c.seed)
	case tm.Err != nil:
		return "", -1, tm.Err
	case int(partition) >= len(tm.Partitions):
		return "", -1, fmt.Errorf("%s has no partition %d on %s", topic, partition, c.seed)
	}
	pm := tm.Partitions[partition]
	if pm.Err != nil {
		return "", -1, fmt.Errorf("%s/%d on %s: %w", topic, partition, c.seed, pm.Err)
	}
	if pm.Leader < 0 {
		return "", -1, fmt.Errorf("%s/%d on %s: %w", topic, partition, c.seed, kerr.LeaderNotAvailable)
	}
	c.mu.Lock()
	addr, ok := c.brokers[pm.Leader]
	c.mu.Unlock()
	if !ok {
		return "", -1, fmt.Errorf("%s/%d on %s: leader %d is not among the brokers", topic, partition, c.seed, pm.Leader)
	}
	return addr, pm.LeaderEpoch, nil
}

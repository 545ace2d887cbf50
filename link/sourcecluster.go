package link

// What a link uses of its source cluster, as an interface: the runner,
// the fetchers (source.go, session.go) and continuous sync (sync.go) reach
// the source only through it, so that the link's deterministic simulation
// (sim_test.go) runs the same code over a fake source cluster.
// clientSource, over package client, is the production implementation.

import (
	"context"
	"regexp"

	"github.com/verbatim-kafka/verbatim/client"
)

// sourceCluster is a link's source cluster.
type sourceCluster interface {
	// Metadata, ClusterID, Seed, BrokerAddr and Close are
	// client.Cluster's.
	Metadata(ctx context.Context, topics []string) (map[string]*client.TopicMeta, error)
	ClusterID() string
	Seed() string
	BrokerAddr(id int32) (string, bool)
	Close()
	// ListOffset (read_uncommitted) and OffsetForLeaderEpoch (as a
	// consumer) ask the broker at addr over the cluster's shared
	// connection to it.
	ListOffset(ctx context.Context, addr string, tp client.TopicPartition, ts int64) (client.OffsetAnswer, error)
	OffsetForLeaderEpoch(ctx context.Context, addr string, tp client.TopicPartition, epoch int32) (client.EpochEnd, error)
	// DialSession opens a fetch session on a connection of its own to
	// the broker at addr.
	DialSession(ctx context.Context, addr string) (fetchSession, error)
	// TopicConfigs, TopicsConfigs, ListGroups and FetchGroupOffsets are
	// package client's functions of the same names over the cluster.
	TopicConfigs(ctx context.Context, topic string) (map[string]string, error)
	TopicsConfigs(ctx context.Context, topics []string) (map[string]map[string]string, map[string]error, error)
	ListGroups(ctx context.Context, re *regexp.Regexp) ([]string, error)
	FetchGroupOffsets(ctx context.Context, group string, topics []string) ([]client.GroupOffset, error)
	// Client is the client cluster behind it, for the requests only the
	// operator's failback sends (its cross-checks with a Verbatim
	// source); nil when there is none (a fake).
	Client() *client.Cluster
}

// fetchSession is one fetch session (client.FetchSession) on its own
// connection.
type fetchSession interface {
	Fetch(ctx context.Context, want []client.SessionPartition, o client.SessionOptions) (client.SessionResponse, error)
	// Broken reports a failed or closed connection.
	Broken() bool
	Close()
}

// leaderAddr is the address of tp's leader and the leader epoch, from
// fresh metadata (client.Cluster.LeaderAddr over any sourceCluster).
func leaderAddr(ctx context.Context, src sourceCluster, tp client.TopicPartition) (string, int32, error) {
	md, err := src.Metadata(ctx, []string{tp.Topic})
	if err != nil {
		return "", -1, err
	}
	addr, epoch, _, err := leaderOf(src, md, tp)
	return addr, epoch, err
}

// clientSource is a sourceCluster over package client; its ListOffsets
// to a broker are coalesced (offsets.go).
type clientSource struct {
	cl      *client.Cluster
	offsets *offsetBatchers
}

func newClientSource(cl *client.Cluster) clientSource {
	s := clientSource{cl: cl}
	s.offsets = newOffsetBatchers(func(ctx context.Context, addr string, qs []client.OffsetQuery) ([]client.OffsetAnswer, []error, error) {
		cn, err := cl.Conn(ctx, addr)
		if err != nil {
			return nil, nil, err
		}
		return client.ListOffsets(ctx, cn, client.ReadUncommitted, qs)
	})
	return s
}

func (s clientSource) Metadata(ctx context.Context, topics []string) (map[string]*client.TopicMeta, error) {
	return s.cl.Metadata(ctx, topics)
}
func (s clientSource) ClusterID() string                  { return s.cl.ClusterID() }
func (s clientSource) Seed() string                       { return s.cl.Seed() }
func (s clientSource) BrokerAddr(id int32) (string, bool) { return s.cl.BrokerAddr(id) }
func (s clientSource) Close()                             { s.cl.Close() }
func (s clientSource) Client() *client.Cluster            { return s.cl }

func (s clientSource) ListOffset(ctx context.Context, addr string, tp client.TopicPartition, ts int64) (client.OffsetAnswer, error) {
	return s.offsets.ask(ctx, addr, tp, ts)
}

func (s clientSource) OffsetForLeaderEpoch(ctx context.Context, addr string, tp client.TopicPartition, epoch int32) (client.EpochEnd, error) {
	cn, err := s.cl.Conn(ctx, addr)
	if err != nil {
		return client.EpochEnd{}, err
	}
	return client.OffsetForLeaderEpoch(ctx, cn, tp.Topic, tp.Partition, epoch)
}

func (s clientSource) DialSession(ctx context.Context, addr string) (fetchSession, error) {
	cn, err := client.Dial(ctx, addr, s.cl.Options())
	if err != nil {
		return nil, err
	}
	return clientSession{client.NewFetchSession(cn)}, nil
}

func (s clientSource) TopicConfigs(ctx context.Context, topic string) (map[string]string, error) {
	return client.TopicConfigs(ctx, s.cl, topic)
}

func (s clientSource) TopicsConfigs(ctx context.Context, topics []string) (map[string]map[string]string, map[string]error, error) {
	return client.TopicsConfigs(ctx, s.cl, topics)
}

func (s clientSource) ListGroups(ctx context.Context, re *regexp.Regexp) ([]string, error) {
	return client.ListGroups(ctx, s.cl, re)
}

func (s clientSource) FetchGroupOffsets(ctx context.Context, group string, topics []string) ([]client.GroupOffset, error) {
	return client.FetchGroupOffsets(ctx, s.cl, group, topics)
}

// clientSession is a client.FetchSession as a fetchSession.
type clientSession struct{ s *client.FetchSession }

func (c clientSession) Fetch(ctx context.Context, want []client.SessionPartition, o client.SessionOptions) (client.SessionResponse, error) {
	return c.s.Fetch(ctx, want, o)
}
func (c clientSession) Broken() bool { return c.s.Conn().Broken() }
func (c clientSession) Close()       { c.s.Conn().Close() }

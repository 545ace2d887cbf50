package broker

// The follower side of replication (owner: the replication work; see
// cluster_config.go): *Server is the replica fetchers' host (package
// replica cannot be imported here, it imports broker: replica.BrokerHost
// adapts FollowerReplica to replica.Host's Replica), and a
// followed partition's Replica writes the fetched batches into its log
// verbatim (storage.Log.AppendVerbatim: every byte, base offset and leader
// epoch kept, as Kafka's follower append), takes the leader's high
// watermark (bounded by its own log end) and log start, and truncates on
// a leader change. The partition's produce path refuses clients while it
// follows, so the fetcher is the log's only writer then.

import (
	"errors"
	"fmt"
	"net"
	"strconv"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/verbatim-kafka/verbatim/client"
	"github.com/verbatim-kafka/verbatim/metrics"
	"github.com/verbatim-kafka/verbatim/storage"
)

// ReplicaLog is a followed partition's local log, what the fetcher writes
// (package replica names it replica.Replica).
type ReplicaLog interface {
	LogStartOffset() int64
	LogEndOffset() int64
	// LatestEpoch is the leader epoch of the last stored batch (-1: none).
	LatestEpoch() int32
	// EndOffsetForEpoch is OffsetForLeaderEpoch answered locally.
	EndOffsetForEpoch(epoch int32) (int32, int64, error)
	// Append stores batches fetched from the leader verbatim, then takes
	// the leader's high watermark (bounded by the log end) and log start
	// (bounded by that high watermark).
	Append(records []byte, leaderHighWatermark, leaderLogStart int64) error
	// Truncate removes everything at and above offset.
	Truncate(offset int64) error
	// TruncateFullyAndStartAt empties the replica to start at offset.
	TruncateFullyAndStartAt(offset int64) error
}

// NodeID implements replica.Host: node.id.
func (s *Server) NodeID() int32 { return s.cfg.NodeID }

// BrokerEpoch implements replica.Host: the registration's epoch (0 before
// the broker joined).
func (s *Server) BrokerEpoch() int64 { return s.brokerEpoch() }

// LeaderAddr implements replica.Host: node's endpoint on its
// inter-broker listener, from the latest cluster snapshot.
func (s *Server) LeaderAddr(node int32) (string, bool) {
	snap := s.clusterSnapshot()
	if snap == nil {
		return "", false
	}
	b, ok := snap.Brokers[node]
	if !ok {
		return "", false
	}
	name := b.InterBrokerListener
	if name == "" && s.cfg.Cluster != nil {
		name = s.cfg.Cluster.InterBrokerListener
	}
	e, ok := b.Endpoint(name)
	if !ok {
		if len(b.Endpoints) == 0 {
			return "", false
		}
		e = b.Endpoints[0]
	}
	return net.JoinHostPort(e.Host, strconv.Itoa(int(e.Port))), true
}

// InterBrokerClient implements replica.Host: how followers dial leaders,
// plaintext unless SetInterBrokerClient gave the inter-broker listener's
// TLS and SASL.
func (s *Server) InterBrokerClient() client.Options {
	var o client.Options
	if set := s.repl.interBroker.Load(); set != nil {
		o = *set
	}
	if o.ClientID == "" {
		o.ClientID = "verbatim-replica-" + strconv.Itoa(int(s.cfg.NodeID))
	}
	return o
}

// SetInterBrokerClient sets how this broker's followers dial the leaders'
// inter-broker listener (inter.broker.listener.name): its TLS client
// config (the listener's truststore and keystore, tlsconf.ClientConfig)
// and SASL mechanism. Call it before JoinCluster; the fetchers dial with
// it from then on.
func (s *Server) SetInterBrokerClient(o client.Options) { s.repl.interBroker.Store(&o) }

// FollowerReplica is the local replica of a partition this broker
// follows (replica.Host's Replica): NOT_LEADER_OR_FOLLOWER when it leads
// it or does not host it, UNKNOWN_TOPIC_OR_PARTITION when the partition
// does not exist. The replica refuses writes once the role it was handed
// out under ended (a newer leader epoch): ask again after a Follow.
func (s *Server) FollowerReplica(topic string, partition int32) (ReplicaLog, error) {
	t := s.cluster.topic(topic)
	if t == nil {
		return nil, kafkaErr(kerr.UnknownTopicOrPartition, "no topic "+topic)
	}
	p := t.Partition(partition)
	if p == nil {
		return nil, kafkaErr(kerr.UnknownTopicOrPartition, fmt.Sprintf("topic %s has no partition %d", topic, partition))
	}
	rs := p.repl.Load()
	if rs == nil || rs.leader {
		return nil, errNotFollower(p)
	}
	h, err := partitionHandle(p)
	if err != nil {
		return nil, err
	}
	return &followerReplica{s: s, p: p, h: h, rs: rs, m: s.topicMetrics(t)}, nil
}

func errNotFollower(p *Partition) error {
	return kafkaErr(kerr.NotLeaderForPartition, fmt.Sprintf("this broker does not follow %s", p.Dir()))
}

// followerReplica is a followed partition's log, for the fetcher.
type followerReplica struct {
	s  *Server
	p  *Partition
	h  *logHandle
	rs *replState // the role it was handed out under
	// m counts the appended bytes (Kafka's ReplicationBytesIn).
	m *metrics.Topic
}

// current refuses writes once the role it was handed out under ended (a
// newer leader epoch, a leadership of this broker).
func (r *followerReplica) current() error {
	if r.p.repl.Load() != r.rs {
		return errNotFollower(r.p)
	}
	return nil
}

func (r *followerReplica) LogStartOffset() int64 { return r.h.log.LogStartOffset() }
func (r *followerReplica) LogEndOffset() int64   { return r.h.log.LogEndOffset() }

func (r *followerReplica) LatestEpoch() int32 {
	if e, ok := r.h.log.EpochCache().LatestEpoch(); ok {
		return e
	}
	return -1
}

func (r *followerReplica) EndOffsetForEpoch(epoch int32) (int32, int64, error) {
	return r.h.log.EndOffsetForEpoch(epoch)
}

// Append implements replica.Replica.
func (r *followerReplica) Append(records []byte, leaderHW, leaderLogStart int64) error {
	if err := r.current(); err != nil {
		return err
	}
	l := r.h.log
	appended := false
	if len(records) > 0 {
		res, err := l.AppendVerbatim(records)
		if err != nil {
			return err
		}
		appended = !res.AlreadyPresent
		if appended {
			r.m.ReplicationBytesIn.Add(float64(len(records)))
		}
	}
	hw := min(leaderHW, l.LogEndOffset())
	if start := min(leaderLogStart, hw); start > l.LogStartOffset() {
		// The leader's log start (retention, DeleteRecords) moves ours
		// with the call a DeleteRecords makes on a single node (the
		// log-start checkpoint written), never past our high watermark
		// (Kafka's follower: maybeIncrementLogStartOffset refuses an
		// offset above it). The leader counts ours, sent with our next
		// fetch, for its low watermark (replica_logstart.go).
		if _, err := l.DeleteRecords(start); err != nil && !errors.Is(err, storage.ErrOffsetOutOfRange) {
			return err
		}
	}
	if r.p.sourceStart.Load() != nil {
		// A mirror source's epoch at the log start the leader recorded
		// (mirror_start_epoch_cluster.go), once our log start is there.
		r.s.applySourceStart(r.p)
	}
	moved := r.h.hw.Swap(hw) != hw
	if appended || moved {
		r.p.wakeWaiters()
	}
	return nil
}

// Truncate implements replica.Replica (a leader change: what the new
// leader does not have goes).
func (r *followerReplica) Truncate(offset int64) error {
	if err := r.current(); err != nil {
		return err
	}
	if err := r.h.log.Truncate(offset); err != nil {
		return err
	}
	if r.h.hw.Load() > offset {
		r.h.hw.Store(offset)
	}
	return nil
}

// TruncateFullyAndStartAt implements replica.Replica (the leader's log
// start is above our log end).
func (r *followerReplica) TruncateFullyAndStartAt(offset int64) error {
	if err := r.current(); err != nil {
		return err
	}
	if err := r.h.log.TruncateFullyAndStartAt(offset); err != nil {
		return err
	}
	r.h.hw.Store(offset)
	return nil
}

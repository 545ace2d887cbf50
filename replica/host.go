package replica

import (
	"github.com/verbatim-kafka/verbatim/broker"
	"github.com/verbatim-kafka/verbatim/client"
)

// Host is what the fetchers need of the broker; *broker.Server implements
// it (broker/replica_follower.go).
type Host interface {
	// NodeID is this broker's node id (the fetch's replica id).
	NodeID() int32
	// BrokerEpoch is this broker's registration epoch (ReplicaEpoch).
	BrokerEpoch() int64
	// LeaderAddr is node's inter-broker endpoint as HOST:PORT, false when
	// the node is not registered.
	LeaderAddr(node int32) (string, bool)
	// InterBrokerClient is how to dial other brokers (the inter-broker
	// listener's TLS and SASL).
	InterBrokerClient() client.Options
	// Replica is this broker's local replica of a partition it follows.
	Replica(topic string, partition int32) (Replica, error)
}

// Replica is a local follower log: the broker's ReplicaLog (declared
// there, since package broker cannot import this one), which stores what
// the leader returns verbatim, takes the leader's high watermark (bounded
// by the log end) and advances its log start to the leader's (never past
// that high watermark); the fetcher sends the replica's log start with
// every fetch (LogStartOffset), which the leader counts for DeleteRecords.
type Replica = broker.ReplicaLog

// Throttler is the follower side of the replication throttles, which a
// Host may implement (Kafka's follower ReplicationQuotaManager): a
// partition it says is throttled is left out of the fetches until it is
// not, and the bytes fetched are reported to it.
type Throttler interface {
	// FollowerThrottled reports whether the partition's fetch must wait
	// now (it is throttled on this broker and the throttled bytes fetched
	// are above follower.replication.throttled.rate).
	FollowerThrottled(topic string, partition int32) bool
	// FollowerFetched counts bytes of records fetched for the partition.
	FollowerFetched(topic string, partition int32, bytes int)
}

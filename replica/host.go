package replica

import "github.com/verbatim-kafka/verbatim/client"

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

// Replica is a local follower log.
type Replica interface {
	LogStartOffset() int64
	LogEndOffset() int64
	// LatestEpoch is the leader epoch of the last stored batch (-1: none).
	LatestEpoch() int32
	// EndOffsetForEpoch is OffsetForLeaderEpoch answered locally: the
	// largest epoch <= epoch and the end offset of it (-1, -1: none).
	EndOffsetForEpoch(epoch int32) (int32, int64, error)
	// Append stores batches fetched from the leader, which start at
	// LogEndOffset (verbatim: every byte, base offset and epoch kept),
	// then takes the leader's high watermark (bounded by the log end) and
	// advances the log start to the leader's when it is above ours.
	Append(records []byte, leaderHighWatermark, leaderLogStart int64) error
	// Truncate removes everything at and above offset (a leader change).
	Truncate(offset int64) error
	// TruncateFullyAndStartAt empties the replica to start at offset (the
	// leader's log start is above our log end).
	TruncateFullyAndStartAt(offset int64) error
}

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

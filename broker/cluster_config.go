package broker

// Cluster mode: several brokers sharing their state in etcd
// (docs/cluster.md). Config.Cluster nil is the single node of today: local
// metadata files, this node leads every partition. Set, the broker keeps no
// cluster state on its disk: topics, partition assignments, leaders, ISR,
// leader epochs and producer ids come from clustermeta.Store; it hosts the
// partitions it is a replica of, leads those the controller made it leader
// of, and follows the others through Followers.
//
// Who owns what (one file per owner):
//   - cluster_mode.go: joining (registration), the watch of the store and
//     the reconciliation of each snapshot into topics, partitions and the
//     logs of hosted replicas; cluster_mode_open.go: Open's side;
//     cluster_mode_admin.go: topic admin through the store, producer ids
//     from the store; cluster_mode_describe.go: Metadata and the describe
//     APIs over the whole cluster.
//   - replica_role.go, replica_leader.go, replica_follower.go: a hosted
//     partition's role (leader or follower at an epoch), the leader's view
//     of its followers (fetch positions, ISR changes, the high watermark,
//     acks=all), the follower's appends (replica.Host), the high-watermark
//     checkpoint; replica_logstart.go: the followers' log starts, the low
//     watermark and DeleteRecords' wait for it.
//   - coordinators: the group and transaction coordinators load and unload
//     with the leadership of their internal topics' partitions.
//   - cluster_elect.go: ElectLeaders' decisions (controller.Elect) written
//     to the store; replica_readreplica.go: KIP-392's preferred read
//     replica and consumers' fetches on followers.
//   - reassignment: 45_/46_*.go and cluster_mode_reassign.go (the target
//     written to the store, moved replicas removed), broker_dynconfig.go
//     (dynamic broker configs, the throttle rates), replica_throttle.go
//     (the throttles applied), partition_metadata.go.
//   - cluster_security.go: the ACLs and SCRAM credentials in the store
//     (records of kinds "acl" and "scram"), followed by every broker's
//     authorizer and credential store.
//   - mirror_cluster.go, mirror_state_cluster.go, mirror_stop_cluster.go:
//     mirror topics' state in the store, the stop carried out by each
//     partition's leader, the leader's own epoch raises;
//     mirror_start_epoch_cluster.go: the source's epoch at a forwarded
//     log start recorded there and applied by every replica.
//   - link_cluster.go: the cluster links' meta records in the store and
//     the roles the link manager follows (LinkLeads, LinkCoordinator);
//     link_status_cluster.go: mirror status answered with the leaders'
//     view (DescribeMirrors LeaderOnly to the other leaders).

import (
	"time"

	"github.com/verbatim-kafka/verbatim/clustermeta"
)

// ClusterConfig turns cluster mode on (Config.Cluster).
type ClusterConfig struct {
	// Store is the cluster state (etcd); required.
	Store clustermeta.Store
	// Rack is broker.rack (rack-aware assignment, KIP-392 follower fetch).
	Rack string
	// InterBrokerListener is inter.broker.listener.name: the listener
	// whose advertised endpoint followers dial (default: the first
	// listener).
	InterBrokerListener string
	// DefaultReplicationFactor is default.replication.factor (Kafka's
	// default 1), for CreateTopics with -1 and auto-created topics.
	DefaultReplicationFactor int16
	// InternalReplicationFactor is offsets.topic.replication.factor and
	// transaction.state.log.replication.factor (Kafka's default 3; lowered
	// to the live broker count when creating the topic on a smaller
	// cluster, as Kafka refuses instead: see docs/cluster.md).
	InternalReplicationFactor int16
	// MinInsyncReplicas is min.insync.replicas, the topic config's broker
	// default (Kafka's default 1).
	MinInsyncReplicas int
	// UncleanLeaderElection is unclean.leader.election.enable's default.
	UncleanLeaderElection bool
	// ReplicaLagTimeMax is replica.lag.time.max.ms (default 30 s): a
	// follower that has not caught up to the leader's log end for this
	// long leaves the ISR.
	ReplicaLagTimeMax time.Duration
	// SessionTimeout is broker.session.timeout.ms (default 9 s): the
	// registration lease's TTL.
	SessionTimeout time.Duration
	// NumReplicaFetchers is num.replica.fetchers (default 1): fetcher
	// connections per leader broker.
	NumReplicaFetchers int
	// ControlledShutdown is controlled.shutdown.enable (default true).
	ControlledShutdown bool
	// RackAwareReplicaSelector is replica.selector.class set to Kafka's
	// RackAwareReplicaSelector: consumers of Fetch v11+ are pointed to
	// an in-sync replica in their rack, and followers serve them
	// (KIP-392, replica_readreplica.go).
	RackAwareReplicaSelector bool
}

// Followers replicates the partitions this broker follows; the replica
// fetcher manager (package replica) implements it and is installed with
// SetFollowers after Open, before JoinCluster.
type Followers interface {
	// Follow starts replicating each partition from its leader at its
	// leader epoch, replacing an earlier assignment of the same partition
	// (a leader change: the fetcher truncates by OffsetForLeaderEpoch
	// first).
	Follow(parts []FollowedPartition)
	// Unfollow stops replicating the partitions (this broker leads them
	// now, they were deleted or moved away). It returns once no fetch of
	// theirs will append any more.
	Unfollow(parts []TopicPartition)
}

// TopicPartition names a partition.
type TopicPartition struct {
	Topic     string
	Partition int32
}

// FollowedPartition is one partition to follow.
type FollowedPartition struct {
	TopicPartition
	TopicID     [16]byte
	Leader      int32
	LeaderEpoch int32
}

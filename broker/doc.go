// Package broker is the Kafka protocol server: listeners, connections,
// request framing, one handler file per API key (00_produce.go, 01_fetch.go,
// ...), the API version registry behind ApiVersions, topic metadata, and the
// mapping of internal errors to Kafka error codes at one boundary. The group
// and transaction coordinators (groupcoord, txncoord) are state machines
// it builds and calls from its handlers; it implements the narrow
// interface they write through (coordinators.go: internal-topic appends,
// transaction markers, replay, producer ids) and runs their timers. In
// cluster mode they serve the internal partitions this broker leads and
// reach other brokers for markers and verification
// (coordinators_cluster.go, coordinators_peers.go, WriteTxnMarkers).
//
// Its metrics are package metrics' (metrics.go): it resolves the handles
// once (per API at Open, per topic on first use, per listener per
// connection) and counts through them on the request path; the readiness
// it reports (Ready) and the totals read at scrape are its own.
//
// Failures are logged here, once, by the handler that knows the topic,
// partition and client (faultlog.go): refused inputs at WARN, storage
// errors at ERROR, routine answers at DEBUG, all rate-limited
// (internal/lograte); storage and the hot path return errors and never
// log them.
//
// With the authorizer on (authorize.go, package authz) every handler
// checks what Kafka's KafkaApis checks for its API, and the mirror paths
// the mirror permission (CLUSTER_ACTION on CLUSTER); the ACL APIs
// (29-31) manage the persisted ACL set.
//
// It hosts the cluster links (package link, an application above it):
// the link admin requests reach the installed LinkService (links.go), and
// what a link needs of the broker are exported methods (link_*.go): for
// the copies, pull-mode topics (mirror.mode=pull, mirror.link) and the
// in-process mirror append, which shares the wire mirror produce's path
// (prepareMirrorAppend, link_data.go); for repair, the truncation that
// first keeps what it cuts in a keep topic and the failback's conversion
// of a writable topic into a pull mirror (link_repair.go). On a cluster
// DescribeMirrors answers the leaders' view, asking the other leaders
// over the inter-broker connections (link_status_cluster.go), and the
// mirror metrics hold the partitions this broker leads.
//
// In cluster mode (Config.Cluster, cluster_config.go names each part's
// files) it keeps no cluster metadata of its own: the topics, partitions
// and producer-id blocks come from the cluster store (clustermeta), which
// one reconciler goroutine follows, building topics and opening the logs
// of the replicas this broker hosts, applying each hosted partition's role
// in the store's order (cluster_mode.go); the topic admin APIs write to
// the store and wait until the reconciler applied the write
// (cluster_mode_admin.go); Metadata and the describe APIs answer for the
// whole cluster (cluster_mode_describe.go); the ACLs and SCRAM
// credentials are the store's too, every broker's authorizer and
// credential store following the applied snapshots (cluster_security.go).
// It must not decide leaders or ISRs by rules of its own: the controller
// does, and ElectLeaders writes the controller's own decisions
// (controller.Elect) fenced by this broker's registration
// (cluster_elect.go), as leaders write their ISR changes.
//
// In cluster mode (Config.Cluster, cluster_config.go) each hosted replica
// leads or follows at the store's leader epoch (replica_role.go): the
// leader tracks its followers' fetches, the high watermark and the ISR,
// whose changes it writes to the store fenced by its registration, and
// answers acks=all at the high watermark (replica_leader.go); a follower's
// log is written by the replica fetcher (package replica) through
// FollowerReplica (replica_follower.go); the high watermarks are
// checkpointed in the data dir (replica_checkpoint.go); log starts
// replicate with the fetches and DeleteRecords waits for the low
// watermark (replica_logstart.go). The data APIs
// answer NOT_LEADER_OR_FOLLOWER off the leader, but for consumers' fetches
// on followers with the rack-aware replica selector, which the leader
// points to a replica in their rack (KIP-392, replica_readreplica.go).
// Partition reassignment
// (45_alter_partition_reassignments.go, 46_list_partition_reassignments.go)
// writes the target into the store and the reconciler removes the log of
// a replica moved away (cluster_mode_reassign.go); the replication
// throttles are applied on both sides (replica_throttle.go) from the
// dynamic broker configs (broker_dynconfig.go, in the store in cluster
// mode). Every partition directory carries partition.metadata, the topic
// id its log belongs to (partition_metadata.go).
//
// In cluster mode a mirror topic's state (writers, writer epochs, the
// stop) is a record of the cluster store changed by compare-and-swap
// (mirror_state_cluster.go), which also carries the source's leader
// epoch at a forwarded log start for every replica's epoch cache
// (mirror_start_epoch_cluster.go); a mirror stop is decided there and carried
// out by each partition's leader (mirror_stop_cluster.go); a leader's own
// KIP-1279 epoch raise keeps its leadership, and cluster links are
// refused (mirror_cluster.go).
//
// It runs the background work over the logs: retention (partition_log.go)
// and the log cleaner threads, which choose the compacted log to clean and
// have storage clean it (log_cleaner.go).
//
// It owns connections (with the limits on them: connections and frame
// bytes per peer address, the refused connections logged,
// conn_limits.go; the TLS handshake of SSL listeners and the address each
// listener advertises, tls_conn.go; the SASL gate of SASL listeners,
// sasl_conn.go, whose mechanisms and SCRAM store are package authn's, the
// store persisted here, sasl_config.go; the broker's defaults of topic
// configs, topic_defaults.go; the audit log of admin mutations,
// audit.go) and cluster/topic metadata. Certificates and
// keystores are tlsconf's, property names brokerconf's: the broker takes a
// ready *tls.Config per Listener. It must not parse or patch
// record batch bytes itself (hotpath does that) nor touch files directly
// (storage does that, through its FS interface). Its lock order is in
// docs/DESIGN.md ("Locks").
package broker

// Package link is the cluster link: the broker mirrors topics from a
// source Kafka cluster by itself (`verbatim link create`), with KIP-1279's
// partition states, pause and resume, failover (`mirror stop`), divergence
// handling and failback (docs/mirroring.md "Cluster links").
//
// It is an application above the broker and the client: the serve process
// opens a Manager over the broker (Host, host*.go) and installs it as the
// broker's LinkService, which the link admin requests (docs/protocol.md
// "Cluster link APIs") reach after the broker authorized them.
//
// It owns:
//   - the links' definitions and their persisted form (the broker's link
//     meta files), the source credentials encrypted at rest with
//     password.encoder.secret (package secret) and masked when described
//     (secrets.go: sealed in memory too, opened only for the client);
//   - one runner per link: the source cluster's client, topic discovery
//     by the link's patterns, pull-mode mirror topics created like the
//     source's (a round's new topics in one batch, their copies'
//     leader-epoch raises in one write), continuous sync (new partitions; in sync.go configs
//     except the destination's own, deletion and re-creation as FAILED,
//     consumer group offsets clamped as KIP-1279 does);
//   - per partition, the copy state machine of package mirror
//     (mirror.PartitionCopy: writer registration, resume from the log end,
//     divergence detection, log-start forwarding) driven with a Source of
//     shared multi-partition fetch sessions (one or a few connections per
//     source broker, client.FetchSession) and a Dest that appends in
//     process through the broker's mirror append (the same checks and the
//     same path as a mirror produce), and the partition states around it
//     (PREPARING, MIRRORING, PAUSED, STOPPING, STOPPED, FAILED with a
//     reason), persisted where they must survive a restart;
//   - divergence repair and failback (truncate to the common point, the
//     cut records kept in a side topic), and the per-partition status and
//     metrics.
//
// On a replicated cluster every broker runs every link (cluster.go): the
// definitions and per-topic state are the cluster store's records, read
// with a version and written only over it; a partition's copy runs on the
// destination partition's leader and moves with it; discovery and topic
// creation are the link coordinator's (the controller's broker).
//
// Where (core): manager.go is the Manager (Open, Close, the LinkService
// methods that change links), describe.go the per-topic requests and the
// statuses, runner.go a link's runner (discovery, pull-mode topics, the
// writer registration), runner_state.go its changes to the link meta
// (failures, pause), partition.go a partition's copy and its states,
// dest.go the in-process mirror.Dest, state.go the link meta files,
// cluster.go following a cluster (clusterHost).
//
// Where (repair): repair.go the common point (Kafka's follower truncation
// rule across clusters, a pure function over the destination's epoch
// cache and the source's OffsetForLeaderEpoch answers), repair_ops.go the
// truncation to it through the host (the cut kept in a keep topic by
// the broker) and the failback's cross-check with a Verbatim source,
// repair_manager.go the Manager's TruncateMirrorTopics and
// StartMirrorTopics with TruncateToCommon (the failback). It names
// storage.EpochEntry (a plain value the host answers) but never calls
// storage.
//
// The fetch side is source.go (sourceFetchers: a copy's Source, shared
// metadata refreshes, admin requests over the cluster's connection per
// broker), session.go (one fetch session's loop: who is in the next
// request, delivery, re-dial with back-off), budget.go (the fetch buffer:
// bytes delivered and not yet appended, released by the destination's log
// end) and throttle.go (the link's rate cap); docs/mirroring.md "Fetching
// from the source".
//
// The source cluster is reached only through sourceCluster
// (sourcecluster.go: metadata, per-broker ListOffsets and
// OffsetForLeaderEpoch, fetch sessions, configs and groups); package
// client's cluster is its production implementation, the simulation's
// fake source cluster (simsource_test.go) the other.
//
// It must not touch storage or the wire protocol directly: the broker's
// exported methods (Host) and package client are its only I/O, and time
// comes from a Clock so its seeded simulation (sim_test.go, docs/mirroring.md
// "The link's simulation") can drive it.
package link

// Package replica is the follower side of replication (docs/cluster.md,
// "Replication"): the replica fetcher manager that the broker's Followers
// interface is handed (Manager, manager.go), with one or a few fetcher
// connections per leader broker (num.replica.fetchers; fetcher.go), each a
// multi-partition Fetch with a KIP-227 session carrying this broker's
// replica id and broker epoch (leader.go), appending what the leader
// returns verbatim to the local replica (Host) with the leader's high
// watermark and log start, and truncating on a leader change by
// OffsetForLeaderEpoch (KIP-101/KIP-279) or a DivergingEpoch answer, and
// after OFFSET_OUT_OF_RANGE by the leader's log start and end, as Kafka's
// AbstractFetcherThread does (partition.go: the per-partition states and
// transitions). A Host that implements Throttler applies the follower
// side of the replication throttles: a partition it holds back is left
// out of the fetches, and the bytes fetched are reported to it.
//
// The state machine takes its I/O and time as inputs (the leader
// interface, a client.Clock), so tests drive it step by step with a
// simulated leader. A partition's replica is changed only under its
// mutex while it is still followed: Unfollow and a replacing Follow wait
// for a change under way and no answer changes it afterwards (callers of
// Unfollow must not hold what a Replica's Append waits for).
//
// It uses the broker only through Host and the Followers types (package
// broker never imports it; cmd/verbatim wires them) and must not touch
// storage; toward the leader it speaks only through package client.
package replica

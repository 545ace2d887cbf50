// Package replica is the follower side of replication (docs/cluster.md):
// the replica fetcher manager that the broker's Followers interface is
// handed, with one or a few fetcher connections per leader broker
// (num.replica.fetchers), each a multi-partition Fetch with a KIP-227
// session carrying this broker's replica id and broker epoch, appending
// what the leader returns verbatim to the local replica (Host) with the
// leader's high watermark and log start, and truncating on a leader change
// by OffsetForLeaderEpoch (KIP-101/KIP-279) or a DivergingEpoch answer,
// as Kafka's AbstractFetcherThread does.
//
// It uses the broker only through Host and the Followers types (package
// broker never imports it; cmd/verbatim wires them) and must not touch
// storage; toward the leader it speaks only through package client.
package replica

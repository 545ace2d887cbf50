// Package broker is the Kafka protocol server: listeners, connections,
// request framing, one handler file per API key (00_produce.go, 01_fetch.go,
// ...), the API version registry behind ApiVersions, topic metadata, and the
// mapping of internal errors to Kafka error codes at one boundary. The group
// and transaction coordinators (groupcoord, txncoord) are state machines
// it builds and calls from its handlers; it implements the narrow
// interface they write through (coordinators.go: internal-topic appends,
// transaction markers, replay, producer ids) and runs their timers.
//
// It owns connections (with the limits on them: connections and frame
// bytes per peer address, the refusals logged, conn_limits.go) and
// cluster/topic metadata. It must not parse or patch
// record batch bytes itself (hotpath does that) nor touch files directly
// (storage does that, through its FS interface). Its lock order is in
// docs/DESIGN.md ("Locks").
package broker

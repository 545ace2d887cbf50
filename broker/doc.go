// Package broker is the Kafka protocol server: listeners, connections,
// request framing, one handler file per API key (00_produce.go, 01_fetch.go,
// ...), the API version registry behind ApiVersions, topic metadata, and the
// mapping of internal errors to Kafka error codes at one boundary.
//
// It owns connections and cluster/topic metadata. It must not parse or patch
// record batch bytes itself (hotpath does that) nor touch files directly
// (storage does that, through its FS interface).
package broker

// Package client is a thin Kafka protocol client: connections that send
// kmsg requests exactly as built (Dial, ApiVersions negotiation, pipelined
// requests answered in order, the broker's supported features), a minimal
// cluster view (Cluster: Metadata, brokers, partition leaders, one
// connection per broker re-dialled after failures), the raw one-partition
// requests the mirroring tools need (ListOffsets, OffsetForLeaderEpoch,
// sessionless Fetch, multi-partition Fetch in a KIP-227 incremental fetch
// session with topic ids from Fetch v13 (FetchSession; as a consumer or, with
// SessionOptions.Follower, as a broker's replica fetcher), topic configs,
// consumer group listing, coordinator lookup, offset fetch and commit), the classification of errors worth
// retrying (Transient) and the pacing of retries (Clock, Backoff, Retry)
// for callers that retry.
//
// It owns no policy: no request is retried implicitly, and it does not
// decide exit codes, split record sets into batches, or know Verbatim's
// wire extensions (the mirror produce and topic-id tags belong to the
// callers). It never rewrites a request's acks, isolation level or record
// bytes. Dial and NewCluster take an Options struct: TLS, SASL through a
// franz-go sasl.Mechanism (PLAIN, SCRAM) with KIP-368 re-authentication
// on the connection before the session lifetime ends (auth.go), an
// optional dial function (a proxy, a test's connection counter), built
// from Kafka client properties by FromProps / ReadConfig (props.go:
// security.protocol, ssl.* through tlsconf, sasl.mechanism,
// sasl.jaas.config; other Kafka client names accepted, unknown names
// refused). Authentication failures are AuthError, never Transient, and
// no error or log line carries a password.
//
// Requests of extension keys kmsg does not know travel as RawRequest
// (RequestRaw: the caller encodes the body and chose the version after
// checking the broker's supported features; no negotiation); the client
// still does not know their bytes.
package client

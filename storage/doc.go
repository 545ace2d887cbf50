// Package storage is the durable partition log in Apache Kafka's on-disk
// format: segments (.log, .index, .timeindex, .txnindex), the leader-epoch
// checkpoint, producer-state snapshots, the log-start-offset checkpoint,
// roll/retention/truncation, recovery after crashes, and the flush policy
// with group commit.
//
// It offers two append paths: leader append (offsets assigned, producer
// checks as Kafka's leader does them) and verbatim append (the batch keeps
// its offsets, as Kafka's follower append). All I/O goes through FS so that
// crashes and I/O errors can be injected. It must not know about the wire
// protocol or about topic policy.
package storage

// Package txncoord is the transaction coordinator (Kafka's
// TransactionCoordinator, transaction protocol version 1):
// transactional ids, producer id and epoch bumps and fencing, the
// partitions of each transaction, EndTxn with its COMMIT/ABORT markers,
// timeouts, and KIP-890 verification of transactional produce. Its
// durable state is __transaction_state in Kafka's record schemas,
// recovered by replay: of every partition at start on a single node, of
// each partition this broker leads on its election in cluster mode
// (LoadPartition and UnloadPartition, as Kafka's onElection/onResignation).
//
// It owns the in-memory transaction state and decides, under its one
// mutex, what to write and what to answer; records and markers are
// written through the Host the broker implements with the mutex released
// (a transition in flight makes the transaction busy, as Kafka's pending
// state does). It must not import the broker, storage or the group
// coordinator, touch files or connections, or read the wall clock (time
// comes from its coordlog.Clock). Applying a transaction's offsets to its
// group when the marker lands in __consumer_offsets is the broker's
// marker writer's job.
package txncoord

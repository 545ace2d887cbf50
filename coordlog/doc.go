// Package coordlog is the vocabulary the group and transaction coordinators
// share with the broker that stores their state: the records of an
// internal topic (__consumer_offsets, __transaction_state), how a batch of
// them is written, a replayed record with its batch context, the narrow
// Log interface the broker implements, the coordinators' clock, Kafka's
// mapping of a key to an internal-topic partition, and Owned, the table
// of the partitions a coordinator serves (every one on a single node,
// those its broker leads in cluster mode).
//
// It owns no state (an Owned lives in its coordinator, under that
// coordinator's lock) and does no I/O. It must not import the broker,
// storage or either coordinator: the coordinators depend on it, and the
// broker implements its Log over storage.
package coordlog

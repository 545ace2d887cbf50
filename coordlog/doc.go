// Package coordlog is the vocabulary the group and transaction coordinators
// share with the broker that stores their state: the records of an
// internal topic (__consumer_offsets, __transaction_state), how a batch of
// them is written, a replayed record with its batch context, the narrow
// Log interface the broker implements, the coordinators' clock, and
// Kafka's mapping of a key to an internal-topic partition.
//
// It owns no state and does no I/O. It must not import the broker,
// storage or either coordinator: the coordinators depend on it, and the
// broker implements its Log over storage.
package coordlog

// Package groupcoord is the classic group coordinator (Kafka's
// GroupCoordinator for the classic protocol): group
// membership, rebalances, static members, committed and transactional
// offsets, offset retention and group deletion, with its durable state in
// __consumer_offsets in Kafka's record schemas, recovered by replay: of
// every partition at start on a single node, of each partition this
// broker leads on its election in cluster mode (LoadPartition and
// UnloadPartition, as Kafka's onElection/onResignation).
//
// It owns the in-memory group state and decides, under its one mutex,
// what to write and what to answer; the records are appended through the
// coordlog.Log the broker implements, with the mutex released, in the
// order they were decided (drive.go). It must not import the broker or
// storage, touch files or connections, read the wall clock (time comes
// from its coordlog.Clock), or call into the transaction coordinator: the
// broker ties the two together (TxnOffsetCommit, markers).
package groupcoord

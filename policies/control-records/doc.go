// Command control-records is the Go reference implementation of the
// built-in policy for control batches. The built-in itself is policy.wat
// (WebAssembly text, no runtime); the tests run both over every vector and
// fuzz input and require the same verdicts and reasons. This version also
// serves as an SDK example.
//
// On mirror topics it accepts every control batch shape a Kafka log holds:
// COMMIT/ABORT markers (also when their transaction's start was compacted
// or trimmed away, and transaction-version-2 markers with bumped epochs),
// control batches emptied by compaction, and KIP-1279 MIRROR_PID_RESET
// barriers (type 7) copied from an upstream mirror. It rejects unknown
// control types, the KRaft-only types 2-6, malformed control records, and
// attribute combinations Kafka never writes. On ordinary topics it refuses
// every control batch: only the broker writes markers there.
//
// Like every built-in guest it imports only the SDK (and the standard
// library); it must not import the host (wasmpolicy) or the broker.
package main

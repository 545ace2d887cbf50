// Command producer-ids is the built-in policy that checks producer fields
// for shapes Kafka never writes: producer ids below -1, transactional
// batches without a producer id, a producer id with a negative epoch,
// idempotent data without a sequence, control batches with one, and a
// producer's epoch going backwards within one request.
//
// Like every built-in guest it imports only the SDK (and the standard
// library); it must not import the host (wasmpolicy) or the broker.
package main

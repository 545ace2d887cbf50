// Package verify is `verbatim verify`: it proves a mirror exact, or names
// the first difference, by reading both clusters over the wire — batch
// bytes (I1, I2), the ListOffsets and OffsetForLeaderEpoch views (I3,
// I4), what read_committed consumers drop (I4, I5), compacted sources
// (source-compacted-since: the destination holds every surviving source
// record; compacted-equivalent: both sides cleaned one history, each its
// own log, checked record by record with the rule in equivalent.go), the
// topic ids and the copied consumer group offsets — and renders the
// report as text or JSON.
//
// Its expectations are its own: it splits fetched record sets and clamps
// group offsets with its own code, and must not import package mirror, so
// a bug in the pusher cannot be hidden by the verifier sharing it. It uses
// package client for the protocol and kbatch for the batch layout and its
// streaming record reader: identical compressed batches are walked too, and
// one that cannot be decompressed is listed with its offset, codec and
// reason.
package verify

// Package kbatch knows the byte layout of Kafka v2 record batches (magic 2)
// and nothing else: header field offsets and accessors over a []byte, the
// CRC-32C rule, splitting a record set into batches (Next, and the
// allocation-free walk Batches that every loop over a set uses), the
// compression codecs,
// and a small encoder used by tests and benchmarks.
//
// It owns no state and does no I/O. Validation policy (what a broker accepts)
// belongs to hotpath; storage and broker read headers through this package so
// that there is exactly one definition of the layout.
package kbatch

// Command bench-ingest measures `verbatim serve` against a reference sink
// with a pipelined raw-Produce load generator and prints one JSON object
// per scenario (see benchmarks/README.md). `bench-ingest sink ...` runs the
// reference sink itself (the harness starts it that way, as a separate
// process, so its CPU time and peak RSS are its own).
//
// It owns the load generator and the reference sink; it must not be
// imported by product packages, and it measures only through the wire
// protocol (it never reads a broker's files).
package main

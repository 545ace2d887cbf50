// Package kbatch knows the byte layout of Kafka v2 record batches (magic 2)
// and nothing else: header field offsets and accessors over a []byte, the
// CRC-32C rule, splitting a record set into batches (Next, and the
// allocation-free walk Batches that every loop over a set uses), the
// compression codecs, the one streaming record reader every reader that
// looks inside batches shares (RecordReader: pooled decoders, a fixed
// window, Limits on what a batch may inflate to, WorkingSet to charge a
// budget before reading), and a small encoder used by tests and
// benchmarks.
//
// Memory of a RecordReader is bounded by WorkingSet(batch) (plus one kept
// record with Limits.Keep) whatever the payload inflates to: gzip's fixed
// window; zstd windows up to MaxZstdWindow, decoders pooled per window
// class; what one LZ4 frame's blocks can decode to (at most its block size,
// 4 MiB; blocks are decoded from the payload in place); snappy blocks and
// xerial chunks by their declared length, checked against the limits
// before they are decoded. Idle pooled decoders are the garbage
// collector's to reclaim. WorkingSet of what producers send: gzip 162 KiB;
// snappy about 100 KiB (32 KiB xerial chunks; a raw block its decoded
// size); LZ4 131 KiB for Java's 64 KiB blocks, 1-4 MiB for pierrec's
// (franz-go's) 4 MiB ones (2 MiB for a 16 KiB batch); zstd 1.2 MiB for windows or contents up to
// 256 KiB (franz-go, small one-shot frames), 2.9 MiB for zstd-jni's 2 MiB
// window, 8.9 MiB for the largest accepted (8 MiB).
//
// It owns no state beyond those pools and does no I/O; it never charges a
// budget itself (its callers do, with WorkingSet). Validation policy (what
// a broker accepts) belongs to hotpath; storage and broker read headers
// through this package so that there is exactly one definition of the
// layout.
package kbatch

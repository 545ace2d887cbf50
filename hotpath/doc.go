// Package hotpath is everything between a received Produce frame and the
// storage append: pooled frame buffers with in-flight byte bounds, in-place
// v2 batch validation (CRC-32C, header consistency, control batch structure)
// in normal and verbatim modes, offset/epoch assignment in place, and the
// submission queue that coalesces appends and hands them to storage's group
// commit.
//
// It must not decide topic policy (wasmpolicy does) nor own files or offsets
// (storage does); it never copies record bytes between the socket buffer and
// the storage write.
package hotpath

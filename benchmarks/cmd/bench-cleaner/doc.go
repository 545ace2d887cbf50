// Command bench-cleaner measures the log cleaner (docs/DESIGN.md, "The
// cleaner"); one JSON object per measurement on stdout, no pass/fail:
//
//   - offsets: N offset commits of one group over 100 partitions into
//     `verbatim serve` with --offsets-topic-segment-bytes lowered, with the
//     cleaner off and on: the size of __consumer_offsets afterwards and the
//     group load time after a restart (from the listener accepting to the
//     first OffsetFetch answered with the offsets);
//   - throughput: a compacted log of keyed records built with storage,
//     cleaned once, in MB/s of dirty log cleaned, next to a reference in
//     the same round: a plain sequential read and write (and sync) of the
//     same segment files;
//   - foreground: produce MB/s to an ordinary topic while the cleaner
//     cleans a large dirty compacted topic, against the same load with the
//     cleaner off, rounds alternating.
package main

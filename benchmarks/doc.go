// Package benchmarks holds the programs that measure Verbatim against its
// peers (a reference sink, Apache Kafka, MirrorMaker 2) in the same run and
// report ratios. Results committed under benchmarks/results are published
// evidence.
//
// It must not be imported by the product packages.
package benchmarks

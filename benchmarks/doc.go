// Package benchmarks holds the programs that measure Verbatim against its
// peers (a reference sink, Apache Kafka, MirrorMaker 2) in the same run and
// report ratios. For the cluster link it has a reference copier too
// (linkref.go: the link's fetch shape into the write-only sink). Results committed under benchmarks/results are published
// evidence.
//
// It must not be imported by the product packages.
package benchmarks

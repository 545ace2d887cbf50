// Package benchmarks holds the programs that measure Verbatim against its
// peers (a reference sink, Apache Kafka, MirrorMaker 2) in the same run and
// report ratios. For the cluster link it has a reference copier too
// (linkref.go: the link's fetch shape into the write-only sink). The
// replicated cluster is measured beside Kafka's 3-broker cluster
// (clusterbench_test.go, clusterfail_test.go; results as JSON lines,
// cluster_results.go). Results committed under benchmarks/results are
// published evidence.
//
// It must not be imported by the product packages.
package benchmarks

package broker

import (
	"github.com/verbatim-kafka/verbatim/metrics"
	"github.com/verbatim-kafka/verbatim/wireext"
)

// The mirror partition and cluster link metrics (package metrics,
// mirrors.go) for whoever runs the mirrors in this process: the serve
// process registers the status function once, the link counts through a
// topic's handles.

// RegisterMirrorMetrics registers the mirror partition and cluster link
// gauges, read from status on every scrape (the link manager's
// DescribeMirrors). Call it once, before serving metrics. On a cluster
// each broker exports the partitions it leads only (where their copies
// run), so a partition is counted once across the cluster: the per-link
// partition counts add up over the brokers, MaxLag is the largest of
// theirs.
func (s *Server) RegisterMirrorMetrics(status func() []wireext.MirrorPartitionStatus) {
	metrics.RegisterMirrors(s.metrics, func() []wireext.MirrorPartitionStatus {
		st := status()
		if !s.LinkClustered() {
			return st
		}
		return s.ledStatuses(st)
	})
}

// MirrorTopicMetrics returns the per-topic counters of topic
// (ReplicationBytesIn for bytes fetched from the source,
// MirrorDivergences, ...), resolved once per topic as the produce path's;
// an unknown topic's count into nothing.
func (s *Server) MirrorTopicMetrics(topic string) *metrics.Topic {
	t := s.cluster.topic(topic)
	if t == nil {
		return (*metrics.Registry)(nil).Topic(topic)
	}
	return s.topicMetrics(t)
}

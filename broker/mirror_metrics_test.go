package broker

import (
	"testing"

	"github.com/verbatim-kafka/verbatim/wireext"
)

// TestMirrorMetricsRegistered: the serve process's status function is
// read on a scrape, and a mirror topic's link counters are the topic's
// own series.
func TestMirrorMetricsRegistered(t *testing.T) {
	b := startBroker(t, t.TempDir(), nil)
	createTopic(t, b, "m", 1, map[string]*string{"mirror.mode": sp("push")})
	b.srv.RegisterMirrorMetrics(func() []wireext.MirrorPartitionStatus {
		return []wireext.MirrorPartitionStatus{{Topic: "m", Link: "l", State: wireext.StateMirroring, Lag: 7}}
	})
	b.srv.MirrorTopicMetrics("m").ReplicationBytesIn.Add(100)
	b.srv.MirrorTopicMetrics("gone").MirrorDivergences.Inc() // counts into nothing
	mfs, err := b.srv.metrics.Gatherer().Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			got[mf.GetName()] += m.GetGauge().GetValue() + m.GetCounter().GetValue()
		}
	}
	if got["kafka_server_link_clusterlinkfetchermanager_maxlag"] != 7 || got["kafka_server_brokertopicmetrics_replicationbytesin_total"] != 100 || got["verbatim_mirror_divergences_total"] != 0 {
		t.Fatalf("maxlag %v, replication bytes %v, divergences %v", got["kafka_server_link_clusterlinkfetchermanager_maxlag"],
			got["kafka_server_brokertopicmetrics_replicationbytesin_total"], got["verbatim_mirror_divergences_total"])
	}
}

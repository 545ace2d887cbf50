//go:build !race

package metrics

import (
	"testing"

	"github.com/verbatim-kafka/verbatim/wireext"
)

// TestAllocMirrorScrape: the mirror collector's own work on a scrape
// (per-link aggregates, partition labels) allocates nothing once it has
// seen the links; only the Prometheus client's samples remain.
func TestAllocMirrorScrape(t *testing.T) {
	c := &mirrorCollector{links: map[string]*linkAgg{}}
	st := make([]wireext.MirrorPartitionStatus, 500)
	for i := range st {
		st[i] = wireext.MirrorPartitionStatus{Topic: "t", Partition: int32(i), Link: []string{"a", "b", ""}[i%3], State: wireext.StateMirroring, Lag: int64(i)}
	}
	c.aggregate(st)
	var sink int
	if n := testing.AllocsPerRun(100, func() {
		c.aggregate(st)
		for i := range st {
			sink += len(partitionLabel(st[i].Partition))
		}
	}); n != 0 {
		t.Fatalf("%v allocations per scrape's own work, want 0", n)
	}
	if len(c.order) != 2 || c.links["a"].maxLag != 498 || sink == 0 {
		t.Fatalf("aggregate: order %v, a %+v", c.order, c.links["a"])
	}
}

package metrics

// Metrics of mirror partitions and cluster links, read when scraped from
// the status the serve process hands in (the link manager's
// DescribeMirrors): per partition the lag in offsets and in seconds, the
// state and the last mirrored offset and epoch; per link the largest lag
// (Confluent's MaxLag) and how many partitions are in each state. Names
// are MBeans in Kafka's style as the JMX exporter maps them
// (docs/operations.md "Mirror and link metrics").

import (
	"strconv"
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/verbatim-kafka/verbatim/wireext"
)

var (
	mirrorLabels      = []string{"link", "topic", "partition"}
	descMPLag         = prometheus.NewDesc("kafka_server_mirrorpartitionmetrics_lag", "Offsets the mirror partition is behind its source: the source high watermark last fetched minus the log end offset (kafka.server:type=MirrorPartitionMetrics,name=Lag).", mirrorLabels, nil)
	descMPLagSec      = prometheus.NewDesc("kafka_server_mirrorpartitionmetrics_lagseconds", "Seconds the mirror partition has been behind its source, 0 when caught up (MirrorPartitionMetrics,name=LagSeconds).", mirrorLabels, nil)
	descMPState       = prometheus.NewDesc("kafka_server_mirrorpartitionmetrics_state", "1 for the mirror partition's current state (PREPARING, MIRRORING, PAUSED, STOPPING, STOPPED, FAILED; MirrorPartitionMetrics,name=State).", append(mirrorLabels[:3:3], "state"), nil)
	descMPLastOff     = prometheus.NewDesc("kafka_server_mirrorpartitionmetrics_lastmirroredoffset", "The last offset written from the source, -1 none (MirrorPartitionMetrics,name=LastMirroredOffset).", mirrorLabels, nil)
	descMPLastEp      = prometheus.NewDesc("kafka_server_mirrorpartitionmetrics_lastmirroredepoch", "The leader epoch of the last batch written from the source, -1 none (MirrorPartitionMetrics,name=LastMirroredEpoch).", mirrorLabels, nil)
	descMPOmitted     = prometheus.NewDesc("verbatim_mirror_status_series_omitted", "Mirror partitions beyond the per-partition series bound whose MirrorPartitionMetrics are not exported (the per-link metrics count them).", nil, nil)
	descLinkMaxLag    = prometheus.NewDesc("kafka_server_link_clusterlinkfetchermanager_maxlag", "The largest lag in offsets over the link's mirror partitions (Confluent's kafka.server.link:type=ClusterLinkFetcherManager,name=MaxLag).", []string{"link"}, nil)
	descLinkMaxLagSec = prometheus.NewDesc("kafka_server_link_clusterlinkfetchermanager_maxlagseconds", "The largest lag in seconds over the link's mirror partitions (ClusterLinkFetcherManager,name=MaxLagSeconds).", []string{"link"}, nil)
	descLinkParts     = prometheus.NewDesc("kafka_server_link_clusterlinkmetrics_mirrorpartitioncount", "The link's mirror partitions in each state (kafka.server.link:type=ClusterLinkMetrics,name=MirrorPartitionCount).", []string{"link", "state"}, nil)
)

// mirrorStates are the partition states counted per link, in order.
var mirrorStates = []string{wireext.StatePreparing, wireext.StateMirroring, wireext.StatePaused, wireext.StateStopping, wireext.StateStopped, wireext.StateFailed}

// linkAgg is one link's aggregate over a scrape.
type linkAgg struct {
	maxLag, maxLagMs int64
	states           [6]int // by mirrorStates index
}

// mirrorCollector reads the status when scraped. Its per-link map and the
// partition label strings are kept from one scrape to the next, so its
// own work allocates nothing once warm; what the Prometheus client
// allocates for each sample (the const metric) remains.
type mirrorCollector struct {
	status func() []wireext.MirrorPartitionStatus

	mu    sync.Mutex // one scrape at a time uses links
	links map[string]*linkAgg
	order []string // link names of this scrape, first-seen order
}

// RegisterMirrors registers the mirror partition and link metrics on r,
// read from status on every scrape (the link manager's DescribeMirrors;
// push mirrors come with Link ""). status must be safe to call
// concurrently with the broker's work and should not block.
func RegisterMirrors(r *Registry, status func() []wireext.MirrorPartitionStatus) {
	if r == nil {
		return
	}
	r.reg.MustRegister(&mirrorCollector{status: status, links: map[string]*linkAgg{}})
}

func (c *mirrorCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descMPLag, descMPLagSec, descMPState, descMPLastOff, descMPLastEp, descMPOmitted, descLinkMaxLag, descLinkMaxLagSec, descLinkParts} {
		ch <- d
	}
}

func (c *mirrorCollector) Collect(ch chan<- prometheus.Metric) {
	st := c.status()
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	omitted := 0
	for i := range st {
		s := &st[i]
		if i >= MaxPartitionSeries {
			omitted++
			continue
		}
		p := partitionLabel(s.Partition)
		gauge(descMPLag, float64(s.Lag), s.Link, s.Topic, p)
		gauge(descMPLagSec, float64(s.LagMs)/1000, s.Link, s.Topic, p)
		gauge(descMPState, 1, s.Link, s.Topic, p, s.State)
		gauge(descMPLastOff, float64(s.LastMirroredOffset), s.Link, s.Topic, p)
		gauge(descMPLastEp, float64(s.LastMirroredEpoch), s.Link, s.Topic, p)
	}
	gauge(descMPOmitted, float64(omitted))

	c.mu.Lock()
	defer c.mu.Unlock()
	c.aggregate(st)
	for _, name := range c.order {
		a := c.links[name]
		gauge(descLinkMaxLag, float64(a.maxLag), name)
		gauge(descLinkMaxLagSec, float64(a.maxLagMs)/1000, name)
		for k, state := range mirrorStates {
			gauge(descLinkParts, float64(a.states[k]), name, state)
		}
	}
}

// aggregate computes the per-link aggregates of st into c.links and
// c.order (links in first-seen order; push mirrors, Link "", belong to
// no link). A link seen before and absent now is forgotten. REQUIRES:
// c.mu.
func (c *mirrorCollector) aggregate(st []wireext.MirrorPartitionStatus) {
	for _, a := range c.links {
		*a = linkAgg{maxLag: -1}
	}
	c.order = c.order[:0]
	for i := range st {
		s := &st[i]
		if s.Link == "" {
			continue
		}
		a := c.links[s.Link]
		if a == nil {
			a = &linkAgg{maxLag: -1}
			c.links[s.Link] = a
		}
		if a.maxLag < 0 {
			a.maxLag = 0
			c.order = append(c.order, s.Link)
		}
		a.maxLag = max(a.maxLag, s.Lag)
		a.maxLagMs = max(a.maxLagMs, s.LagMs)
		for k, state := range mirrorStates {
			if s.State == state {
				a.states[k]++
			}
		}
	}
	for name, a := range c.links {
		if a.maxLag < 0 {
			delete(c.links, name)
		}
	}
}

// partitionLabels holds the label of partitions 0..len-1, so labelling a
// partition allocates nothing on a scrape (strconv caches only 0..99).
var partitionLabels = func() []string {
	out := make([]string, 4096)
	for i := range out {
		out[i] = strconv.Itoa(i)
	}
	return out
}()

func partitionLabel(p int32) string {
	if p >= 0 && int(p) < len(partitionLabels) {
		return partitionLabels[p]
	}
	return strconv.Itoa(int(p))
}

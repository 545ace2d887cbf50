package metrics

import (
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Totals is the broker-wide state read when scraped (not counted on any
// request path).
type Totals struct {
	Topics, Partitions, OfflinePartitions int
	Segments                              int
	LogBytes                              int64
	// CertExpiry is the NotAfter of each TLS listener's certificate.
	CertExpiry []ListenerCert
	// Mirror is the state of mirror topics' partitions, at most
	// MaxPartitionSeries of them; MirrorOmitted counts the rest.
	Mirror        []MirrorPartition
	MirrorOmitted int
	// Logs is every partition's log (ordinary, mirror and internal
	// topics), at most the broker's per-partition series bound of them;
	// LogsOmitted counts the rest.
	Logs        []PartitionLog
	LogsOmitted int
}

// PartitionLog is one partition log's offsets and size (Kafka's
// kafka.log:type=Log MBeans).
type PartitionLog struct {
	Topic            string
	Partition        int32
	LogStart, LogEnd int64
	Size             int64
	Segments         int
}

// MaxPartitionSeries bounds the per-partition series of one scrape.
const MaxPartitionSeries = 1000

// MirrorPartition is one mirror topic partition's state: its log end
// offset (the next offset a push writes), the leader epoch of its last
// batch (-1 when empty) and the source's high watermark its writer last
// reported (0: none; then no lag is exported).
type MirrorPartition struct {
	Topic               string
	Partition           int32
	LogEnd              int64
	LeaderEpoch         int32
	SourceHighWatermark int64
}

// ListenerCert is a TLS listener's certificate expiry.
type ListenerCert struct {
	Listener string
	NotAfter time.Time
}

var (
	descPartitions  = prometheus.NewDesc("kafka_server_replicamanager_partitioncount", "Partitions on this broker (Kafka ReplicaManager PartitionCount).", nil, nil)
	descLeaders     = prometheus.NewDesc("kafka_server_replicamanager_leadercount", "Partitions this broker leads: all of them on a single node (Kafka ReplicaManager LeaderCount).", nil, nil)
	descTopics      = prometheus.NewDesc("kafka_controller_kafkacontroller_globaltopiccount", "Topics, internal ones included (Kafka KafkaController GlobalTopicCount).", nil, nil)
	descGlobalParts = prometheus.NewDesc("kafka_controller_kafkacontroller_globalpartitioncount", "Partitions of all topics (Kafka KafkaController GlobalPartitionCount).", nil, nil)
	descOffline     = prometheus.NewDesc("kafka_controller_kafkacontroller_offlinepartitionscount", "Partitions whose log failed to open (Kafka KafkaController OfflinePartitionsCount).", nil, nil)
	descSegments    = prometheus.NewDesc("verbatim_log_segments", "Log segments of all partitions (Kafka has it per partition as Log NumLogSegments).", nil, nil)
	descLogBytes    = prometheus.NewDesc("verbatim_log_size_bytes", "Bytes of all partition logs (Kafka has it per partition as Log Size).", nil, nil)
	descMirrorEnd   = prometheus.NewDesc("verbatim_mirror_partition_log_end_offset", "Log end offset of each mirror topic partition: the next offset its pusher writes.", []string{"topic", "partition"}, nil)
	descMirrorEpoch = prometheus.NewDesc("verbatim_mirror_partition_leader_epoch", "Leader epoch of each mirror topic partition's last batch (-1: empty).", []string{"topic", "partition"}, nil)
	descMirrorHW    = prometheus.NewDesc("verbatim_mirror_partition_source_high_watermark", "The source partition's high watermark as the mirror's writer (pusher or link) last reported it with a mirror write.", []string{"topic", "partition"}, nil)
	descMirrorLag   = prometheus.NewDesc("verbatim_mirror_partition_lag", "Offsets the mirror partition is behind its source: the reported source high watermark minus the log end, at least 0 (Kafka's replica lag, across clusters).", []string{"topic", "partition"}, nil)
	descMirrorOmit  = prometheus.NewDesc("verbatim_mirror_partition_series_omitted", "Mirror partitions beyond the per-partition series bound, not exported.", nil, nil)
	descLogStart    = prometheus.NewDesc("kafka_log_log_logstartoffset", "Log start offset of each partition (Kafka kafka.log:type=Log,name=LogStartOffset).", []string{"topic", "partition"}, nil)
	descLogEnd      = prometheus.NewDesc("kafka_log_log_logendoffset", "Log end offset of each partition (Kafka kafka.log:type=Log,name=LogEndOffset).", []string{"topic", "partition"}, nil)
	descLogSize     = prometheus.NewDesc("kafka_log_log_size", "Bytes of each partition's log (Kafka kafka.log:type=Log,name=Size).", []string{"topic", "partition"}, nil)
	descLogSegs     = prometheus.NewDesc("kafka_log_log_numlogsegments", "Segments of each partition's log (Kafka kafka.log:type=Log,name=NumLogSegments).", []string{"topic", "partition"}, nil)
	descLogsOmit    = prometheus.NewDesc("verbatim_log_partition_series_omitted", "Partitions beyond the per-partition series bound (metrics.partition.series), whose kafka_log_log_* series are not exported.", nil, nil)
	descCertExpiry  = prometheus.NewDesc("verbatim_tls_certificate_expiry_timestamp_seconds", "NotAfter of the certificate each TLS listener serves, as a Unix time.", []string{"listener"}, nil)
)

type totalsCollector func() Totals

func (f totalsCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descPartitions, descLeaders, descTopics, descGlobalParts, descOffline, descSegments, descLogBytes, descMirrorEnd, descMirrorEpoch, descMirrorHW, descMirrorLag, descMirrorOmit, descLogStart, descLogEnd, descLogSize, descLogSegs, descLogsOmit, descCertExpiry} {
		ch <- d
	}
}

func (f totalsCollector) Collect(ch chan<- prometheus.Metric) {
	t := f()
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	gauge(descPartitions, float64(t.Partitions))
	gauge(descLeaders, float64(t.Partitions-t.OfflinePartitions))
	gauge(descTopics, float64(t.Topics))
	gauge(descGlobalParts, float64(t.Partitions))
	gauge(descOffline, float64(t.OfflinePartitions))
	gauge(descSegments, float64(t.Segments))
	gauge(descLogBytes, float64(t.LogBytes))
	for _, m := range t.Mirror {
		p := strconv.Itoa(int(m.Partition))
		gauge(descMirrorEnd, float64(m.LogEnd), m.Topic, p)
		gauge(descMirrorEpoch, float64(m.LeaderEpoch), m.Topic, p)
		if m.SourceHighWatermark > 0 {
			gauge(descMirrorHW, float64(m.SourceHighWatermark), m.Topic, p)
			gauge(descMirrorLag, float64(max(0, m.SourceHighWatermark-m.LogEnd)), m.Topic, p)
		}
	}
	gauge(descMirrorOmit, float64(t.MirrorOmitted))
	for _, l := range t.Logs {
		p := strconv.Itoa(int(l.Partition))
		gauge(descLogStart, float64(l.LogStart), l.Topic, p)
		gauge(descLogEnd, float64(l.LogEnd), l.Topic, p)
		gauge(descLogSize, float64(l.Size), l.Topic, p)
		gauge(descLogSegs, float64(l.Segments), l.Topic, p)
	}
	gauge(descLogsOmit, float64(t.LogsOmitted))
	for _, c := range t.CertExpiry {
		gauge(descCertExpiry, float64(c.NotAfter.Unix()), c.Listener)
	}
}

// RegisterTotals registers f, called on every scrape.
func (r *Registry) RegisterTotals(f func() Totals) { r.reg.MustRegister(totalsCollector(f)) }

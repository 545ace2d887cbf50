package metrics

import (
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
	descCertExpiry  = prometheus.NewDesc("verbatim_tls_certificate_expiry_timestamp_seconds", "NotAfter of the certificate each TLS listener serves, as a Unix time.", []string{"listener"}, nil)
)

type totalsCollector func() Totals

func (f totalsCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descPartitions, descLeaders, descTopics, descGlobalParts, descOffline, descSegments, descLogBytes, descCertExpiry} {
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
	for _, c := range t.CertExpiry {
		gauge(descCertExpiry, float64(c.NotAfter.Unix()), c.Listener)
	}
}

// RegisterTotals registers f, called on every scrape.
func (r *Registry) RegisterTotals(f func() Totals) { r.reg.MustRegister(totalsCollector(f)) }

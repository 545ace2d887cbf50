// Package metrics owns the broker's Prometheus registry and the HTTP
// endpoint that serves it with the health probes (/metrics, /healthz,
// /readyz). Metric names follow Kafka's JMX names as the Prometheus JMX
// exporter maps them (kafka_server_brokertopicmetrics_bytesin_total,
// kafka_network_requestmetrics_totaltimems, ...), so dashboards built for
// Kafka work; what Kafka has no name for is verbatim_*. The list is in
// docs/operations.md.
//
// It is a leaf: it must not import broker. The broker creates a Registry,
// resolves per-topic and per-API handles once (Topic, API) and keeps them
// on its topic and API entries, so that counting on the hot path is an
// atomic add, never a label lookup or an allocation; request and policy
// times go into fixed-bucket native histograms (hist.go), and the
// Kafka-named request-time summary is computed from them at the scrape
// (window.go). Readiness and
// gauges read the broker through the functions it passes in; so do the
// mirror partition and cluster link metrics (mirrors.go, RegisterMirrors:
// lag, state, Confluent's MaxLag per link), read from the status the serve
// process hands in as wireext.MirrorPartitionStatus, the one type it
// imports besides the Prometheus client.
package metrics

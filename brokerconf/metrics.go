package brokerconf

import (
	"fmt"
	"net"
	"strconv"

	"github.com/verbatim-kafka/verbatim/broker"
)

// The metrics endpoint's address (serve's --metrics-listen). Kafka has no
// such property (it exposes JMX); the name is Verbatim's.
func init() {
	registerBroker("metrics.listen", 5, "HOST:PORT serving Prometheus /metrics, /healthz and /readyz (--metrics-listen); empty: none.", func(cfg *broker.Config, v string) error {
		if v != "" {
			if _, _, err := net.SplitHostPort(v); err != nil {
				return fmt.Errorf("%q: must be host:port: %v", v, err)
			}
		}
		cfg.MetricsListen = v
		return nil
	})
	registerBroker("metrics.partition.series", 5, "how many partitions get per-partition log series on /metrics (kafka_log_log_logendoffset, ...; --metrics-partition-series); 0: none. Default 1000.", func(cfg *broker.Config, v string) error {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			return fmt.Errorf("%q: must be a count >= 0", v)
		}
		cfg.MetricsPartitionSeries = n
		if n == 0 {
			cfg.MetricsPartitionSeries = -1
		}
		return nil
	})
}

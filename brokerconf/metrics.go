package brokerconf

import (
	"fmt"
	"net"

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
}

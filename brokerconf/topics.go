package brokerconf

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/verbatim-kafka/verbatim/broker"
)

// The broker defaults of topic configs: server.properties names that
// Kafka applies to every topic not overriding the topic config. They go
// into broker.Config.TopicDefaults under the topic config's name; the
// broker validates the values as topic values.
func init() {
	// log.retention.ms wins over .minutes, which wins over .hours (Kafka's
	// precedence): applied in that order, the later overwriting.
	retention := func(name string, order int, unit int64) {
		Register(Property{Name: name, Scope: ScopeBroker, Order: order,
			Doc: "Default retention.ms of topics (log.retention.ms > .minutes > .hours; negative: unlimited).",
			Apply: func(cfg *broker.Config, _, _, v string) error {
				n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
				if err != nil {
					return fmt.Errorf("%q: must be an integer", v)
				}
				ms := int64(-1)
				if n >= 0 {
					if n > math.MaxInt64/unit {
						return fmt.Errorf("%q: too large", v)
					}
					ms = n * unit
				}
				setTopicDefault(cfg, "retention.ms", strconv.FormatInt(ms, 10))
				return nil
			}})
	}
	retention("log.retention.hours", 6, 3600_000)
	retention("log.retention.minutes", 7, 60_000)
	retention("log.retention.ms", 8, 1)
	for name, topicName := range map[string]string{"log.retention.bytes": "retention.bytes", "log.segment.bytes": "segment.bytes"} {
		Register(Property{Name: name, Scope: ScopeBroker, Order: 6, Doc: "Default " + topicName + " of topics.",
			Apply: func(cfg *broker.Config, _, _, v string) error {
				n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
				if err != nil {
					return fmt.Errorf("%q: must be an integer", v)
				}
				setTopicDefault(cfg, topicName, strconv.FormatInt(n, 10))
				return nil
			}})
	}
}

func setTopicDefault(cfg *broker.Config, name, value string) {
	if cfg.TopicDefaults == nil {
		cfg.TopicDefaults = map[string]string{}
	}
	cfg.TopicDefaults[name] = value
}

package broker

// The broker's defaults of topic configs (Config.TopicDefaults): what
// server.properties sets with Kafka's broker synonyms (log.retention.ms,
// log.segment.bytes, ...). A topic without an override of a config uses
// the broker's default, else Kafka's; DescribeConfigs reports such a
// value with source STATIC_BROKER_CONFIG, as Kafka does.

import "fmt"

// checkTopicDefaults validates the broker's defaults as topic values.
func checkTopicDefaults(d map[string]string) error {
	for k, v := range d {
		def := topicConfigByName[k]
		if def == nil || !def.hasDefault || def.brokerSynonym == "" {
			return fmt.Errorf("broker: %q has no broker default", k)
		}
		if _, err := validateConfigValue(def, v); err != nil {
			return fmt.Errorf("broker: default of %s (%s): %w", k, def.brokerSynonym, err)
		}
	}
	return nil
}

// topicConfig derives a topic's configuration from its overrides over
// this broker's defaults.
func (s *Server) topicConfig(overrides map[string]string) (*TopicConfig, error) {
	return newTopicConfigWith(s.cfg.TopicDefaults, overrides)
}

// applyTopicDefaults re-derives the loaded topics' configurations over the
// broker's defaults (before their logs are opened).
func (c *cluster) applyTopicDefaults(d map[string]string) error {
	if len(d) == 0 {
		return nil
	}
	for _, t := range c.topics() {
		cfg, err := newTopicConfigWith(d, t.Config().Overrides())
		if err != nil {
			return fmt.Errorf("topic %q: %w", t.Name, err)
		}
		t.cfg.Store(cfg)
	}
	return nil
}

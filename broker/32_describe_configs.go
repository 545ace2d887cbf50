package broker

// DescribeConfigs (key 32), versions 0-4.
//
// Behaviour:
//   - Topic resources list every Kafka topic config with its effective
//     value, source (DYNAMIC_TOPIC_CONFIG for overrides, DEFAULT_CONFIG
//     otherwise), type (v3+) and documentation (v3+, when asked), plus
//     Verbatim's mirror.* configs when set. Synonyms (v1+, when asked)
//     list the topic override and then the broker config that supplies the
//     default, as Kafka orders them. ConfigNames filters (null = all).
//   - Broker resources (name = node id, or "" for the cluster default)
//     list the broker's settings (read-only, STATIC_BROKER_CONFIG), the
//     broker defaults of topic configs (DEFAULT_CONFIG) and the dynamic
//     broker configs (broker_dynconfig.go: the replication throttles,
//     DYNAMIC_BROKER_CONFIG, DYNAMIC_DEFAULT_BROKER_CONFIG or
//     DEFAULT_CONFIG); the cluster default lists the dynamic defaults set. Another node id
//     is INVALID_REQUEST, as Kafka answers a broker that is not addressed.
//   - Unknown topics are UNKNOWN_TOPIC_OR_PARTITION; broker-logger and
//     other resource types INVALID_REQUEST. Each resource is answered on
//     its own.
//
// Authorization (with the authorizer on, authorize.go): DESCRIBE_CONFIGS
// on the topic, CLUSTER (broker resources) or group.
//
// Deviations from Apache Kafka: the DEFAULT_CONFIG synonym of a config
// whose Kafka default comes from a coarser broker setting (retention.ms
// from log.retention.hours) is reported under the millisecond name with the
// millisecond value; the only dynamic broker configs are the replication
// throttles.

import (
	"context"
	"sort"

	"github.com/twmb/franz-go/pkg/kmsg"
)

func init() { register(kmsg.DescribeConfigs.Int16(), 0, 4, handleDescribeConfigs) }

func handleDescribeConfigs(_ context.Context, s *Server, r *Request) (Reply, error) {
	req := r.Msg.(*kmsg.DescribeConfigsRequest)
	resp := req.ResponseKind().(*kmsg.DescribeConfigsResponse)
	for _, rr := range req.Resources {
		sr := kmsg.NewDescribeConfigsResponseResource()
		sr.ResourceType, sr.ResourceName = rr.ResourceType, rr.ResourceName
		err := s.configsRefusal(r, rr.ResourceType, rr.ResourceName, false)
		var t *Topic
		if err == nil {
			t, err = s.configResource(rr.ResourceType, rr.ResourceName)
		}
		if err != nil {
			sr.ErrorCode, sr.ErrorMessage = errorToKafka(err)
			resp.Resources = append(resp.Resources, sr)
			continue
		}
		wanted := func(name string) bool {
			if rr.ConfigNames == nil {
				return true
			}
			for _, n := range rr.ConfigNames {
				if n == name {
					return true
				}
			}
			return false
		}
		if t != nil {
			for _, e := range t.Config().describe() {
				if !wanted(e.def.name) {
					continue
				}
				c := kmsg.NewDescribeConfigsResponseResourceConfig()
				c.Name, c.Value, c.Source = e.def.name, e.value, e.source
				c.ReadOnly = e.readOnly
				c.IsDefault = e.source == kmsg.ConfigSourceDefaultConfig
				c.ConfigType = e.def.typ
				if req.IncludeSynonyms {
					c.ConfigSynonyms = e.synonyms
				}
				if req.IncludeDocumentation {
					d := e.def.doc
					c.Documentation = &d
				}
				sr.Configs = append(sr.Configs, c)
			}
		} else {
			// The cluster-default resource ("") only holds the dynamic
			// defaults set (broker_dynconfig.go).
			entries := s.dynamicBrokerEntries(rr.ResourceName)
			if rr.ResourceName != "" {
				entries = append(s.brokerConfigs(), entries...)
				sort.SliceStable(entries, func(i, j int) bool { return entries[i].name < entries[j].name })
			}
			{
				for _, e := range entries {
					if !wanted(e.name) {
						continue
					}
					c := kmsg.NewDescribeConfigsResponseResourceConfig()
					v := e.value
					c.Name, c.Value, c.Source, c.ConfigType = e.name, &v, e.source, e.typ
					c.ReadOnly = !e.dynamic
					c.IsDefault = e.source == kmsg.ConfigSourceDefaultConfig
					if req.IncludeSynonyms {
						syn := kmsg.NewDescribeConfigsResponseResourceConfigConfigSynonym()
						syn.Name, syn.Value, syn.Source = e.name, &v, e.source
						c.ConfigSynonyms = append(c.ConfigSynonyms, syn)
					}
					if req.IncludeDocumentation {
						d := e.doc
						c.Documentation = &d
					}
					sr.Configs = append(sr.Configs, c)
				}
			}
		}
		resp.Resources = append(resp.Resources, sr)
	}
	return resp, nil
}

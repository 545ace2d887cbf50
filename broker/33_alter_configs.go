package broker

// AlterConfigs (key 33), versions 0-2 (deprecated by Kafka in favour of
// IncrementalAlterConfigs, still used by older tools).
//
// Behaviour:
//   - A topic resource's config list replaces all of the topic's
//     overrides, as in Kafka: configs not listed return to their defaults.
//     Unknown names and invalid values are INVALID_CONFIG; null values
//     INVALID_REQUEST.
//   - mirror.mode and mirror.source.cluster.id must come through unchanged:
//     omitting mirror.mode on a mirror topic would stop the mirror, which
//     only an explicit IncrementalAlterConfigs DELETE does, and setting it
//     on an ordinary topic is refused (set only at creation), both
//     INVALID_CONFIG with a message saying so.
//   - Broker resources (this node's id, or "" for the cluster default):
//     the listed dynamic broker configs (the replication throttles,
//     broker_dynconfig.go) replace the resource's. Duplicate resources are
//     INVALID_REQUEST.
//   - ValidateOnly runs every check and changes nothing. Each resource is
//     answered on its own.
//
// Authorization (with the authorizer on, authorize.go): ALTER_CONFIGS on
// the topic or CLUSTER; mirror topics the mirror lifecycle permission too.
//
// Deviations from Apache Kafka: the only dynamic broker configs are the
// replication throttles; no
// alter.config.policy.class.name.

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func init() { register(kmsg.AlterConfigs.Int16(), 0, 2, handleAlterConfigs) }

func handleAlterConfigs(_ context.Context, s *Server, r *Request) (Reply, error) {
	req := r.Msg.(*kmsg.AlterConfigsRequest)
	resp := req.ResponseKind().(*kmsg.AlterConfigsResponse)
	dups := duplicateResources(req.Resources, func(rr kmsg.AlterConfigsRequestResource) (kmsg.ConfigResourceType, string) {
		return rr.ResourceType, rr.ResourceName
	})
	for _, rr := range req.Resources {
		sr := kmsg.NewAlterConfigsResponseResource()
		sr.ResourceType, sr.ResourceName = rr.ResourceType, rr.ResourceName
		sr.ErrorCode, sr.ErrorMessage = s.alterConfigResource(r, rr.ResourceType, rr.ResourceName, dups, req.ValidateOnly, configNames(rr.Configs),
			func() error { return s.alterConfigs(&rr, req.ValidateOnly) })
		resp.Resources = append(resp.Resources, sr)
	}
	return resp, nil
}

func (s *Server) alterConfigs(rr *kmsg.AlterConfigsRequestResource, validateOnly bool) error {
	t, err := s.configResource(rr.ResourceType, rr.ResourceName)
	if err != nil {
		return err
	}
	if t == nil {
		return s.alterBrokerConfigsReplace(rr, validateOnly) // broker_dynconfig.go
	}
	next := make(map[string]string, len(rr.Configs))
	for _, c := range rr.Configs {
		if c.Value == nil {
			return kafkaErr(kerr.InvalidRequest, fmt.Sprintf("Null value not supported for topic configs: %s", c.Name))
		}
		if _, dup := next[c.Name]; dup {
			return kafkaErr(kerr.InvalidRequest, fmt.Sprintf("Error due to duplicate config keys: %s", c.Name))
		}
		next[c.Name] = *c.Value
	}
	return s.alterTopicConfig(t, next, validateOnly, false)
}

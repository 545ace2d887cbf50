package broker

// IncrementalAlterConfigs (key 44), versions 0-1 (KIP-339).
//
// Behaviour:
//   - Topic resources: SET sets one config, DELETE returns it to its
//     default, APPEND/SUBTRACT add/remove items of a LIST config
//     (cleanup.policy, the throttled-replica lists); APPEND/SUBTRACT on a
//     non-list config, unknown names and invalid values are INVALID_CONFIG;
//     a null value for SET/APPEND/SUBTRACT is INVALID_REQUEST; a config
//     named twice in one resource is INVALID_REQUEST.
//   - mirror.*: DELETE of mirror.mode on a mirror topic performs the mirror
//     stop (brief I6, docs/mirroring.md) before the answer, and removes
//     mirror.source.cluster.id with it; any other change to mirror.* is
//     refused with INVALID_CONFIG (set only at creation). ValidateOnly
//     checks the DELETE but never stops anything.
//   - Broker resources (this node's id, or "" for the cluster default):
//     SET and DELETE of the dynamic broker configs, the replication
//     throttles (broker_dynconfig.go); other names are INVALID_CONFIG.
//     Duplicate resources are INVALID_REQUEST.
//   - ValidateOnly runs every check and changes nothing. Each resource is
//     answered on its own, and a resource is applied all-or-nothing.
//
// Authorization (with the authorizer on, authorize.go): ALTER_CONFIGS on
// the topic or CLUSTER; mirror topics (the mirror stop included) the
// mirror lifecycle permission too.
//
// Deviations from Apache Kafka: the only dynamic broker configs are the
// replication throttles; no broker-logger configs.

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/verbatim-kafka/verbatim/props"
)

func init() { register(kmsg.IncrementalAlterConfigs.Int16(), 0, 1, handleIncrementalAlterConfigs) }

func handleIncrementalAlterConfigs(_ context.Context, s *Server, r *Request) (Reply, error) {
	req := r.Msg.(*kmsg.IncrementalAlterConfigsRequest)
	resp := req.ResponseKind().(*kmsg.IncrementalAlterConfigsResponse)
	dups := duplicateResources(req.Resources, func(rr kmsg.IncrementalAlterConfigsRequestResource) (kmsg.ConfigResourceType, string) {
		return rr.ResourceType, rr.ResourceName
	})
	for _, rr := range req.Resources {
		sr := kmsg.NewIncrementalAlterConfigsResponseResource()
		sr.ResourceType, sr.ResourceName = rr.ResourceType, rr.ResourceName
		sr.ErrorCode, sr.ErrorMessage = s.alterConfigResource(r, rr.ResourceType, rr.ResourceName, dups, req.ValidateOnly, configNamesIncremental(rr.Configs),
			func() error { return s.incrementalAlter(&rr, req.ValidateOnly) })
		resp.Resources = append(resp.Resources, sr)
	}
	return resp, nil
}

func (s *Server) incrementalAlter(rr *kmsg.IncrementalAlterConfigsRequestResource, validateOnly bool) error {
	t, err := s.configResource(rr.ResourceType, rr.ResourceName)
	if err != nil {
		return err
	}
	if t == nil {
		return s.incrementalAlterBroker(rr, validateOnly) // broker_dynconfig.go
	}
	seen := map[string]bool{}
	for _, c := range rr.Configs {
		if seen[c.Name] {
			return kafkaErr(kerr.InvalidRequest, fmt.Sprintf("Error due to duplicate config keys: %s", c.Name))
		}
		seen[c.Name] = true
	}
	next := t.Config().Overrides()
	for _, c := range rr.Configs {
		def := topicConfigByName[c.Name]
		if def == nil {
			return fmt.Errorf("%w: Unknown topic config name: %s", errInvalidConfig, c.Name)
		}
		if c.Op != kmsg.IncrementalAlterConfigOpDelete && c.Value == nil {
			return kafkaErr(kerr.InvalidRequest, fmt.Sprintf("Null value not supported for: %s", c.Name))
		}
		switch c.Op {
		case kmsg.IncrementalAlterConfigOpSet:
			next[c.Name] = *c.Value
		case kmsg.IncrementalAlterConfigOpDelete:
			delete(next, c.Name)
		case kmsg.IncrementalAlterConfigOpAppend, kmsg.IncrementalAlterConfigOpSubtract:
			if def.typ != kmsg.ConfigTypeList {
				return fmt.Errorf("%w: Config value append is not allowed for config key: %s", errInvalidConfig, c.Name)
			}
			cur, ok := next[c.Name]
			if !ok {
				cur = def.def
			}
			items := props.List(cur)
			if c.Op == kmsg.IncrementalAlterConfigOpAppend {
				for _, v := range props.List(*c.Value) {
					if !slices.Contains(items, v) {
						items = append(items, v)
					}
				}
			} else {
				remove := props.List(*c.Value)
				kept := items[:0]
				for _, it := range items {
					if !slices.Contains(remove, it) {
						kept = append(kept, it)
					}
				}
				items = kept
			}
			next[c.Name] = strings.Join(items, ",")
		default:
			return kafkaErr(kerr.InvalidRequest, fmt.Sprintf("Unknown operation %d for config %s", int8(c.Op), c.Name))
		}
	}
	return s.alterTopicConfig(t, next, validateOnly, true)
}

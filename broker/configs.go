package broker

import (
	"fmt"
	"sort"
	"strconv"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Shared by DescribeConfigs, AlterConfigs and IncrementalAlterConfigs.

// configResource resolves a config resource: a topic, or this broker
// (name = node id, or "" for the cluster-wide default).
func (s *Server) configResource(typ kmsg.ConfigResourceType, name string) (*Topic, error) {
	switch typ {
	case kmsg.ConfigResourceTypeTopic:
		if err := validateTopicName(name); err != nil {
			return nil, err
		}
		t := s.cluster.topic(name)
		if t == nil {
			return nil, fmt.Errorf("%w: Topic %s does not exist.", errUnknownTopic, name)
		}
		return t, nil
	case kmsg.ConfigResourceTypeBroker:
		if name != "" && name != strconv.Itoa(int(s.cfg.NodeID)) {
			return nil, kafkaErr(kerr.InvalidRequest, fmt.Sprintf("Unexpected broker id, expected %d or empty string, but received %s", s.cfg.NodeID, name))
		}
		return nil, nil
	case kmsg.ConfigResourceTypeBrokerLogger:
		return nil, kafkaErr(kerr.InvalidRequest, "Broker logger configs are not supported by Verbatim.")
	default:
		return nil, kafkaErr(kerr.InvalidRequest, fmt.Sprintf("Unsupported resource type %d.", int8(typ)))
	}
}

// brokerConfigEntry is one broker config DescribeConfigs reports.
type brokerConfigEntry struct {
	name   string
	value  string
	typ    kmsg.ConfigType
	source kmsg.ConfigSource
	doc    string
	// dynamic: a dynamic broker config (broker_dynconfig.go), not
	// read-only.
	dynamic bool
}

// brokerConfigs lists this broker's configs: the startup settings that
// Kafka also has (source STATIC_BROKER_CONFIG, read-only) and the broker
// defaults of every topic config (source DEFAULT_CONFIG).
func (s *Server) brokerConfigs() []brokerConfigEntry {
	static := func(name, v string, typ kmsg.ConfigType, doc string) brokerConfigEntry {
		return brokerConfigEntry{name: name, value: v, typ: typ, source: kmsg.ConfigSourceStaticBrokerConfig, doc: doc}
	}
	out := []brokerConfigEntry{
		static("node.id", strconv.Itoa(int(s.cfg.NodeID)), kmsg.ConfigTypeInt, "This broker's node id (--node-id)."),
		static("broker.id", strconv.Itoa(int(s.cfg.NodeID)), kmsg.ConfigTypeInt, "Same as node.id."),
		static("log.dirs", s.cfg.DataDir, kmsg.ConfigTypeString, "The data dir (--data-dir)."),
		static("advertised.listeners", s.advertisedListeners(), kmsg.ConfigTypeString, "What clients are told to connect to, per listener (advertised.listeners, --advertised-listener)."),
		static("listeners", s.boundListeners(), kmsg.ConfigTypeString, "The listeners served, NAME://bound address (listeners, --listen)."),
		static("listener.security.protocol.map", s.protocolMap(), kmsg.ConfigTypeString, "Each listener's security protocol (listener.security.protocol.map)."),
		static("auto.create.topics.enable", strconv.FormatBool(s.cfg.AutoCreateTopics), kmsg.ConfigTypeBoolean, "Create unknown topics on Metadata requests (--auto-create-topics)."),
		static("num.partitions", strconv.Itoa(int(s.cfg.DefaultPartitions)), kmsg.ConfigTypeInt, "Partitions of auto-created topics (--num-partitions)."),
		static("default.replication.factor", "1", kmsg.ConfigTypeInt, "Single node: always 1."),
		static("socket.request.max.bytes", strconv.Itoa(int(s.cfg.MaxFrameBytes)), kmsg.ConfigTypeInt, "Largest request frame (--max-frame-bytes)."),
		static("connections.max.idle.ms", strconv.FormatInt(s.cfg.IdleTimeout.Milliseconds(), 10), kmsg.ConfigTypeLong, "Idle connections are closed after this (--idle-timeout)."),
		static("fetch.max.bytes", strconv.Itoa(int(s.cfg.FetchMaxBytes)), kmsg.ConfigTypeInt, "Most record bytes a Fetch response carries, whatever the request asks for; the first batch is returned whole anyway (--fetch-max-bytes)."),
		static("verbatim.flush", s.cfg.Flush, kmsg.ConfigTypeString, "Verbatim durability mode (--flush)."),
		static("max.connections.per.ip", strconv.Itoa(s.peers.max), kmsg.ConfigTypeInt, "Connections allowed from each IP address; more are closed when accepted (--max-connections-per-ip)."),
		static("max.connections.per.ip.overrides", s.cfg.MaxConnectionsPerIPOverrides, kmsg.ConfigTypeString, "Per-IP or host name overrides of max.connections.per.ip, host:count,host:count (--max-connections-per-ip-overrides)."),
	}
	have := map[string]bool{}
	for _, e := range out {
		have[e.name] = true
	}
	for _, def := range topicConfigDefs {
		if def.brokerSynonym == "" || !def.hasDefault || have[def.brokerSynonym] {
			continue
		}
		have[def.brokerSynonym] = true
		e := brokerConfigEntry{name: def.brokerSynonym, value: def.def, typ: def.typ, source: kmsg.ConfigSourceDefaultConfig, doc: def.doc}
		if v, ok := s.cfg.TopicDefaults[def.name]; ok {
			e.value, e.source = v, kmsg.ConfigSourceStaticBrokerConfig
		}
		out = append(out, e)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].name < out[j].name })
	return out
}

// checkMirrorChange enforces the mirror.* rules on a config change of an
// existing topic: mirror.mode, mirror.source.cluster.id and mirror.link
// are set only at creation and never changed; removing mirror.mode is the
// mirror stop (brief I6, mirror_stop.go), of a push or a pull topic alike,
// accepted only from IncrementalAlterConfigs (incremental: an explicit
// DELETE), which removes mirror.source.cluster.id and mirror.link with
// it. stop reports such a removal.
func checkMirrorChange(old, next map[string]string, incremental bool) (stop bool, err error) {
	_, wasMirror := old[cfgMirrorMode]
	_, isMirror := next[cfgMirrorMode]
	stop = wasMirror && !isMirror
	if stop && !incremental {
		return false, fmt.Errorf("%w: This AlterConfigs request would remove %s, which stops the mirror (making the topic writable); stop it explicitly with an IncrementalAlterConfigs DELETE of %s (verbatim mirror stop), or list %s unchanged.", errInvalidConfig, cfgMirrorMode, cfgMirrorMode, cfgMirrorMode)
	}
	for _, name := range []string{cfgMirrorMode, cfgMirrorSourceClusterID, cfgMirrorLink} {
		ov, oldSet := old[name]
		nv, newSet := next[name]
		switch {
		case oldSet == newSet && ov == nv:
			continue
		case stop && oldSet && !newSet:
			continue // the stop removes them all
		case !oldSet:
			return false, fmt.Errorf("%w: %s can only be set when the topic is created.", errInvalidConfig, name)
		default:
			return false, fmt.Errorf("%w: %s cannot be changed after the topic is created; only a DELETE of %s (mirror stop) removes it.", errInvalidConfig, name, cfgMirrorMode)
		}
	}
	return stop, nil
}

// alterTopicConfig validates next as t's complete set of overrides and,
// unless validateOnly, applies it durably. incremental tells whether it
// comes from IncrementalAlterConfigs (the only way to stop a mirror). A
// change that removes mirror.mode runs the mirror stop (mirror_stop.go),
// which applies the rest of next as its last step; validateOnly never
// stops anything.
func (s *Server) alterTopicConfig(t *Topic, next map[string]string, validateOnly, incremental bool) error {
	old := t.Config().Overrides()
	stop, err := checkMirrorChange(old, next, incremental)
	if err != nil {
		return err
	}
	if stop {
		delete(next, cfgMirrorSourceClusterID)
		delete(next, cfgMirrorLink)
	}
	cfg, err := s.topicConfig(next)
	if err != nil {
		return err
	}
	if err := s.checkTopicPolicies(cfg); err != nil {
		return err
	}
	if validateOnly {
		return nil
	}
	if stop {
		return s.stopMirror(t, next, old[cfgMirrorSourceClusterID])
	}
	if incremental {
		// A stop interrupted after the topic became writable is
		// finished by the next IncrementalAlterConfigs (or start).
		if err := s.resumeMirrorStop(t); err != nil {
			return err
		}
	}
	if err := s.setTopicConfig(t, cfg); err != nil {
		return err
	}
	s.log.Info("altered topic config", "topic", t.Name, "configs", cfg.Overrides())
	return nil
}

// setTopicOverrides makes overrides t's config (setTopicConfig).
func (s *Server) setTopicOverrides(t *Topic, overrides map[string]string) error {
	cfg, err := s.topicConfig(overrides)
	if err != nil {
		return err
	}
	return s.setTopicConfig(t, cfg)
}

// setTopicConfig makes cfg t's config and pushes it into the open logs of
// its partitions.
func (s *Server) setTopicConfig(t *Topic, cfg *TopicConfig) error {
	if err := s.cluster.setConfig(t, cfg); err != nil {
		return err
	}
	s.reconfigureLogs(t)
	return nil
}

// duplicateResources counts (type, name) pairs; Kafka refuses duplicates
// in one request with INVALID_REQUEST for each of them.
func duplicateResources[T any](items []T, key func(T) (kmsg.ConfigResourceType, string)) map[string]int {
	out := map[string]int{}
	for _, it := range items {
		t, n := key(it)
		out[strconv.Itoa(int(t))+"/"+n]++
	}
	return out
}

func resourceKey(t kmsg.ConfigResourceType, n string) string { return strconv.Itoa(int(t)) + "/" + n }

// alterConfigResource is the answer AlterConfigs and IncrementalAlterConfigs
// give one resource: INVALID_REQUEST when the request names it twice (dups,
// from duplicateResources), else its authorization's refusal, else what
// alter makes of it. A change (not validateOnly) is audited with names,
// the configs it names.
func (s *Server) alterConfigResource(r *Request, typ kmsg.ConfigResourceType, name string, dups map[string]int, validateOnly bool, names []string, alter func() error) (int16, *string) {
	var err error
	if dups[resourceKey(typ, name)] > 1 {
		err = kafkaErr(kerr.InvalidRequest, "Error due to duplicate config resources")
	} else if err = s.configsRefusal(r, typ, name, true); err == nil {
		err = alter()
	}
	code, msg := errorToKafka(err)
	if !validateOnly {
		s.auditRecord(r, "alter configs", typ.String(), name, code, "configs", names)
	}
	return code, msg
}

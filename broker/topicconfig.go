package broker

import (
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Topic configs: Kafka's topic config names, types, defaults and validation
// (Apache Kafka 4.x LogConfig), plus Verbatim's mirror.* configs.
//
// A topic stores only its overrides; everything else is the default. There
// are no static broker overrides of topic defaults in Verbatim (yet), so a
// config's source is either DYNAMIC_TOPIC_CONFIG (an override) or
// DEFAULT_CONFIG, and its one synonym is the broker config that would hold
// the default in Kafka.

// configDef describes one topic config.
type configDef struct {
	name string
	typ  kmsg.ConfigType
	// def is the default as Kafka renders it; hasDefault false means no
	// default (the config is absent unless set).
	def        string
	hasDefault bool
	// brokerSynonym is the broker config that supplies the default.
	brokerSynonym string
	// check validates a value already parsed as typ; nil accepts all.
	check func(v string) string
	doc   string
}

const (
	longMax = "9223372036854775807"

	// Verbatim's mirror configs (docs/protocol.md).
	cfgMirrorMode            = "mirror.mode"
	cfgMirrorSourceClusterID = "mirror.source.cluster.id"
	// cfgMirrorLink names the cluster link that owns a pull-mode mirror
	// topic (mirror.mode=pull).
	cfgMirrorLink = "mirror.link"

	// cfgMaxDecompressedBatchBytes is Verbatim's per-batch cap on
	// decompressed records (docs/compat.md), next to Kafka's per-record
	// max.decompressed.message.bytes.
	cfgMaxDecompressedBatchBytes = "max.decompressed.batch.bytes"
)

func atLeast(min int64) func(string) string {
	return func(v string) string {
		n, _ := strconv.ParseInt(v, 10, 64)
		if n < min {
			return fmt.Sprintf("Value must be at least %d", min)
		}
		return ""
	}
}

func between(min, max int64) func(string) string {
	return func(v string) string {
		n, _ := strconv.ParseInt(v, 10, 64)
		if n < min {
			return fmt.Sprintf("Value must be at least %d", min)
		}
		if n > max {
			return fmt.Sprintf("Value must be no more than %d", max)
		}
		return ""
	}
}

func oneOf(vals ...string) func(string) string {
	return func(v string) string {
		for _, x := range vals {
			if v == x {
				return ""
			}
		}
		return "String must be one of: " + strings.Join(vals, ", ")
	}
}

func listOf(vals ...string) func(string) string {
	return func(v string) string {
		for _, item := range strings.Split(v, ",") {
			item = strings.TrimSpace(item)
			ok := false
			for _, x := range vals {
				if item == x {
					ok = true
				}
			}
			if !ok {
				return "String must be one of: " + strings.Join(vals, ", ")
			}
		}
		return ""
	}
}

// throttledReplicas accepts Kafka's "[partition]:[broker],..." or "*".
func throttledReplicas(v string) string {
	v = strings.TrimSpace(v)
	if v == "" || v == "*" {
		return ""
	}
	for _, item := range strings.Split(v, ",") {
		p, b, ok := strings.Cut(strings.TrimSpace(item), ":")
		if _, err := strconv.Atoi(p); !ok || err != nil {
			return "must be the literal '*' or a list of replicas in the following format: [partitionId]:[brokerId],[partitionId]:[brokerId],..."
		}
		if _, err := strconv.Atoi(b); err != nil {
			return "must be the literal '*' or a list of replicas in the following format: [partitionId]:[brokerId],[partitionId]:[brokerId],..."
		}
	}
	return ""
}

func d(name string, typ kmsg.ConfigType, def, synonym string, check func(string) string, doc string) configDef {
	return configDef{name: name, typ: typ, def: def, hasDefault: true, brokerSynonym: synonym, check: check, doc: doc}
}

var topicConfigDefs = []configDef{
	d("cleanup.policy", kmsg.ConfigTypeList, "delete", "log.cleanup.policy", listOf("compact", "delete"), "Retention policy for old log segments: delete, compact, or both."),
	d("compression.type", kmsg.ConfigTypeString, "producer", "compression.type", oneOf("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer"), "Final compression type for the topic."),
	d("compression.gzip.level", kmsg.ConfigTypeInt, "-1", "compression.gzip.level", func(v string) string {
		if v == "-1" {
			return ""
		}
		return between(1, 9)(v)
	}, "Compression level for gzip."),
	d("compression.lz4.level", kmsg.ConfigTypeInt, "9", "compression.lz4.level", between(1, 17), "Compression level for lz4."),
	d("compression.zstd.level", kmsg.ConfigTypeInt, "3", "compression.zstd.level", between(-131072, 22), "Compression level for zstd."),
	d("delete.retention.ms", kmsg.ConfigTypeLong, "86400000", "log.cleaner.delete.retention.ms", atLeast(0), "How long delete tombstones are retained on compacted topics."),
	d("errors.deadletterqueue.group.enable", kmsg.ConfigTypeBoolean, "false", "", nil, "Share-group dead-letter queue switch (share groups are not supported)."),
	d("file.delete.delay.ms", kmsg.ConfigTypeLong, "60000", "log.segment.delete.delay.ms", atLeast(0), "Time to wait before deleting a file from the filesystem."),
	d("flush.messages", kmsg.ConfigTypeLong, longMax, "log.flush.interval.messages", atLeast(1), "Messages accumulated before a forced flush (see verbatim serve --flush)."),
	d("flush.ms", kmsg.ConfigTypeLong, longMax, "log.flush.interval.ms", atLeast(0), "Maximum time before a forced flush (see verbatim serve --flush)."),
	d("follower.replication.throttled.replicas", kmsg.ConfigTypeList, "", "", throttledReplicas, "Replicas throttled on the follower side (no effect on a single node)."),
	d("index.interval.bytes", kmsg.ConfigTypeInt, "4096", "log.index.interval.bytes", atLeast(0), "Bytes between offset index entries."),
	d("leader.replication.throttled.replicas", kmsg.ConfigTypeList, "", "", throttledReplicas, "Replicas throttled on the leader side (no effect on a single node)."),
	d("local.retention.bytes", kmsg.ConfigTypeLong, "-2", "log.local.retention.bytes", atLeast(-2), "Local retention for tiered storage (tiered storage is not supported)."),
	d("local.retention.ms", kmsg.ConfigTypeLong, "-2", "log.local.retention.ms", atLeast(-2), "Local retention for tiered storage (tiered storage is not supported)."),
	d("max.compaction.lag.ms", kmsg.ConfigTypeLong, longMax, "log.cleaner.max.compaction.lag.ms", atLeast(1), "Maximum time a message stays ineligible for compaction."),
	d("max.decompressed.message.bytes", kmsg.ConfigTypeInt, "2147483639", "max.decompressed.message.bytes", between(1, 2147483639), "Largest record (its declared body size) a compressed batch may hold once decompressed; a larger one is refused with INVALID_RECORD before it is read. Per record, compressed batches only: uncompressed records are bounded by max.message.bytes."),
	d(cfgMaxDecompressedBatchBytes, kmsg.ConfigTypeLong, "67108864", cfgMaxDecompressedBatchBytes, between(1, 1<<30), "Verbatim: the most a compressed batch's records may decompress to (whole batch, default 64 MiB); a batch over it is refused with MESSAGE_TOO_LARGE."),
	d("max.message.bytes", kmsg.ConfigTypeInt, "1048588", "message.max.bytes", atLeast(0), "Largest record batch size allowed."),
	d("message.timestamp.after.max.ms", kmsg.ConfigTypeLong, "3600000", "log.message.timestamp.after.max.ms", atLeast(0), "Allowed amount a timestamp may be ahead of the broker's time (CreateTime)."),
	d("message.timestamp.before.max.ms", kmsg.ConfigTypeLong, longMax, "log.message.timestamp.before.max.ms", atLeast(0), "Allowed amount a timestamp may be behind the broker's time (CreateTime)."),
	d("message.timestamp.type", kmsg.ConfigTypeString, "CreateTime", "log.message.timestamp.type", oneOf("CreateTime", "LogAppendTime"), "CreateTime or LogAppendTime."),
	{name: "min.cleanable.dirty.ratio", typ: kmsg.ConfigTypeDouble, def: "0.5", hasDefault: true, brokerSynonym: "log.cleaner.min.cleanable.ratio", check: func(v string) string {
		f, _ := strconv.ParseFloat(v, 64)
		if f < 0 {
			return "Value must be at least 0"
		}
		if f > 1 {
			return "Value must be no more than 1"
		}
		return ""
	}, doc: "Minimum dirty ratio before the log is eligible for cleaning."},
	d("min.compaction.lag.ms", kmsg.ConfigTypeLong, "0", "log.cleaner.min.compaction.lag.ms", atLeast(0), "Minimum time a message stays uncompacted."),
	d("min.insync.replicas", kmsg.ConfigTypeInt, "1", "min.insync.replicas", atLeast(1), "Minimum in-sync replicas for acks=all."),
	d("preallocate", kmsg.ConfigTypeBoolean, "false", "log.preallocate", nil, "Preallocate segment files."),
	d("remote.copy.lag.bytes", kmsg.ConfigTypeLong, "-1", "log.remote.copy.lag.bytes", atLeast(-1), "Tiered storage copy lag (tiered storage is not supported)."),
	d("remote.copy.lag.ms", kmsg.ConfigTypeLong, "0", "log.remote.copy.lag.ms", atLeast(-1), "Tiered storage copy lag (tiered storage is not supported)."),
	d("remote.log.copy.disable", kmsg.ConfigTypeBoolean, "false", "", nil, "Tiered storage copy switch (tiered storage is not supported)."),
	d("remote.log.delete.on.disable", kmsg.ConfigTypeBoolean, "false", "", nil, "Tiered storage delete switch (tiered storage is not supported)."),
	d("remote.storage.enable", kmsg.ConfigTypeBoolean, "false", "", func(v string) string {
		if strings.EqualFold(v, "true") {
			return "Tiered storage is not supported by Verbatim"
		}
		return ""
	}, "Tiered storage (not supported: only false is accepted)."),
	d("retention.bytes", kmsg.ConfigTypeLong, "-1", "log.retention.bytes", nil, "Maximum partition size before old segments are discarded; -1 for no limit."),
	d("retention.ms", kmsg.ConfigTypeLong, "604800000", "log.retention.ms", atLeast(-1), "Maximum time a segment is kept; -1 for no limit."),
	d("segment.bytes", kmsg.ConfigTypeInt, "1073741824", "log.segment.bytes", atLeast(1<<20), "Segment file size."),
	d("segment.index.bytes", kmsg.ConfigTypeInt, "10485760", "log.index.size.max.bytes", atLeast(4), "Offset index size."),
	d("segment.jitter.ms", kmsg.ConfigTypeLong, "0", "log.roll.jitter.ms", atLeast(0), "Random jitter subtracted from segment.ms."),
	d("segment.ms", kmsg.ConfigTypeLong, "604800000", "log.roll.ms", atLeast(1), "Time after which a segment is rolled."),
	d("unclean.leader.election.enable", kmsg.ConfigTypeBoolean, "false", "unclean.leader.election.enable", nil, "Unclean leader election (no effect on a single node)."),
	{name: cfgMirrorMode, typ: kmsg.ConfigTypeString, check: oneOf("push", "pull"), doc: "Verbatim: marks a mirror topic, written by mirror produces (push) or by the cluster link mirror.link (pull); set only at creation (docs/protocol.md, docs/mirroring.md)."},
	{name: cfgMirrorSourceClusterID, typ: kmsg.ConfigTypeString, doc: "Verbatim: the source cluster id of a mirror topic; set only at creation."},
	{name: cfgMirrorLink, typ: kmsg.ConfigTypeString, doc: "Verbatim: the cluster link that mirrors a pull-mode topic (mirror.mode=pull); set only at creation."},
	{name: cfgMirrorPolicies, typ: kmsg.ConfigTypeList, check: checkPolicyList, doc: "Verbatim: the topic's mirror policies, built-ins or --policy-dir modules (docs/policies.md); mirror topics default to epoch-monotonic,control-records."},
}

var topicConfigByName = func() map[string]*configDef {
	m := make(map[string]*configDef, len(topicConfigDefs))
	for i := range topicConfigDefs {
		m[topicConfigDefs[i].name] = &topicConfigDefs[i]
	}
	return m
}()

// validateConfigValue checks one value against its definition and returns
// the normalised value (booleans lower-cased, lists trimmed).
func validateConfigValue(def *configDef, v string) (string, error) {
	bad := func(reason string) (string, error) {
		return "", fmt.Errorf("%w: Invalid value %s for configuration %s: %s", errInvalidConfig, v, def.name, reason)
	}
	v = strings.TrimSpace(v)
	switch def.typ {
	case kmsg.ConfigTypeInt:
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < math.MinInt32 || n > math.MaxInt32 {
			return bad("Not a number of type INT")
		}
	case kmsg.ConfigTypeLong:
		if _, err := strconv.ParseInt(v, 10, 64); err != nil {
			return bad("Not a number of type LONG")
		}
	case kmsg.ConfigTypeDouble:
		f, err := strconv.ParseFloat(v, 64)
		if err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
			return bad("Not a number of type DOUBLE")
		}
	case kmsg.ConfigTypeBoolean:
		switch strings.ToLower(v) {
		case "true", "false":
			v = strings.ToLower(v)
		default:
			return bad("Expected value to be either true or false")
		}
	case kmsg.ConfigTypeList:
		parts := strings.Split(v, ",")
		for i := range parts {
			parts[i] = strings.TrimSpace(parts[i])
		}
		v = strings.Join(parts, ",")
	}
	if def.check != nil {
		if reason := def.check(v); reason != "" {
			return bad(reason)
		}
	}
	return v, nil
}

// TopicConfig is a topic's effective configuration: the overrides it was
// given plus the typed values data-plane handlers need.
type TopicConfig struct {
	overrides map[string]string
	// defaults are the broker's defaults it was derived over (shared,
	// read-only; nil: Kafka's).
	defaults map[string]string

	CleanupPolicyCompact bool
	CleanupPolicyDelete  bool
	CompressionType      string
	MaxMessageBytes      int32
	// MaxDecompressedMessageBytes is Kafka's per-record
	// max.decompressed.message.bytes; MaxDecompressedBatchBytes Verbatim's
	// per-batch max.decompressed.batch.bytes.
	MaxDecompressedMessageBytes int32
	MaxDecompressedBatchBytes   int64
	// LogAppendTime is true for message.timestamp.type=LogAppendTime.
	LogAppendTime          bool
	TimestampBeforeMaxMs   int64
	TimestampAfterMaxMs    int64
	RetentionMs            int64
	RetentionBytes         int64
	SegmentBytes           int32
	SegmentMs              int64
	SegmentJitterMs        int64
	SegmentIndexBytes      int32
	IndexIntervalBytes     int32
	FlushMessages          int64
	FlushMs                int64
	MinInsyncReplicas      int32
	DeleteRetentionMs      int64
	MinCompactionLagMs     int64
	MaxCompactionLagMs     int64
	FileDeleteDelayMs      int64
	Preallocate            bool
	MinCleanableDirtyRatio float64
	LocalRetentionMs       int64
	LocalRetentionBytes    int64
	UncleanLeaderElection  bool
	// Mirror is true for a mirror topic of either mode (read-only for
	// clients, stoppable, retention dormant, mirror policies by default);
	// MirrorPush for mirror.mode=push (written by wire mirror produces),
	// MirrorPull for mirror.mode=pull (written by the cluster link
	// MirrorLink in process; wire mirror writes are refused).
	Mirror                bool
	MirrorPush            bool
	MirrorPull            bool
	MirrorLink            string
	MirrorSourceClusterID string
}

// newTopicConfig validates overrides (unknown names are refused as Kafka
// refuses them) and derives the typed values, over Kafka's defaults.
func newTopicConfig(overrides map[string]string) (*TopicConfig, error) {
	return newTopicConfigWith(nil, overrides)
}

// newTopicConfigWith is newTopicConfig over the broker's defaults
// (Config.TopicDefaults: server.properties' log.retention.ms, ...), which
// win over Kafka's for every config the topic does not override.
func newTopicConfigWith(defaults map[string]string, overrides map[string]string) (*TopicConfig, error) {
	c := &TopicConfig{overrides: make(map[string]string, len(overrides)), defaults: defaults}
	for k, v := range overrides {
		def := topicConfigByName[k]
		if def == nil {
			return nil, fmt.Errorf("%w: Unknown topic config name: %s", errInvalidConfig, k)
		}
		nv, err := validateConfigValue(def, v)
		if err != nil {
			return nil, err
		}
		c.overrides[k] = nv
	}
	get := func(name string) string {
		if v, ok := c.overrides[name]; ok {
			return v
		}
		return c.defaultOf(topicConfigByName[name])
	}
	i64 := func(name string) int64 { n, _ := strconv.ParseInt(get(name), 10, 64); return n }
	i32 := func(name string) int32 { return int32(i64(name)) }
	for _, p := range strings.Split(get("cleanup.policy"), ",") {
		switch p {
		case "compact":
			c.CleanupPolicyCompact = true
		case "delete":
			c.CleanupPolicyDelete = true
		}
	}
	c.CompressionType = get("compression.type")
	c.MaxMessageBytes = i32("max.message.bytes")
	c.MaxDecompressedMessageBytes = i32("max.decompressed.message.bytes")
	c.MaxDecompressedBatchBytes = i64(cfgMaxDecompressedBatchBytes)
	c.LogAppendTime = get("message.timestamp.type") == "LogAppendTime"
	c.TimestampBeforeMaxMs = i64("message.timestamp.before.max.ms")
	c.TimestampAfterMaxMs = i64("message.timestamp.after.max.ms")
	c.RetentionMs = i64("retention.ms")
	c.RetentionBytes = i64("retention.bytes")
	c.SegmentBytes = i32("segment.bytes")
	c.SegmentMs = i64("segment.ms")
	c.SegmentJitterMs = i64("segment.jitter.ms")
	c.SegmentIndexBytes = i32("segment.index.bytes")
	c.IndexIntervalBytes = i32("index.interval.bytes")
	c.FlushMessages = i64("flush.messages")
	c.FlushMs = i64("flush.ms")
	c.MinInsyncReplicas = i32("min.insync.replicas")
	c.DeleteRetentionMs = i64("delete.retention.ms")
	c.MinCompactionLagMs = i64("min.compaction.lag.ms")
	c.MaxCompactionLagMs = i64("max.compaction.lag.ms")
	c.FileDeleteDelayMs = i64("file.delete.delay.ms")
	c.Preallocate = get("preallocate") == "true"
	c.MinCleanableDirtyRatio, _ = strconv.ParseFloat(get("min.cleanable.dirty.ratio"), 64)
	c.LocalRetentionMs = i64("local.retention.ms")
	c.LocalRetentionBytes = i64("local.retention.bytes")
	c.UncleanLeaderElection = get("unclean.leader.election.enable") == "true"
	c.MirrorPush = c.overrides[cfgMirrorMode] == "push"
	c.MirrorPull = c.overrides[cfgMirrorMode] == "pull"
	c.Mirror = c.MirrorPush || c.MirrorPull
	c.MirrorLink = c.overrides[cfgMirrorLink]
	c.MirrorSourceClusterID = c.overrides[cfgMirrorSourceClusterID]
	if _, ok := c.overrides[cfgMirrorSourceClusterID]; ok && !c.Mirror {
		return nil, fmt.Errorf("%w: %s is only valid on a mirror topic (with %s=push or pull)", errInvalidConfig, cfgMirrorSourceClusterID, cfgMirrorMode)
	}
	if _, ok := c.overrides[cfgMirrorLink]; ok != c.MirrorPull || ok && c.MirrorLink == "" {
		return nil, fmt.Errorf("%w: %s=pull and a non-empty %s go together (a pull-mode mirror topic names the cluster link that owns it)", errInvalidConfig, cfgMirrorMode, cfgMirrorLink)
	}
	if c.MinCompactionLagMs > c.MaxCompactionLagMs {
		return nil, fmt.Errorf("%w: conflict topic config setting min.compaction.lag.ms (%d) > max.compaction.lag.ms (%d)", errInvalidConfig, c.MinCompactionLagMs, c.MaxCompactionLagMs)
	}
	return c, nil
}

// defaultOf is a config's value when the topic does not override it: the
// broker's default if set, else Kafka's.
func (c *TopicConfig) defaultOf(def *configDef) string {
	if v, ok := c.defaults[def.name]; ok {
		return v
	}
	return def.def
}

// Overrides returns a copy of the topic-level overrides.
func (c *TopicConfig) Overrides() map[string]string {
	out := make(map[string]string, len(c.overrides))
	for k, v := range c.overrides {
		out[k] = v
	}
	return out
}

// configEntry is one config as DescribeConfigs reports it.
type configEntry struct {
	def *configDef
	// readOnly configs cannot be altered (mirror.*: set at creation).
	readOnly bool
	value    *string
	source   kmsg.ConfigSource
	synonyms []kmsg.DescribeConfigsResponseResourceConfigConfigSynonym
}

// describe lists the topic's configs in name order: every known config
// with a default or an override.
func (c *TopicConfig) describe() []configEntry {
	names := make([]string, 0, len(topicConfigDefs))
	for _, def := range topicConfigDefs {
		if _, set := c.overrides[def.name]; set || def.hasDefault {
			names = append(names, def.name)
		}
	}
	sort.Strings(names)
	out := make([]configEntry, 0, len(names))
	for _, n := range names {
		def := topicConfigByName[n]
		e := configEntry{def: def, source: kmsg.ConfigSourceDefaultConfig, readOnly: isSetAtCreation(n)}
		if v, ok := c.overrides[n]; ok {
			v := v
			e.value = &v
			e.source = kmsg.ConfigSourceDynamicTopicConfig
			syn := kmsg.NewDescribeConfigsResponseResourceConfigConfigSynonym()
			syn.Name, syn.Value, syn.Source = n, &v, kmsg.ConfigSourceDynamicTopicConfig
			e.synonyms = append(e.synonyms, syn)
		} else {
			v := c.defaultOf(def)
			e.value = &v
		}
		if v, ok := c.defaults[n]; ok && def.brokerSynonym != "" {
			if _, over := c.overrides[n]; !over {
				e.source = kmsg.ConfigSourceStaticBrokerConfig
			}
			syn := kmsg.NewDescribeConfigsResponseResourceConfigConfigSynonym()
			syn.Name, syn.Value, syn.Source = def.brokerSynonym, &v, kmsg.ConfigSourceStaticBrokerConfig
			e.synonyms = append(e.synonyms, syn)
		}
		if def.hasDefault && def.brokerSynonym != "" {
			v := def.def
			syn := kmsg.NewDescribeConfigsResponseResourceConfigConfigSynonym()
			syn.Name, syn.Value, syn.Source = def.brokerSynonym, &v, kmsg.ConfigSourceDefaultConfig
			e.synonyms = append(e.synonyms, syn)
		}
		out = append(out, e)
	}
	return out
}

// isSetAtCreation reports the mirror configs that are set only when the
// topic is created and removed only by the mirror stop.
func isSetAtCreation(name string) bool {
	return name == cfgMirrorMode || name == cfgMirrorSourceClusterID || name == cfgMirrorLink
}

// mirrorModeOf is a mirror topic's mirror.mode ("" for an ordinary one).
func mirrorModeOf(c *TopicConfig) string {
	switch {
	case c.MirrorPush:
		return "push"
	case c.MirrorPull:
		return "pull"
	}
	return ""
}

// errPullTopic refuses a wire mirror write (produce, DeleteRecords,
// registration) to a pull-mode topic: its cluster link owns it.
func errPullTopic(topic string, c *TopicConfig) error {
	return kafkaErr(kerr.PolicyViolation, fmt.Sprintf("topic %s is mirrored by cluster link %s (mirror.mode=pull): it takes no mirror produces or mirror DeleteRecords from pushers", topic, c.MirrorLink))
}

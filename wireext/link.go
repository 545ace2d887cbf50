package wireext

// The cluster link's admin requests (docs/protocol.md "Cluster link
// APIs"): Verbatim's own API keys, in the spirit of KIP-1279's
// StartMirrorTopics / StopMirrorTopics / PauseMirrorTopics /
// ResumeMirrorTopics / DescribeMirrors, plus the link's own lifecycle.
//
// The keys lie far above Kafka's (kmsg.MaxKey) so they never collide with
// a future Kafka API. They are not listed in ApiVersions' ApiKeys (Kafka
// clients would show them as unknown); a broker that serves them
// advertises the supported feature FeatureMirrorLink instead, and a client
// sends them only to a broker that does. Every request and response is
// flexible (KIP-482: compact strings and arrays, a tag section after each
// struct), version 0, with the usual request header v2 / response header
// v1.
//
// Errors are Kafka's codes: a request-level ErrorCode and ErrorMessage,
// per-topic results where a request names topics.

// API keys of the link admin requests.
const (
	APIKeyCreateMirrorLink     int16 = 22000
	APIKeyDeleteMirrorLink     int16 = 22001
	APIKeyDescribeMirrorLinks  int16 = 22002
	APIKeyStartMirrorTopics    int16 = 22003 // `mirror create --link`
	APIKeyPauseMirrorTopics    int16 = 22004 // pause and resume
	APIKeyDescribeMirrors      int16 = 22005 // `mirror status`
	APIKeyTruncateMirrorTopics int16 = 22006 // `mirror truncate --to-divergence`
)

// FeatureMirrorLink advertises the link admin requests (ApiVersions v3+
// supported features).
const (
	FeatureMirrorLink           = "verbatim.mirror.link"
	FeatureMirrorLinkMinVersion = 0
	FeatureMirrorLinkMaxVersion = 0
)

// Partition states of a mirror topic (KIP-1279's names).
const (
	StatePreparing = "PREPARING"
	StateMirroring = "MIRRORING"
	StatePaused    = "PAUSED"
	StateStopping  = "STOPPING"
	StateStopped   = "STOPPED"
	StateFailed    = "FAILED"
)

// TopicStates summarises partition statuses per topic as `link describe`
// shows a link's topics: each topic's state is the one of its partitions
// that most needs attention (FAILED, then PREPARING, PAUSED, STOPPING,
// MIRRORING, STOPPED).
func TopicStates(sts []MirrorPartitionStatus) map[string]string {
	byTopic := map[string]string{}
	for _, st := range sts {
		if cur, ok := byTopic[st.Topic]; !ok || stateRank(st.State) < stateRank(cur) {
			byTopic[st.Topic] = st.State
		}
	}
	return byTopic
}

func stateRank(s string) int {
	switch s {
	case StateFailed:
		return 0
	case StatePreparing:
		return 1
	case StatePaused:
		return 2
	case StateStopping:
		return 3
	case StateMirroring:
		return 4
	}
	return 5
}

// LinkConfig is a link's definition as `link create` sends it and `link
// describe` shows it (secrets masked).
type LinkConfig struct {
	Name string
	// SourceBootstrap is the source cluster's bootstrap list.
	SourceBootstrap string
	// SourceConfig holds Kafka client properties for the source
	// (security.protocol, ssl.*, sasl.*). The broker stores secret values
	// encrypted (password.encoder.secret) and answers them masked.
	SourceConfig map[string]string
	// Topics and Exclude are regular expressions (Go RE2 syntax, matched
	// against the whole name); Groups selects the consumer groups whose
	// offsets are synced ("" syncs none).
	Topics, Exclude, Groups string
	// SyncConfigs keeps mirror topics' configs in step with the source.
	SyncConfigs bool
	// SyncIntervalMs is the metadata, config and group-offset sync period
	// (0: the broker's default).
	SyncIntervalMs int64
	// ThrottleBytesPerSec caps the link's fetch rate (0: unthrottled).
	ThrottleBytesPerSec int64
}

// CreateMirrorLinkRequest creates a link (APIKeyCreateMirrorLink).
type CreateMirrorLinkRequest struct {
	Link         LinkConfig
	ValidateOnly bool
}

// CreateMirrorLinkResponse answers it.
type CreateMirrorLinkResponse struct {
	ThrottleMs   int32
	ErrorCode    int16
	ErrorMessage string
}

// DeleteMirrorLinkRequest deletes a link (APIKeyDeleteMirrorLink). Without
// Force it is refused while the link has mirror topics that are not
// stopped; with Force those topics stay mirror topics in FAILED ("link
// deleted") until stopped.
type DeleteMirrorLinkRequest struct {
	Name  string
	Force bool
}

// DeleteMirrorLinkResponse answers it.
type DeleteMirrorLinkResponse struct {
	ThrottleMs   int32
	ErrorCode    int16
	ErrorMessage string
}

// DescribeMirrorLinksRequest lists links (APIKeyDescribeMirrorLinks);
// no names lists every link.
type DescribeMirrorLinksRequest struct {
	Names []string
}

// DescribeMirrorLinksResponse answers it.
type DescribeMirrorLinksResponse struct {
	ThrottleMs   int32
	ErrorCode    int16
	ErrorMessage string
	Links        []LinkDescription
}

// LinkDescription is one link as described.
type LinkDescription struct {
	ErrorCode    int16 // UNKNOWN_SERVER_ERROR.. per name asked; 0 when found
	ErrorMessage string
	Config       LinkConfig // secrets masked
	// LinkID is the id the broker gave the link (its writer id on its
	// partitions).
	LinkID [16]byte
	// SourceClusterID is the source's cluster id as last seen ("" before
	// the first contact).
	SourceClusterID string
	// State is the link's own state: "ACTIVE", or "UNAVAILABLE" with
	// Reason when the source cannot be reached or refuses the link.
	State  string
	Reason string
	Topics []LinkTopic
}

// LinkTopic is a topic the link's patterns match.
type LinkTopic struct {
	Topic string
	// State is a partition state (the least advanced of its
	// partitions), or "SKIPPED" with Reason for a matching topic the link
	// does not mirror (an existing ordinary topic, an internal topic).
	State  string
	Reason string
}

// StateSkipped marks a LinkTopic that matches but is not mirrored.
const StateSkipped = "SKIPPED"

// StartMirrorTopicsRequest makes topics mirror topics of a link
// (APIKeyStartMirrorTopics, `mirror create --link`). A topic that does
// not exist is created like the source's; an existing ordinary topic is
// converted only with TruncateToCommon (failback): truncated to the last
// offset and epoch it shares with the source, the cut records kept in
// KeepTopic (or the default `<topic>.truncated`), then mirrored.
type StartMirrorTopicsRequest struct {
	Link             string
	Topics           []string
	TruncateToCommon bool
	KeepTopic        string
}

// StartMirrorTopicsResponse answers it, one result per topic.
type StartMirrorTopicsResponse struct {
	ThrottleMs   int32
	ErrorCode    int16
	ErrorMessage string
	Topics       []MirrorTopicResult
}

// MirrorTopicResult is one topic's outcome.
type MirrorTopicResult struct {
	Topic        string
	ErrorCode    int16
	ErrorMessage string
	// Partitions is filled by truncations (StartMirrorTopics with
	// TruncateToCommon, TruncateMirrorTopics).
	Partitions []TruncatedPartition
}

// TruncatedPartition says what a truncation did to one partition.
type TruncatedPartition struct {
	Partition int32
	// TruncatedTo is the new log end (the first offset removed), -1 when
	// nothing was removed.
	TruncatedTo int64
	// RemovedBatches and RemovedBytes count what was cut, kept in KeptIn.
	RemovedBatches int32
	RemovedBytes   int64
	KeptIn         string
}

// PauseMirrorTopicsRequest pauses (Pause true) or resumes mirror topics
// (APIKeyPauseMirrorTopics): the named topics, or all of Link's when
// Topics is empty.
type PauseMirrorTopicsRequest struct {
	Link   string
	Topics []string
	Pause  bool
}

// PauseMirrorTopicsResponse answers it.
type PauseMirrorTopicsResponse struct {
	ThrottleMs   int32
	ErrorCode    int16
	ErrorMessage string
	Topics       []MirrorTopicResult
}

// DescribeMirrorsRequest asks the state of mirror partitions
// (APIKeyDescribeMirrors, `mirror status`): Link's topics, or the named
// ones, or every mirror topic.
type DescribeMirrorsRequest struct {
	Link   string
	Topics []string
	// LeaderOnly (tagged field DescribeMirrorsLeaderOnlyTag, a bool,
	// omitted when false) asks a broker of a cluster for the partitions
	// it leads only, answered from its own link manager without asking
	// the other brokers: what a broker sends the leaders to answer the
	// leaders' view of a DescribeMirrors it received.
	LeaderOnly bool
}

// DescribeMirrorsLeaderOnlyTag is the tag of DescribeMirrorsRequest's
// LeaderOnly in the request's own tag section: one byte, non-zero true.
const DescribeMirrorsLeaderOnlyTag = 0

// DescribeMirrorsResponse answers it.
type DescribeMirrorsResponse struct {
	ThrottleMs   int32
	ErrorCode    int16
	ErrorMessage string
	Partitions   []MirrorPartitionStatus
}

// MirrorPartitionStatus is one mirror partition's state and progress.
type MirrorPartitionStatus struct {
	Topic     string
	Partition int32
	Link      string // "" for a push mirror
	State     string
	Reason    string
	// SourceHighWatermark as last fetched (-1 unknown), LogEndOffset the
	// destination's, Lag = max(0, SourceHighWatermark - LogEndOffset),
	// LagMs how long the destination has been behind (0 when caught up).
	SourceHighWatermark int64
	LogEndOffset        int64
	Lag                 int64
	LagMs               int64
	// LastMirroredOffset and LastMirroredEpoch are the last offset
	// written from the source and its batch's leader epoch (-1 none).
	LastMirroredOffset int64
	LastMirroredEpoch  int32
	// BytesPerSec is the recent append rate from the source.
	BytesPerSec int64
	// DivergenceOffset is, in FAILED by divergence, the first offset
	// where the logs part (-1 otherwise).
	DivergenceOffset int64
}

// TruncateMirrorTopicsRequest truncates FAILED-by-divergence mirror
// partitions to the point they share with the source and resumes them
// (APIKeyTruncateMirrorTopics, `mirror truncate --to-divergence`); the cut
// records are kept in KeepTopic (default `<topic>.truncated`).
type TruncateMirrorTopicsRequest struct {
	Topics    []string
	KeepTopic string
}

// TruncateMirrorTopicsResponse answers it.
type TruncateMirrorTopicsResponse struct {
	ThrottleMs   int32
	ErrorCode    int16
	ErrorMessage string
	Topics       []MirrorTopicResult
}

package groupcoord

// Groups and their members: states, protocol selection, validation.

import (
	"slices"
	"sort"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/verbatim-kafka/verbatim/coordlog"
)

type groupState int8

const (
	groupEmpty groupState = iota
	groupPreparingRebalance
	groupCompletingRebalance
	groupStable
	groupDead
)

func (s groupState) String() string {
	switch s {
	case groupEmpty:
		return "Empty"
	case groupPreparingRebalance:
		return "PreparingRebalance"
	case groupCompletingRebalance:
		return "CompletingRebalance"
	case groupStable:
		return "Stable"
	default:
		return "Dead"
	}
}

// Kafka's broker defaults for groups.
const (
	groupMinSessionTimeout       = 6 * time.Second      // group.min.session.timeout.ms
	groupMaxSessionTimeout       = 30 * time.Minute     // group.max.session.timeout.ms
	DefaultInitialRebalanceDelay = 3 * time.Second      // group.initial.rebalance.delay.ms
	offsetsRetention             = 7 * 24 * time.Hour   // offsets.retention.minutes
	offsetsRetentionCheck        = 10 * time.Minute     // offsets.retention.check.interval.ms
	offsetMetadataMaxBytes       = 4096                 // offset.metadata.max.bytes
	groupMaxSize                 = int(^uint32(0) >> 1) // group.max.size
)

// OffsetEntry is one committed offset.
type OffsetEntry struct {
	Offset      int64
	LeaderEpoch int32
	Metadata    string
	CommitTs    int64
}

// JoinResult is the answer to one JoinGroup.
type JoinResult struct {
	Code           int16
	Generation     int32
	ProtocolType   string
	Protocol       string
	Leader         string
	MemberID       string
	SkipAssignment bool
	Members        []kmsg.JoinGroupResponseMember
}

// SyncResult is the answer to one SyncGroup.
type SyncResult struct {
	Code         int16
	ProtocolType string
	Protocol     string
	Assignment   []byte
}

type groupMember struct {
	id               string
	instanceID       *string
	clientID         string
	clientHost       string
	rebalanceTimeout time.Duration
	sessionTimeout   time.Duration
	protocolType     string
	protocols        []kmsg.JoinGroupRequestProtocol
	assignment       []byte
	lastHeartbeat    time.Time
	// joinWait/syncWait are set while the member waits for the end of
	// the join or sync phase.
	joinWait chan JoinResult
	syncWait chan SyncResult
}

func (m *groupMember) metadataFor(protocol string) []byte {
	for _, p := range m.protocols {
		if p.Name == protocol {
			return p.Metadata
		}
	}
	return nil
}

// endWaits answers whatever m waits for (join or sync) with code.
func (m *groupMember) endWaits(code int16) {
	if m.joinWait != nil {
		m.joinWait <- JoinResult{Code: code, MemberID: m.id, Generation: -1}
		m.joinWait = nil
	}
	if m.syncWait != nil {
		m.syncWait <- SyncResult{Code: code}
		m.syncWait = nil
	}
}

func (m *groupMember) sameProtocols(ps []kmsg.JoinGroupRequestProtocol) bool {
	if len(ps) != len(m.protocols) {
		return false
	}
	for i := range ps {
		if ps[i].Name != m.protocols[i].Name || string(ps[i].Metadata) != string(m.protocols[i].Metadata) {
			return false
		}
	}
	return true
}

type group struct {
	id           string
	state        groupState
	stateTime    time.Time
	protocolType string
	protocol     string
	generation   int32
	leader       string
	members      map[string]*groupMember
	static       map[string]string    // instance id -> member id
	pending      map[string]time.Time // KIP-394 member ids handed out, by deadline
	// joinDeadline ends PreparingRebalance; initialDelay marks the
	// delayed first rebalance of an empty group (KIP-134).
	joinDeadline time.Time
	initialDelay bool
	// pendingSync are members that have not yet sent SyncGroup for the
	// current generation; syncDeadline is when they are removed.
	pendingSync  map[string]bool
	syncDeadline time.Time
	// assigning is the generation whose leader assignment is being
	// written, 0 if none.
	assigning int32
	// inflight counts queued writes of the group not yet appended.
	inflight int
	offsets  map[coordlog.TopicPartition]OffsetEntry
	// pendingTxn are transactional offset commits not yet decided, by
	// producer id.
	pendingTxn map[int64]map[coordlog.TopicPartition]OffsetEntry
}

func newGroup(id string, now time.Time) *group {
	return &group{
		id: id, state: groupEmpty, stateTime: now,
		members: map[string]*groupMember{}, static: map[string]string{}, pending: map[string]time.Time{},
		pendingSync: map[string]bool{}, offsets: map[coordlog.TopicPartition]OffsetEntry{},
		pendingTxn: map[int64]map[coordlog.TopicPartition]OffsetEntry{},
	}
}

func (g *group) transition(s groupState, now time.Time) {
	g.state = s
	g.stateTime = now
}

// maxRebalanceTimeout is the longest rebalance timeout of the members.
func (g *group) maxRebalanceTimeout() time.Duration {
	var d time.Duration
	for _, m := range g.members {
		d = max(d, m.rebalanceTimeout)
	}
	return d
}

// supportsProtocols reports whether a joining member's protocols fit the
// group (Kafka's INCONSISTENT_GROUP_PROTOCOL rule).
func (g *group) supportsProtocols(protocolType string, ps []kmsg.JoinGroupRequestProtocol) bool {
	if len(ps) == 0 || protocolType == "" {
		return false
	}
	if len(g.members) == 0 {
		return true
	}
	if protocolType != g.protocolType {
		return false
	}
	for _, p := range ps {
		all := true
		for _, m := range g.members {
			if !hasProtocol(m.protocols, p.Name) {
				all = false
				break
			}
		}
		if all {
			return true
		}
	}
	return false
}

func hasProtocol(ps []kmsg.JoinGroupRequestProtocol, name string) bool {
	for _, p := range ps {
		if p.Name == name {
			return true
		}
	}
	return false
}

// selectProtocol is Kafka's vote: among the protocols every member
// supports, each member votes for its first choice; most votes wins.
func (g *group) selectProtocol() string {
	ids := g.sortedMemberIDs()
	if len(ids) == 0 {
		return ""
	}
	var candidates []string
	for _, p := range g.members[ids[0]].protocols {
		all := true
		for _, id := range ids {
			if !hasProtocol(g.members[id].protocols, p.Name) {
				all = false
				break
			}
		}
		if all {
			candidates = append(candidates, p.Name)
		}
	}
	votes := map[string]int{}
	for _, id := range ids {
		for _, p := range g.members[id].protocols {
			if slices.Contains(candidates, p.Name) {
				votes[p.Name]++
				break
			}
		}
	}
	best, bestVotes := "", -1
	for _, c := range candidates {
		if votes[c] > bestVotes {
			best, bestVotes = c, votes[c]
		}
	}
	return best
}

func (g *group) sortedMemberIDs() []string {
	ids := make([]string, 0, len(g.members))
	for id := range g.members {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	return ids
}

func (g *group) allJoined() bool {
	if len(g.pending) > 0 {
		return false
	}
	for _, m := range g.members {
		if m.joinWait == nil {
			return false
		}
	}
	return true
}

// validateMember checks a member id and group instance id against g, as
// Kafka's ClassicGroup.validateMember does for JoinGroup of a known member,
// SyncGroup, Heartbeat, LeaveGroup, OffsetCommit and TxnOffsetCommit: an
// instance id that no member holds is UNKNOWN_MEMBER_ID (a dynamic member
// naming one, or a static member removed meanwhile), one held by another
// member id is FENCED_INSTANCE_ID (KIP-345), and then the member id must
// be known (UNKNOWN_MEMBER_ID). Without an instance id, a static member's
// own member id is accepted.
func (g *group) validateMember(memberID string, instanceID *string) (*groupMember, int16) {
	if instanceID != nil {
		cur, ok := g.static[*instanceID]
		if !ok {
			return nil, kerr.UnknownMemberID.Code
		}
		if cur != memberID {
			return nil, kerr.FencedInstanceID.Code
		}
	}
	m := g.members[memberID]
	if m == nil {
		return nil, kerr.UnknownMemberID.Code
	}
	return m, 0
}

package groupcoord

// The group coordinator: Kafka's classic group protocol on one node.
//
// Every group this broker coordinates lives in memory in a group struct,
// guarded by the coordinator's one mutex; its durable form is the group's
// records in __consumer_offsets (group metadata at the end of each
// rebalance, one record per committed offset), replayed on start
// (load.go). Writes are queued under the mutex and appended without it
// (drive.go).
//
// States and transitions follow Kafka's GroupCoordinator:
//
//	Empty --join--> PreparingRebalance --all joined or rebalance timeout-->
//	CompletingRebalance --leader's SyncGroup--> Stable --join/leave/expiry-->
//	PreparingRebalance ...; a rebalance that ends with no member -> Empty;
//	DeleteGroups or offset expiry of an empty group -> Dead (removed).
//
// JoinGroup and SyncGroup answers that wait for other members are deferred
// replies: the connection keeps reading while the member waits. Time is
// read only through the coordinator's clock and timers are evaluated by
// Tick, which the broker calls every coordlog.TickInterval.

import (
	"crypto/rand"
	"encoding/hex"
	"log/slog"
	"sort"
	"sync"
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
			if containsString(candidates, p.Name) {
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

func containsString(ss []string, s string) bool {
	for _, x := range ss {
		if x == s {
			return true
		}
	}
	return false
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

// Config is what a Coordinator is built from.
type Config struct {
	// Log stores __consumer_offsets.
	Log   coordlog.Log
	Clock coordlog.Clock
	// Logger gets the coordinator's warnings; nil discards them.
	Logger *slog.Logger
	// InitialRebalanceDelay is group.initial.rebalance.delay.ms.
	InitialRebalanceDelay time.Duration
}

// Coordinator coordinates every group (this node owns every
// __consumer_offsets partition).
type Coordinator struct {
	log   coordlog.Log
	clock coordlog.Clock
	lg    *slog.Logger

	mu            sync.Mutex
	groups        map[string]*group
	closed        bool
	lastRetention time.Time
	// initialRebalanceDelay is group.initial.rebalance.delay.ms.
	initialRebalanceDelay time.Duration
	retention             time.Duration
	// outbox is the queue of writes decided under mu and not yet
	// appended; driving is set while a goroutine appends them (drive.go).
	outbox  []*write
	driving bool
}

// New returns a coordinator with no groups; Load recovers them.
func New(cfg Config) *Coordinator {
	lg := cfg.Logger
	if lg == nil {
		lg = slog.New(slog.DiscardHandler)
	}
	return &Coordinator{
		log: cfg.Log, clock: cfg.Clock, lg: lg, groups: map[string]*group{},
		initialRebalanceDelay: cfg.InitialRebalanceDelay, retention: offsetsRetention,
		lastRetention: cfg.Clock.Now(),
	}
}

// InitialRebalanceDelay is the coordinator's group.initial.rebalance.delay.ms.
func (c *Coordinator) InitialRebalanceDelay() time.Duration { return c.initialRebalanceDelay }

func newMemberID(prefix string) string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	h := hex.EncodeToString(b[:])
	return prefix + "-" + h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
}

// JoinRequest is one JoinGroup.
type JoinRequest struct {
	Group            string
	MemberID         string
	InstanceID       *string
	ProtocolType     string
	Protocols        []kmsg.JoinGroupRequestProtocol
	SessionTimeout   time.Duration
	RebalanceTimeout time.Duration
	ClientID         string
	ClientHost       string
	// RequireKnownMember: v4+ (KIP-394).
	RequireKnownMember bool
	Version            int16
}

// Join handles JoinGroup. It returns either an immediate result or a
// channel the result will be sent on.
func (c *Coordinator) Join(r JoinRequest) (JoinResult, chan JoinResult) {
	now := c.clock.Now()
	c.mu.Lock()
	n := len(c.outbox)
	res, ch, afterWrite := c.join(r, now)
	w := c.queuedSince(n)
	c.mu.Unlock()
	c.await(w)
	if afterWrite {
		// The answer depends on the write just made: it is on ch now.
		return <-ch, nil
	}
	return res, ch
}

// join is Join under c.mu. afterWrite means the answer is sent on ch by
// the advance of a write this call queued.
func (c *Coordinator) join(r JoinRequest, now time.Time) (res JoinResult, ch chan JoinResult, afterWrite bool) {
	fail := func(e *kerr.Error) (JoinResult, chan JoinResult, bool) {
		return JoinResult{Code: e.Code, MemberID: r.MemberID, Generation: -1}, nil, false
	}
	if c.closed {
		return fail(kerr.NotCoordinator)
	}
	if r.Group == "" {
		return fail(kerr.InvalidGroupID)
	}
	if r.SessionTimeout < groupMinSessionTimeout || r.SessionTimeout > groupMaxSessionTimeout {
		return fail(kerr.InvalidSessionTimeout)
	}
	g := c.groups[r.Group]
	if g == nil {
		if r.MemberID != "" {
			return fail(kerr.UnknownMemberID)
		}
		g = newGroup(r.Group, now)
		c.groups[r.Group] = g
	}
	if g.state == groupDead {
		return fail(kerr.CoordinatorNotAvailable)
	}
	if !g.supportsProtocols(r.ProtocolType, r.Protocols) {
		if len(g.members) == 0 && g.state == groupEmpty && len(g.offsets) == 0 && g.generation == 0 {
			delete(c.groups, r.Group)
		}
		return fail(kerr.InconsistentGroupProtocol)
	}
	if r.MemberID == "" {
		return c.joinUnknownMember(g, r, now)
	}
	res, ch = c.joinKnownMember(g, r, now)
	return res, ch, false
}

func (c *Coordinator) joinUnknownMember(g *group, r JoinRequest, now time.Time) (JoinResult, chan JoinResult, bool) {
	if r.InstanceID != nil {
		if old, ok := g.static[*r.InstanceID]; ok {
			return c.replaceStaticMember(g, g.members[old], r, now)
		}
		// A new static member joins directly (no KIP-394 round trip).
		id := newMemberID(*r.InstanceID)
		res, ch := c.addMemberAndRebalance(g, id, r, now)
		return res, ch, false
	}
	id := newMemberID(r.ClientID)
	if r.RequireKnownMember {
		g.pending[id] = now.Add(r.SessionTimeout)
		return JoinResult{Code: kerr.MemberIDRequired.Code, MemberID: id, Generation: -1}, nil, false
	}
	res, ch := c.addMemberAndRebalance(g, id, r, now)
	return res, ch, false
}

func (c *Coordinator) addMemberAndRebalance(g *group, id string, r JoinRequest, now time.Time) (JoinResult, chan JoinResult) {
	if len(g.members) >= groupMaxSize {
		return JoinResult{Code: kerr.GroupMaxSizeReached.Code, MemberID: id, Generation: -1}, nil
	}
	delete(g.pending, id)
	m := &groupMember{
		id: id, instanceID: r.InstanceID, clientID: r.ClientID, clientHost: r.ClientHost,
		rebalanceTimeout: r.RebalanceTimeout, sessionTimeout: r.SessionTimeout,
		protocolType: r.ProtocolType, protocols: r.Protocols, lastHeartbeat: now,
		joinWait: make(chan JoinResult, 1),
	}
	if len(g.members) == 0 {
		g.protocolType = r.ProtocolType
	}
	g.members[id] = m
	if r.InstanceID != nil {
		g.static[*r.InstanceID] = id
	}
	if g.leader == "" {
		g.leader = id
	}
	ch := m.joinWait
	if g.state == groupPreparingRebalance && g.initialDelay {
		// KIP-134: each new member extends the initial delay, up to
		// the rebalance timeout.
		limit := g.stateTime.Add(g.maxRebalanceTimeout())
		g.joinDeadline = minTime(now.Add(c.initialRebalanceDelay), limit)
	}
	c.maybePrepareRebalance(g, now)
	c.maybeCompleteJoin(g, now)
	return JoinResult{}, ch
}

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

func (c *Coordinator) replaceStaticMember(g *group, old *groupMember, r JoinRequest, now time.Time) (JoinResult, chan JoinResult, bool) {
	newID := newMemberID(*r.InstanceID)
	// The old instance is fenced: whatever it waits for ends now.
	if old.joinWait != nil {
		old.joinWait <- JoinResult{Code: kerr.FencedInstanceID.Code, MemberID: old.id, Generation: -1}
		old.joinWait = nil
	}
	if old.syncWait != nil {
		old.syncWait <- SyncResult{Code: kerr.FencedInstanceID.Code}
		old.syncWait = nil
	}
	delete(g.members, old.id)
	wasPendingSync := g.pendingSync[old.id]
	delete(g.pendingSync, old.id)
	m := *old
	m.id = newID
	m.clientID, m.clientHost = r.ClientID, r.ClientHost
	m.sessionTimeout, m.rebalanceTimeout = r.SessionTimeout, r.RebalanceTimeout
	m.lastHeartbeat = now
	m.joinWait, m.syncWait = nil, nil
	g.members[newID] = &m
	g.static[*r.InstanceID] = newID
	if wasPendingSync {
		g.pendingSync[newID] = true
	}
	wasLeader := g.leader == old.id
	if wasLeader {
		g.leader = newID
	}
	switch g.state {
	case groupStable:
		oldSelected := old.metadataFor(g.protocol)
		m.protocols = r.Protocols
		if !hasProtocol(r.Protocols, g.protocol) || string(oldSelected) != string(m.metadataFor(g.protocol)) {
			// The subscription changed: a real rebalance.
			m.joinWait = make(chan JoinResult, 1)
			ch := m.joinWait
			c.prepareRebalance(g, now)
			return JoinResult{}, ch, false
		}
		// The answer is the group as it is now, sent once the new
		// member id is durable.
		res := JoinResult{Generation: g.generation, ProtocolType: g.protocolType, Protocol: g.protocol, Leader: g.leader, MemberID: newID}
		if wasLeader && r.Version >= 9 {
			res.SkipAssignment = true
			res.Members = c.joinMembers(g)
		}
		ch := make(chan JoinResult, 1)
		c.persistGroup(g, now, func(err error) {
			if err != nil {
				c.lg.Warn("persisting static member replacement", "group", g.id, "err", err)
				res = JoinResult{Code: kerr.UnknownServerError.Code, MemberID: newID, Generation: -1}
			}
			ch <- res
		})
		return JoinResult{}, ch, true
	default:
		m.protocols = r.Protocols
		m.joinWait = make(chan JoinResult, 1)
		ch := m.joinWait
		c.maybePrepareRebalance(g, now)
		c.maybeCompleteJoin(g, now)
		return JoinResult{}, ch, false
	}
}

func (c *Coordinator) joinKnownMember(g *group, r JoinRequest, now time.Time) (JoinResult, chan JoinResult) {
	if _, ok := g.pending[r.MemberID]; ok {
		return c.addMemberAndRebalance(g, r.MemberID, r, now)
	}
	m := g.members[r.MemberID]
	if r.InstanceID != nil {
		if cur, ok := g.static[*r.InstanceID]; ok && cur != r.MemberID {
			return JoinResult{Code: kerr.FencedInstanceID.Code, MemberID: r.MemberID, Generation: -1}, nil
		}
	}
	if m == nil {
		return JoinResult{Code: kerr.UnknownMemberID.Code, MemberID: r.MemberID, Generation: -1}, nil
	}
	if m.instanceID != nil && (r.InstanceID == nil || *r.InstanceID != *m.instanceID) {
		return JoinResult{Code: kerr.FencedInstanceID.Code, MemberID: r.MemberID, Generation: -1}, nil
	}
	m.lastHeartbeat = now
	m.rebalanceTimeout, m.sessionTimeout = r.RebalanceTimeout, r.SessionTimeout
	switch g.state {
	case groupPreparingRebalance:
		m.protocols = r.Protocols
		if m.joinWait != nil {
			// A retry of a join still waiting: the old request is
			// answered as superseded.
			m.joinWait <- JoinResult{Code: kerr.RebalanceInProgress.Code, MemberID: m.id, Generation: -1}
		}
		m.joinWait = make(chan JoinResult, 1)
		ch := m.joinWait
		c.maybeCompleteJoin(g, now)
		return JoinResult{}, ch
	case groupCompletingRebalance:
		if m.sameProtocols(r.Protocols) {
			// The member lost the join response: send it again.
			return c.joinResultFor(g, m), nil
		}
		m.protocols = r.Protocols
		m.joinWait = make(chan JoinResult, 1)
		ch := m.joinWait
		c.prepareRebalance(g, now)
		return JoinResult{}, ch
	case groupStable:
		if m.id == g.leader || !m.sameProtocols(r.Protocols) {
			m.protocols = r.Protocols
			m.joinWait = make(chan JoinResult, 1)
			ch := m.joinWait
			c.prepareRebalance(g, now)
			return JoinResult{}, ch
		}
		return c.joinResultFor(g, m), nil
	default:
		return JoinResult{Code: kerr.UnknownMemberID.Code, MemberID: r.MemberID, Generation: -1}, nil
	}
}

func (c *Coordinator) joinMembers(g *group) []kmsg.JoinGroupResponseMember {
	var out []kmsg.JoinGroupResponseMember
	for _, id := range g.sortedMemberIDs() {
		m := g.members[id]
		jm := kmsg.NewJoinGroupResponseMember()
		jm.MemberID, jm.InstanceID, jm.ProtocolMetadata = m.id, m.instanceID, m.metadataFor(g.protocol)
		out = append(out, jm)
	}
	return out
}

func (c *Coordinator) joinResultFor(g *group, m *groupMember) JoinResult {
	res := JoinResult{Generation: g.generation, ProtocolType: g.protocolType, Protocol: g.protocol, Leader: g.leader, MemberID: m.id}
	if m.id == g.leader {
		res.Members = c.joinMembers(g)
	}
	return res
}

func (c *Coordinator) maybePrepareRebalance(g *group, now time.Time) {
	switch g.state {
	case groupEmpty, groupStable, groupCompletingRebalance:
		c.prepareRebalance(g, now)
	}
}

// prepareRebalance moves g to PreparingRebalance.
func (c *Coordinator) prepareRebalance(g *group, now time.Time) {
	if g.state == groupCompletingRebalance {
		for _, m := range g.members {
			m.assignment = nil
			if m.syncWait != nil {
				m.syncWait <- SyncResult{Code: kerr.RebalanceInProgress.Code}
				m.syncWait = nil
			}
		}
	}
	g.pendingSync = map[string]bool{}
	wasEmpty := g.state == groupEmpty
	g.transition(groupPreparingRebalance, now)
	if wasEmpty {
		g.initialDelay = true
		g.joinDeadline = now.Add(min(c.initialRebalanceDelay, g.maxRebalanceTimeout()))
	} else {
		g.initialDelay = false
		g.joinDeadline = now.Add(g.maxRebalanceTimeout())
	}
	c.maybeCompleteJoin(g, now)
}

func (c *Coordinator) maybeCompleteJoin(g *group, now time.Time) {
	if g.state != groupPreparingRebalance {
		return
	}
	if g.initialDelay && now.Before(g.joinDeadline) {
		return
	}
	if g.allJoined() || !now.Before(g.joinDeadline) {
		c.completeJoin(g, now)
	}
}

// completeJoin ends the join phase: members that did not rejoin are
// removed and the others get the new generation.
func (c *Coordinator) completeJoin(g *group, now time.Time) {
	for id, m := range g.members {
		if m.joinWait == nil {
			c.dropMember(g, m)
			_ = id
		}
	}
	g.pending = map[string]time.Time{}
	g.initialDelay = false
	g.generation++
	if len(g.members) == 0 {
		g.protocol, g.leader = "", ""
		g.transition(groupEmpty, now)
		c.persistGroup(g, now, func(err error) {
			if err != nil {
				c.lg.Warn("persisting empty group", "group", g.id, "err", err)
			}
		})
		return
	}
	if g.members[g.leader] == nil {
		g.leader = g.sortedMemberIDs()[0]
	}
	g.protocol = g.selectProtocol()
	g.transition(groupCompletingRebalance, now)
	g.syncDeadline = now.Add(g.maxRebalanceTimeout())
	for id, m := range g.members {
		g.pendingSync[id] = true
		m.lastHeartbeat = now
		res := c.joinResultFor(g, m)
		m.joinWait <- res
		m.joinWait = nil
	}
}

// dropMember removes m from g, answering what it waits for.
func (c *Coordinator) dropMember(g *group, m *groupMember) {
	if m.joinWait != nil {
		m.joinWait <- JoinResult{Code: kerr.UnknownMemberID.Code, MemberID: m.id, Generation: -1}
		m.joinWait = nil
	}
	if m.syncWait != nil {
		m.syncWait <- SyncResult{Code: kerr.UnknownMemberID.Code}
		m.syncWait = nil
	}
	delete(g.members, m.id)
	delete(g.pendingSync, m.id)
	if m.instanceID != nil && g.static[*m.instanceID] == m.id {
		delete(g.static, *m.instanceID)
	}
	if g.leader == m.id {
		g.leader = ""
		if len(g.members) > 0 {
			g.leader = g.sortedMemberIDs()[0]
		}
	}
}

// removeMember removes m and rebalances as Kafka does after a leave or a
// session expiry.
func (c *Coordinator) removeMember(g *group, m *groupMember, now time.Time) {
	c.dropMember(g, m)
	switch g.state {
	case groupStable, groupCompletingRebalance:
		c.prepareRebalance(g, now)
	case groupPreparingRebalance:
		c.maybeCompleteJoin(g, now)
	}
}

// SyncRequest is one SyncGroup.
type SyncRequest struct {
	Group        string
	MemberID     string
	InstanceID   *string
	Generation   int32
	ProtocolType *string
	Protocol     *string
	Assignments  map[string][]byte
}

// Sync handles SyncGroup. It returns either an immediate result or a
// channel the result will be sent on.
func (c *Coordinator) Sync(r SyncRequest) (SyncResult, chan SyncResult) {
	now := c.clock.Now()
	c.mu.Lock()
	n := len(c.outbox)
	res, ch := c.sync(r, now)
	w := c.queuedSince(n)
	c.mu.Unlock()
	c.await(w)
	return res, ch
}

func (c *Coordinator) sync(r SyncRequest, now time.Time) (SyncResult, chan SyncResult) {
	fail := func(e *kerr.Error) (SyncResult, chan SyncResult) { return SyncResult{Code: e.Code}, nil }
	if c.closed {
		return fail(kerr.NotCoordinator)
	}
	g := c.groups[r.Group]
	if g == nil {
		return fail(kerr.UnknownMemberID)
	}
	if g.state == groupDead {
		return fail(kerr.CoordinatorNotAvailable)
	}
	m, code := g.validateMember(r.MemberID, r.InstanceID)
	if code != 0 {
		return SyncResult{Code: code}, nil
	}
	if r.Generation != g.generation {
		return fail(kerr.IllegalGeneration)
	}
	if (r.ProtocolType != nil && *r.ProtocolType != g.protocolType) || (r.Protocol != nil && *r.Protocol != g.protocol) {
		return fail(kerr.InconsistentGroupProtocol)
	}
	m.lastHeartbeat = now
	switch g.state {
	case groupEmpty:
		return fail(kerr.UnknownMemberID)
	case groupPreparingRebalance:
		return fail(kerr.RebalanceInProgress)
	case groupStable:
		delete(g.pendingSync, m.id)
		return SyncResult{ProtocolType: g.protocolType, Protocol: g.protocol, Assignment: m.assignment}, nil
	}
	// CompletingRebalance.
	delete(g.pendingSync, m.id)
	if m.syncWait != nil {
		m.syncWait <- SyncResult{Code: kerr.RebalanceInProgress.Code}
	}
	m.syncWait = make(chan SyncResult, 1)
	ch := m.syncWait
	if m.id != g.leader || g.assigning == g.generation {
		// A follower, or the leader again while its assignment is
		// being written: answered when that write completes.
		return SyncResult{}, ch
	}
	for id, gm := range g.members {
		gm.assignment = r.Assignments[id]
	}
	// The group stays CompletingRebalance until the assignment is
	// durable; then every waiting member gets its part, as Kafka does.
	gen := g.generation
	g.assigning = gen
	c.persistGroup(g, now, func(err error) {
		if g.assigning == gen {
			g.assigning = 0
		}
		if g.state != groupCompletingRebalance || g.generation != gen || c.groups[g.id] != g {
			// The rebalance moved on meanwhile: its own answers hold.
			return
		}
		now := c.clock.Now()
		if err != nil {
			c.lg.Warn("persisting group assignment", "group", g.id, "err", err)
			for _, gm := range g.members {
				gm.assignment = nil
				if gm.syncWait != nil {
					gm.syncWait <- SyncResult{Code: kerr.CoordinatorNotAvailable.Code}
					gm.syncWait = nil
				}
			}
			c.prepareRebalance(g, now)
			return
		}
		g.transition(groupStable, now)
		for _, gm := range g.members {
			if gm.syncWait != nil {
				gm.syncWait <- SyncResult{ProtocolType: g.protocolType, Protocol: g.protocol, Assignment: gm.assignment}
				gm.syncWait = nil
			}
		}
	})
	return SyncResult{}, ch
}

// validateMember checks a member id and group instance id against g.
func (g *group) validateMember(memberID string, instanceID *string) (*groupMember, int16) {
	if instanceID != nil {
		if cur, ok := g.static[*instanceID]; ok && cur != memberID {
			return nil, kerr.FencedInstanceID.Code
		}
	}
	m := g.members[memberID]
	if m == nil {
		return nil, kerr.UnknownMemberID.Code
	}
	if instanceID != nil && (m.instanceID == nil || *m.instanceID != *instanceID) {
		return nil, kerr.FencedInstanceID.Code
	}
	return m, 0
}

// Heartbeat handles Heartbeat.
func (c *Coordinator) Heartbeat(groupID, memberID string, instanceID *string, generation int32) int16 {
	now := c.clock.Now()
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return kerr.NotCoordinator.Code
	}
	g := c.groups[groupID]
	if g == nil {
		return kerr.UnknownMemberID.Code
	}
	if g.state == groupDead {
		return kerr.CoordinatorNotAvailable.Code
	}
	m, code := g.validateMember(memberID, instanceID)
	if code != 0 {
		return code
	}
	if generation != g.generation {
		return kerr.IllegalGeneration.Code
	}
	switch g.state {
	case groupEmpty:
		return kerr.UnknownMemberID.Code
	case groupPreparingRebalance:
		m.lastHeartbeat = now
		return kerr.RebalanceInProgress.Code
	default:
		m.lastHeartbeat = now
		return 0
	}
}

// LeaveMember is one member of a LeaveGroup; Code is its answer.
type LeaveMember struct {
	MemberID   string
	InstanceID *string
	Code       int16
}

// Leave handles LeaveGroup; each member's Code is set.
func (c *Coordinator) Leave(groupID string, ms []LeaveMember) (int16, []LeaveMember) {
	now := c.clock.Now()
	c.mu.Lock()
	n := len(c.outbox)
	code, out := c.leave(groupID, ms, now)
	w := c.queuedSince(n)
	c.mu.Unlock()
	c.await(w)
	return code, out
}

func (c *Coordinator) leave(groupID string, ms []LeaveMember, now time.Time) (int16, []LeaveMember) {
	if c.closed {
		return kerr.NotCoordinator.Code, nil
	}
	g := c.groups[groupID]
	if g == nil {
		for i := range ms {
			ms[i].Code = kerr.UnknownMemberID.Code
		}
		return 0, ms
	}
	if g.state == groupDead {
		return kerr.CoordinatorNotAvailable.Code, nil
	}
	for i := range ms {
		lm := &ms[i]
		var m *groupMember
		if lm.InstanceID != nil {
			id, ok := g.static[*lm.InstanceID]
			switch {
			case !ok:
				lm.Code = kerr.UnknownMemberID.Code
				continue
			case lm.MemberID != "" && lm.MemberID != id:
				lm.Code = kerr.FencedInstanceID.Code
				continue
			}
			m = g.members[id]
		} else {
			if _, ok := g.pending[lm.MemberID]; ok {
				delete(g.pending, lm.MemberID)
				c.maybeCompleteJoin(g, now)
				continue
			}
			m = g.members[lm.MemberID]
		}
		if m == nil {
			lm.Code = kerr.UnknownMemberID.Code
			continue
		}
		c.removeMember(g, m, now)
	}
	return 0, ms
}

// Tick evaluates every timer against now. It returns once every write
// queued before it returns (its own and others') is appended.
func (c *Coordinator) Tick(now time.Time) {
	c.mu.Lock()
	c.tick(now)
	w := c.lastQueued()
	c.mu.Unlock()
	c.await(w)
}

func (c *Coordinator) tick(now time.Time) {
	if c.closed {
		return
	}
	for _, g := range c.groups {
		for id, dl := range g.pending {
			if !now.Before(dl) {
				delete(g.pending, id)
			}
		}
		for _, m := range g.members {
			if m.joinWait != nil || m.syncWait != nil {
				continue
			}
			if !now.Before(m.lastHeartbeat.Add(m.sessionTimeout)) {
				c.lg.Info("group member session expired", "group", g.id, "member", m.id)
				c.removeMember(g, m, now)
			}
		}
		switch g.state {
		case groupPreparingRebalance:
			c.maybeCompleteJoin(g, now)
		case groupCompletingRebalance, groupStable:
			if len(g.pendingSync) > 0 && !now.Before(g.syncDeadline) {
				for id := range g.pendingSync {
					if m := g.members[id]; m != nil {
						c.lg.Info("group member did not sync in time", "group", g.id, "member", id)
						c.dropMember(g, m)
					}
				}
				g.pendingSync = map[string]bool{}
				c.prepareRebalance(g, now)
			}
		}
	}
	if now.Sub(c.lastRetention) >= offsetsRetentionCheck {
		c.lastRetention = now
		c.expireOffsetsLocked(now)
	}
}

// Shutdown answers every waiting member with NOT_COORDINATOR, as Kafka
// does when it unloads a group, and refuses later requests. Writes
// already queued are still appended by their driver.
func (c *Coordinator) Shutdown() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.closed = true
	for _, g := range c.groups {
		for _, m := range g.members {
			if m.joinWait != nil {
				m.joinWait <- JoinResult{Code: kerr.NotCoordinator.Code, MemberID: m.id, Generation: -1}
				m.joinWait = nil
			}
			if m.syncWait != nil {
				m.syncWait <- SyncResult{Code: kerr.NotCoordinator.Code}
				m.syncWait = nil
			}
		}
	}
}

package broker

// The group coordinator: Kafka's classic group protocol on one node.
//
// Every group this broker coordinates lives in memory in a group struct,
// guarded by the coordinator's one mutex; its durable form is the group's
// records in __consumer_offsets (group metadata at the end of each
// rebalance, one record per committed offset), replayed on start
// (group_coordinator_offsets.go).
//
// States and transitions follow Kafka's GroupCoordinator:
//
//	Empty --join--> PreparingRebalance --all joined or rebalance timeout-->
//	CompletingRebalance --leader's SyncGroup--> Stable --join/leave/expiry-->
//	PreparingRebalance ...; a rebalance that ends with no member -> Empty;
//	DeleteGroups or offset expiry of an empty group -> Dead (removed).
//
// JoinGroup and SyncGroup answers that wait for other members are deferred
// replies (DeferredReply): the connection keeps reading while the member
// waits. Time is read only through the coordinator's clock and timers are
// evaluated by tick, which the broker calls every coordTickInterval.

import (
	"crypto/rand"
	"encoding/hex"
	"sort"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
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
	groupMinSessionTimeout    = 6 * time.Second      // group.min.session.timeout.ms
	groupMaxSessionTimeout    = 30 * time.Minute     // group.max.session.timeout.ms
	groupInitialRebalanceWait = 3 * time.Second      // group.initial.rebalance.delay.ms
	offsetsRetention          = 7 * 24 * time.Hour   // offsets.retention.minutes
	offsetsRetentionCheck     = 10 * time.Minute     // offsets.retention.check.interval.ms
	offsetMetadataMaxBytes    = 4096                 // offset.metadata.max.bytes
	groupMaxSize              = int(^uint32(0) >> 1) // group.max.size
)

type topicPartition struct {
	topic     string
	partition int32
}

// offsetEntry is one committed offset.
type offsetEntry struct {
	offset      int64
	leaderEpoch int32
	metadata    string
	commitTs    int64
}

type joinResult struct {
	code           int16
	generation     int32
	protocolType   string
	protocol       string
	leader         string
	memberID       string
	skipAssignment bool
	members        []kmsg.JoinGroupResponseMember
}

type syncResult struct {
	code         int16
	protocolType string
	protocol     string
	assignment   []byte
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
	joinWait chan joinResult
	syncWait chan syncResult
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
	offsets      map[topicPartition]offsetEntry
	// pendingTxn are transactional offset commits not yet decided, by
	// producer id.
	pendingTxn map[int64]map[topicPartition]offsetEntry
}

func newGroup(id string, now time.Time) *group {
	return &group{
		id: id, state: groupEmpty, stateTime: now,
		members: map[string]*groupMember{}, static: map[string]string{}, pending: map[string]time.Time{},
		pendingSync: map[string]bool{}, offsets: map[topicPartition]offsetEntry{},
		pendingTxn: map[int64]map[topicPartition]offsetEntry{},
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

// groupCoordinator coordinates every group (this node owns every
// __consumer_offsets partition).
type groupCoordinator struct {
	s     *Server
	clock coordClock

	mu            sync.Mutex
	groups        map[string]*group
	closed        bool
	lastRetention time.Time
	// initialRebalanceDelay is group.initial.rebalance.delay.ms.
	initialRebalanceDelay time.Duration
	retention             time.Duration
}

func newGroupCoordinator(s *Server, clock coordClock) *groupCoordinator {
	return &groupCoordinator{
		s: s, clock: clock, groups: map[string]*group{},
		initialRebalanceDelay: groupInitialRebalanceWait, retention: offsetsRetention,
		lastRetention: clock.Now(),
	}
}

func newMemberID(prefix string) string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	h := hex.EncodeToString(b[:])
	return prefix + "-" + h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
}

type joinRequest struct {
	group            string
	memberID         string
	instanceID       *string
	protocolType     string
	protocols        []kmsg.JoinGroupRequestProtocol
	sessionTimeout   time.Duration
	rebalanceTimeout time.Duration
	clientID         string
	clientHost       string
	// requireKnownMember: v4+ (KIP-394).
	requireKnownMember bool
	version            int16
}

// join handles JoinGroup. It returns either an immediate result or a
// channel the result will be sent on.
func (c *groupCoordinator) join(r joinRequest) (joinResult, chan joinResult) {
	now := c.clock.Now()
	c.mu.Lock()
	defer c.mu.Unlock()
	fail := func(e *kerr.Error) (joinResult, chan joinResult) {
		return joinResult{code: e.Code, memberID: r.memberID, generation: -1}, nil
	}
	if c.closed {
		return fail(kerr.NotCoordinator)
	}
	if r.group == "" {
		return fail(kerr.InvalidGroupID)
	}
	if r.sessionTimeout < groupMinSessionTimeout || r.sessionTimeout > groupMaxSessionTimeout {
		return fail(kerr.InvalidSessionTimeout)
	}
	g := c.groups[r.group]
	if g == nil {
		if r.memberID != "" {
			return fail(kerr.UnknownMemberID)
		}
		g = newGroup(r.group, now)
		c.groups[r.group] = g
	}
	if g.state == groupDead {
		return fail(kerr.CoordinatorNotAvailable)
	}
	if !g.supportsProtocols(r.protocolType, r.protocols) {
		if len(g.members) == 0 && g.state == groupEmpty && len(g.offsets) == 0 && g.generation == 0 {
			delete(c.groups, r.group)
		}
		return fail(kerr.InconsistentGroupProtocol)
	}
	if r.memberID == "" {
		return c.joinUnknownMember(g, r, now)
	}
	return c.joinKnownMember(g, r, now)
}

func (c *groupCoordinator) joinUnknownMember(g *group, r joinRequest, now time.Time) (joinResult, chan joinResult) {
	if r.instanceID != nil {
		if old, ok := g.static[*r.instanceID]; ok {
			return c.replaceStaticMember(g, g.members[old], r, now)
		}
		// A new static member joins directly (no KIP-394 round trip).
		id := newMemberID(*r.instanceID)
		return c.addMemberAndRebalance(g, id, r, now)
	}
	id := newMemberID(r.clientID)
	if r.requireKnownMember {
		g.pending[id] = now.Add(r.sessionTimeout)
		return joinResult{code: kerr.MemberIDRequired.Code, memberID: id, generation: -1}, nil
	}
	return c.addMemberAndRebalance(g, id, r, now)
}

func (c *groupCoordinator) addMemberAndRebalance(g *group, id string, r joinRequest, now time.Time) (joinResult, chan joinResult) {
	if len(g.members) >= groupMaxSize {
		return joinResult{code: kerr.GroupMaxSizeReached.Code, memberID: id, generation: -1}, nil
	}
	delete(g.pending, id)
	m := &groupMember{
		id: id, instanceID: r.instanceID, clientID: r.clientID, clientHost: r.clientHost,
		rebalanceTimeout: r.rebalanceTimeout, sessionTimeout: r.sessionTimeout,
		protocolType: r.protocolType, protocols: r.protocols, lastHeartbeat: now,
		joinWait: make(chan joinResult, 1),
	}
	if len(g.members) == 0 {
		g.protocolType = r.protocolType
	}
	g.members[id] = m
	if r.instanceID != nil {
		g.static[*r.instanceID] = id
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
	return joinResult{}, ch
}

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

func (c *groupCoordinator) replaceStaticMember(g *group, old *groupMember, r joinRequest, now time.Time) (joinResult, chan joinResult) {
	newID := newMemberID(*r.instanceID)
	// The old instance is fenced: whatever it waits for ends now.
	if old.joinWait != nil {
		old.joinWait <- joinResult{code: kerr.FencedInstanceID.Code, memberID: old.id, generation: -1}
		old.joinWait = nil
	}
	if old.syncWait != nil {
		old.syncWait <- syncResult{code: kerr.FencedInstanceID.Code}
		old.syncWait = nil
	}
	delete(g.members, old.id)
	wasPendingSync := g.pendingSync[old.id]
	delete(g.pendingSync, old.id)
	m := *old
	m.id = newID
	m.clientID, m.clientHost = r.clientID, r.clientHost
	m.sessionTimeout, m.rebalanceTimeout = r.sessionTimeout, r.rebalanceTimeout
	m.lastHeartbeat = now
	m.joinWait, m.syncWait = nil, nil
	g.members[newID] = &m
	g.static[*r.instanceID] = newID
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
		m.protocols = r.protocols
		if !hasProtocol(r.protocols, g.protocol) || string(oldSelected) != string(m.metadataFor(g.protocol)) {
			// The subscription changed: a real rebalance.
			m.joinWait = make(chan joinResult, 1)
			ch := m.joinWait
			c.prepareRebalance(g, now)
			return joinResult{}, ch
		}
		if err := c.persistGroup(g, now); err != nil {
			return joinResult{code: kerr.UnknownServerError.Code, memberID: newID, generation: -1}, nil
		}
		res := joinResult{generation: g.generation, protocolType: g.protocolType, protocol: g.protocol, leader: g.leader, memberID: newID}
		if wasLeader && r.version >= 9 {
			res.skipAssignment = true
			res.members = c.joinMembers(g)
		}
		return res, nil
	default:
		m.protocols = r.protocols
		m.joinWait = make(chan joinResult, 1)
		ch := m.joinWait
		c.maybePrepareRebalance(g, now)
		c.maybeCompleteJoin(g, now)
		return joinResult{}, ch
	}
}

func (c *groupCoordinator) joinKnownMember(g *group, r joinRequest, now time.Time) (joinResult, chan joinResult) {
	if _, ok := g.pending[r.memberID]; ok {
		return c.addMemberAndRebalance(g, r.memberID, r, now)
	}
	m, code := g.validateMember(r.memberID, r.instanceID)
	if code != 0 {
		return joinResult{code: code, memberID: r.memberID, generation: -1}, nil
	}
	m.lastHeartbeat = now
	m.rebalanceTimeout, m.sessionTimeout = r.rebalanceTimeout, r.sessionTimeout
	switch g.state {
	case groupPreparingRebalance:
		m.protocols = r.protocols
		if m.joinWait != nil {
			// A retry of a join still waiting: the old request is
			// answered as superseded.
			m.joinWait <- joinResult{code: kerr.RebalanceInProgress.Code, memberID: m.id, generation: -1}
		}
		m.joinWait = make(chan joinResult, 1)
		ch := m.joinWait
		c.maybeCompleteJoin(g, now)
		return joinResult{}, ch
	case groupCompletingRebalance:
		if m.sameProtocols(r.protocols) {
			// The member lost the join response: send it again.
			return c.joinResultFor(g, m), nil
		}
		m.protocols = r.protocols
		m.joinWait = make(chan joinResult, 1)
		ch := m.joinWait
		c.prepareRebalance(g, now)
		return joinResult{}, ch
	case groupStable:
		if m.id == g.leader || !m.sameProtocols(r.protocols) {
			m.protocols = r.protocols
			m.joinWait = make(chan joinResult, 1)
			ch := m.joinWait
			c.prepareRebalance(g, now)
			return joinResult{}, ch
		}
		return c.joinResultFor(g, m), nil
	default:
		return joinResult{code: kerr.UnknownMemberID.Code, memberID: r.memberID, generation: -1}, nil
	}
}

func (c *groupCoordinator) joinMembers(g *group) []kmsg.JoinGroupResponseMember {
	var out []kmsg.JoinGroupResponseMember
	for _, id := range g.sortedMemberIDs() {
		m := g.members[id]
		jm := kmsg.NewJoinGroupResponseMember()
		jm.MemberID, jm.InstanceID, jm.ProtocolMetadata = m.id, m.instanceID, m.metadataFor(g.protocol)
		out = append(out, jm)
	}
	return out
}

func (c *groupCoordinator) joinResultFor(g *group, m *groupMember) joinResult {
	res := joinResult{generation: g.generation, protocolType: g.protocolType, protocol: g.protocol, leader: g.leader, memberID: m.id}
	if m.id == g.leader {
		res.members = c.joinMembers(g)
	}
	return res
}

func (c *groupCoordinator) maybePrepareRebalance(g *group, now time.Time) {
	switch g.state {
	case groupEmpty, groupStable, groupCompletingRebalance:
		c.prepareRebalance(g, now)
	}
}

// prepareRebalance moves g to PreparingRebalance.
func (c *groupCoordinator) prepareRebalance(g *group, now time.Time) {
	if g.state == groupCompletingRebalance {
		for _, m := range g.members {
			m.assignment = nil
			if m.syncWait != nil {
				m.syncWait <- syncResult{code: kerr.RebalanceInProgress.Code}
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

func (c *groupCoordinator) maybeCompleteJoin(g *group, now time.Time) {
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
func (c *groupCoordinator) completeJoin(g *group, now time.Time) {
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
		if err := c.persistGroup(g, now); err != nil {
			c.s.log.Warn("persisting empty group", "group", g.id, "err", err)
		}
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
func (c *groupCoordinator) dropMember(g *group, m *groupMember) {
	if m.joinWait != nil {
		m.joinWait <- joinResult{code: kerr.UnknownMemberID.Code, memberID: m.id, generation: -1}
		m.joinWait = nil
	}
	if m.syncWait != nil {
		m.syncWait <- syncResult{code: kerr.UnknownMemberID.Code}
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
func (c *groupCoordinator) removeMember(g *group, m *groupMember, now time.Time) {
	c.dropMember(g, m)
	switch g.state {
	case groupStable, groupCompletingRebalance:
		c.prepareRebalance(g, now)
	case groupPreparingRebalance:
		c.maybeCompleteJoin(g, now)
	}
}

type syncRequest struct {
	group        string
	memberID     string
	instanceID   *string
	generation   int32
	protocolType *string
	protocol     *string
	assignments  map[string][]byte
}

func (c *groupCoordinator) sync(r syncRequest) (syncResult, chan syncResult) {
	now := c.clock.Now()
	c.mu.Lock()
	defer c.mu.Unlock()
	fail := func(e *kerr.Error) (syncResult, chan syncResult) { return syncResult{code: e.Code}, nil }
	if c.closed {
		return fail(kerr.NotCoordinator)
	}
	g := c.groups[r.group]
	if g == nil {
		return fail(kerr.UnknownMemberID)
	}
	if g.state == groupDead {
		return fail(kerr.CoordinatorNotAvailable)
	}
	m, code := g.validateMember(r.memberID, r.instanceID)
	if code != 0 {
		return syncResult{code: code}, nil
	}
	if r.generation != g.generation {
		return fail(kerr.IllegalGeneration)
	}
	if (r.protocolType != nil && *r.protocolType != g.protocolType) || (r.protocol != nil && *r.protocol != g.protocol) {
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
		return syncResult{protocolType: g.protocolType, protocol: g.protocol, assignment: m.assignment}, nil
	}
	// CompletingRebalance.
	delete(g.pendingSync, m.id)
	if m.syncWait != nil {
		m.syncWait <- syncResult{code: kerr.RebalanceInProgress.Code}
	}
	m.syncWait = make(chan syncResult, 1)
	ch := m.syncWait
	if m.id != g.leader {
		return syncResult{}, ch
	}
	for id, gm := range g.members {
		gm.assignment = r.assignments[id]
	}
	if err := c.persistGroup(g, now); err != nil {
		c.s.log.Warn("persisting group assignment", "group", g.id, "err", err)
		for _, gm := range g.members {
			gm.assignment = nil
			if gm.syncWait != nil {
				gm.syncWait <- syncResult{code: kerr.CoordinatorNotAvailable.Code}
				gm.syncWait = nil
			}
		}
		c.prepareRebalance(g, now)
		return syncResult{}, ch
	}
	g.transition(groupStable, now)
	for _, gm := range g.members {
		if gm.syncWait != nil {
			gm.syncWait <- syncResult{protocolType: g.protocolType, protocol: g.protocol, assignment: gm.assignment}
			gm.syncWait = nil
		}
	}
	return syncResult{}, ch
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

func (c *groupCoordinator) heartbeat(groupID, memberID string, instanceID *string, generation int32) int16 {
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

type leaveMember struct {
	memberID   string
	instanceID *string
	code       int16
}

func (c *groupCoordinator) leave(groupID string, ms []leaveMember) (int16, []leaveMember) {
	now := c.clock.Now()
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return kerr.NotCoordinator.Code, nil
	}
	g := c.groups[groupID]
	if g == nil {
		for i := range ms {
			ms[i].code = kerr.UnknownMemberID.Code
		}
		return 0, ms
	}
	if g.state == groupDead {
		return kerr.CoordinatorNotAvailable.Code, nil
	}
	for i := range ms {
		lm := &ms[i]
		var m *groupMember
		if lm.instanceID != nil {
			id, ok := g.static[*lm.instanceID]
			switch {
			case !ok:
				lm.code = kerr.UnknownMemberID.Code
				continue
			case lm.memberID != "" && lm.memberID != id:
				lm.code = kerr.FencedInstanceID.Code
				continue
			}
			m = g.members[id]
		} else {
			if _, ok := g.pending[lm.memberID]; ok {
				delete(g.pending, lm.memberID)
				c.maybeCompleteJoin(g, now)
				continue
			}
			m = g.members[lm.memberID]
		}
		if m == nil {
			lm.code = kerr.UnknownMemberID.Code
			continue
		}
		c.removeMember(g, m, now)
	}
	return 0, ms
}

// tick evaluates every timer against now.
func (c *groupCoordinator) tick(now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
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
				c.s.log.Info("group member session expired", "group", g.id, "member", m.id)
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
						c.s.log.Info("group member did not sync in time", "group", g.id, "member", id)
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

// shutdown answers every waiting member with NOT_COORDINATOR, as Kafka
// does when it unloads a group, and refuses later requests.
func (c *groupCoordinator) shutdown() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.closed = true
	for _, g := range c.groups {
		for _, m := range g.members {
			if m.joinWait != nil {
				m.joinWait <- joinResult{code: kerr.NotCoordinator.Code, memberID: m.id, generation: -1}
				m.joinWait = nil
			}
			if m.syncWait != nil {
				m.syncWait <- syncResult{code: kerr.NotCoordinator.Code}
				m.syncWait = nil
			}
		}
	}
}

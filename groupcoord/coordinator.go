package groupcoord

// The group coordinator: Kafka's classic group protocol.
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
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/verbatim-kafka/verbatim/coordlog"
)

// Config is what a Coordinator is built from.
type Config struct {
	// Log stores __consumer_offsets.
	Log   coordlog.Log
	Clock coordlog.Clock
	// Logger gets the coordinator's warnings; nil discards them.
	Logger *slog.Logger
	// InitialRebalanceDelay is group.initial.rebalance.delay.ms.
	InitialRebalanceDelay time.Duration
	// PerPartition (cluster mode): the coordinator serves only the
	// partitions given to LoadPartition (partitions.go); false: every
	// group, loaded by Load (a single node).
	PerPartition bool
}

// Coordinator coordinates the groups of the __consumer_offsets partitions
// this node owns: every one on a single node, those it leads in cluster
// mode (partitions.go).
type Coordinator struct {
	log   coordlog.Log
	clock coordlog.Clock
	lg    *slog.Logger

	mu            sync.Mutex
	groups        map[string]*group
	lastRetention time.Time
	// initialRebalanceDelay is group.initial.rebalance.delay.ms.
	initialRebalanceDelay time.Duration
	retention             time.Duration
	// outbox is the queue of writes decided under mu and not yet
	// appended; driving is set while a goroutine appends them (drive.go).
	outbox  []*write
	driving bool
	// owned are the partitions served (partitions.go; none after Shutdown); loadingTxns the
	// transaction markers written to a partition while it loads.
	owned       *coordlog.Owned
	loadingTxns map[int32][]txnCompletion
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
		owned:         coordlog.NewOwned(cfg.PerPartition), loadingTxns: map[int32][]txnCompletion{},
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
func (c *Coordinator) Join(r JoinRequest) (res JoinResult, ch chan JoinResult) {
	var afterWrite bool
	c.run(func(now time.Time) { res, ch, afterWrite = c.join(r, now) })
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
	if e := c.refusal(r.Group); e != nil {
		return fail(e)
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
	old.endWaits(kerr.FencedInstanceID.Code)
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
				c.writeFailed("persisting static member replacement", g.id, err)
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
	m, code := g.validateMember(r.MemberID, r.InstanceID)
	if code != 0 {
		return JoinResult{Code: code, MemberID: r.MemberID, Generation: -1}, nil
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
				c.writeFailed("persisting empty group", g.id, err)
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
	m.endWaits(kerr.UnknownMemberID.Code)
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

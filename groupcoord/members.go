package groupcoord

// SyncGroup, Heartbeat, LeaveGroup, the timers and shutdown.

import (
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
)

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
func (c *Coordinator) Sync(r SyncRequest) (res SyncResult, ch chan SyncResult) {
	c.run(func(now time.Time) { res, ch = c.sync(r, now) })
	return res, ch
}

func (c *Coordinator) sync(r SyncRequest, now time.Time) (SyncResult, chan SyncResult) {
	fail := func(e *kerr.Error) (SyncResult, chan SyncResult) { return SyncResult{Code: e.Code}, nil }
	if e := c.refusal(r.Group); e != nil {
		return fail(e)
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
			c.writeFailed("persisting group assignment", g.id, err)
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

// Heartbeat handles Heartbeat.
func (c *Coordinator) Heartbeat(groupID, memberID string, instanceID *string, generation int32) int16 {
	now := c.clock.Now()
	c.mu.Lock()
	defer c.mu.Unlock()
	if e := c.refusal(groupID); e != nil {
		return e.Code
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
func (c *Coordinator) Leave(groupID string, ms []LeaveMember) (code int16, out []LeaveMember) {
	c.run(func(now time.Time) { code, out = c.leave(groupID, ms, now) })
	return code, out
}

func (c *Coordinator) leave(groupID string, ms []LeaveMember, now time.Time) (int16, []LeaveMember) {
	if e := c.refusal(groupID); e != nil {
		return e.Code, nil
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
	if c.owned.Closed() {
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
	c.owned.Close()
	for _, g := range c.groups {
		for _, m := range g.members {
			m.endWaits(kerr.NotCoordinator.Code)
		}
	}
}

package groupcoord

// Recovery by replaying __consumer_offsets, and the read-only views
// (ListGroups, DescribeGroups).

import (
	"encoding/binary"
	"sort"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/verbatim-kafka/verbatim/coordlog"
)

// Load replays __consumer_offsets (if it exists) into the coordinator.
// Groups whose last metadata record has members come back Stable with
// fresh session deadlines, as Kafka loads them: members of a rebalance
// that was cut short rejoin with their member ids, or expire. It runs
// before the coordinator serves requests, on a single node only (with
// Config.PerPartition, LoadPartition loads each partition it leads).
func (c *Coordinator) Load() error {
	if c.owned.PerPartition() {
		return nil
	}
	parts := c.log.Partitions(coordlog.OffsetsTopic)
	if parts == nil {
		return nil
	}
	now := c.clock.Now()
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, p := range parts {
		c.installLocked(c.replayPartition(p, now), now)
	}
	c.lg.Info("group coordinator loaded", "groups", len(c.groups))
	return nil
}

// replayPartition rebuilds the groups of __consumer_offsets partition p
// from its log; it touches no state of c but its logger.
func (c *Coordinator) replayPartition(p int32, now time.Time) map[string]*group {
	groups := map[string]*group{}
	pendingPids := map[int64]bool{}
	err := c.log.Replay(coordlog.OffsetsTopic, p, func(e coordlog.Entry) {
		if e.Control {
			if !pendingPids[e.ProducerID] {
				return
			}
			delete(pendingPids, e.ProducerID)
			for _, g := range groups {
				completeTxn(g, e.ProducerID, e.Commit)
			}
			return
		}
		replayRecord(groups, e, now, pendingPids)
	})
	if err != nil {
		// As Kafka with an offline log: the groups of this partition
		// (or of its unread rest) are not loaded; their requests fail
		// on write (COORDINATOR_NOT_AVAILABLE) until the log is back.
		c.lg.Error("group coordinator: an offsets partition is offline or its replay stopped early", "partition", p, "err", err)
	}
	return groups
}

// installLocked makes the replayed groups the coordinator's: those whose
// last metadata has members come back Stable with fresh session
// deadlines, the others Empty. Called with c.mu held.
func (c *Coordinator) installLocked(groups map[string]*group, now time.Time) {
	for id, g := range groups {
		if len(g.members) > 0 && g.generation > 0 {
			g.state = groupStable
			for _, m := range g.members {
				m.lastHeartbeat = now
			}
		} else {
			g.state = groupEmpty
			g.members = map[string]*groupMember{}
			g.static = map[string]string{}
		}
		c.groups[id] = g
	}
}

// replayRecord applies one record of __consumer_offsets to groups.
func replayRecord(groups map[string]*group, e coordlog.Entry, now time.Time, pendingPids map[int64]bool) {
	if len(e.Key) < 2 {
		return
	}
	switch binary.BigEndian.Uint16(e.Key) {
	case 0, 1:
		var k kmsg.OffsetCommitKey
		if k.ReadFrom(e.Key) != nil {
			return
		}
		g := groups[k.Group]
		tp := coordlog.TopicPartition{Topic: k.Topic, Partition: k.Partition}
		if e.Value == nil {
			if g != nil {
				delete(g.offsets, tp)
			}
			return
		}
		var v kmsg.OffsetCommitValue
		if v.ReadFrom(e.Value) != nil {
			return
		}
		if g == nil {
			g = newGroup(k.Group, time.UnixMilli(e.Timestamp))
			groups[k.Group] = g
		}
		ent := OffsetEntry{Offset: v.Offset, LeaderEpoch: -1, Metadata: v.Metadata, CommitTs: v.CommitTimestamp}
		if v.Version >= 3 {
			ent.LeaderEpoch = v.LeaderEpoch
		}
		if e.Transactional {
			pendingPids[e.ProducerID] = true
			pm := g.pendingTxn[e.ProducerID]
			if pm == nil {
				pm = map[coordlog.TopicPartition]OffsetEntry{}
				g.pendingTxn[e.ProducerID] = pm
			}
			pm[tp] = ent
			return
		}
		g.offsets[tp] = ent
	case 2:
		var k kmsg.GroupMetadataKey
		if k.ReadFrom(e.Key) != nil {
			return
		}
		if e.Value == nil {
			delete(groups, k.Group)
			return
		}
		var v kmsg.GroupMetadataValue
		if v.ReadFrom(e.Value) != nil {
			return
		}
		g := groups[k.Group]
		if g == nil {
			g = newGroup(k.Group, now)
			groups[k.Group] = g
		}
		g.protocolType, g.generation = v.ProtocolType, v.Generation
		g.protocol, g.leader = "", ""
		if v.Protocol != nil {
			g.protocol = *v.Protocol
		}
		if v.Leader != nil {
			g.leader = *v.Leader
		}
		if v.CurrentStateTimestamp > 0 {
			g.stateTime = time.UnixMilli(v.CurrentStateTimestamp)
		}
		g.members = map[string]*groupMember{}
		g.static = map[string]string{}
		for _, vm := range v.Members {
			m := &groupMember{
				id: vm.MemberID, instanceID: vm.InstanceID, clientID: vm.ClientID, clientHost: vm.ClientHost,
				rebalanceTimeout: time.Duration(vm.RebalanceTimeoutMillis) * time.Millisecond,
				sessionTimeout:   time.Duration(vm.SessionTimeoutMillis) * time.Millisecond,
				protocolType:     v.ProtocolType,
				protocols:        []kmsg.JoinGroupRequestProtocol{{Name: g.protocol, Metadata: vm.Subscription}},
				assignment:       vm.Assignment,
			}
			if m.rebalanceTimeout == 0 {
				m.rebalanceTimeout = m.sessionTimeout
			}
			g.members[m.id] = m
			if m.instanceID != nil {
				g.static[*m.instanceID] = m.id
			}
		}
	}
}

// Listing is one ListGroups entry.
type Listing struct {
	ID, ProtocolType, State string
}

// List answers ListGroups.
func (c *Coordinator) List() []Listing {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]Listing, 0, len(c.groups))
	for _, g := range c.groups {
		out = append(out, Listing{g.id, g.protocolType, g.state.String()})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// Describe fills one DescribeGroups entry; found is false for an unknown
// group.
func (c *Coordinator) Describe(groupID string, dg *kmsg.DescribeGroupsResponseGroup) (found bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	g := c.groups[groupID]
	if e := c.refusal(groupID); e != nil {
		dg.ErrorCode = e.Code
		return true
	}
	if g == nil {
		dg.State = groupDead.String()
		return false
	}
	dg.State, dg.ProtocolType = g.state.String(), g.protocolType
	stable := g.state == groupStable
	if stable {
		dg.Protocol = g.protocol
	}
	for _, id := range g.sortedMemberIDs() {
		m := g.members[id]
		dm := kmsg.NewDescribeGroupsResponseGroupMember()
		dm.MemberID, dm.InstanceID, dm.ClientID, dm.ClientHost = m.id, m.instanceID, m.clientID, m.clientHost
		if stable {
			dm.ProtocolMetadata, dm.MemberAssignment = m.metadataFor(g.protocol), m.assignment
		}
		dg.Members = append(dg.Members, dm)
	}
	return true
}

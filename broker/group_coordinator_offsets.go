package broker

// The group coordinator's durable side: __consumer_offsets records (Kafka's
// schemas), committed offsets, transactional offsets, retention, deletion,
// and recovery by replaying the topic.

import (
	"encoding/binary"
	"errors"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func (c *groupCoordinator) partitionFor(groupID string) int32 {
	return partitionForKey(groupID, c.s.internalPartitionCount(offsetsTopic))
}

func groupMetadataKey(groupID string) []byte {
	k := kmsg.NewGroupMetadataKey()
	k.Version, k.Group = 2, groupID
	return k.AppendTo(nil)
}

func offsetCommitKey(groupID string, tp topicPartition) []byte {
	k := kmsg.NewOffsetCommitKey()
	k.Version, k.Group, k.Topic, k.Partition = 1, groupID, tp.topic, tp.partition
	return k.AppendTo(nil)
}

func offsetCommitValue(e offsetEntry) []byte {
	v := kmsg.NewOffsetCommitValue()
	v.Version, v.Offset, v.LeaderEpoch, v.Metadata, v.CommitTimestamp = 3, e.offset, e.leaderEpoch, e.metadata, e.commitTs
	return v.AppendTo(nil)
}

// groupValue is the group metadata record of g.
func groupValue(g *group) []byte {
	v := kmsg.NewGroupMetadataValue()
	v.Version = 3
	v.ProtocolType, v.Generation = g.protocolType, g.generation
	if g.protocol != "" {
		p := g.protocol
		v.Protocol = &p
	}
	if g.leader != "" {
		l := g.leader
		v.Leader = &l
	}
	v.CurrentStateTimestamp = g.stateTime.UnixMilli()
	for _, id := range g.sortedMemberIDs() {
		m := g.members[id]
		vm := kmsg.NewGroupMetadataValueMember()
		vm.MemberID, vm.InstanceID, vm.ClientID, vm.ClientHost = m.id, m.instanceID, m.clientID, m.clientHost
		vm.RebalanceTimeoutMillis = int32(m.rebalanceTimeout.Milliseconds())
		vm.SessionTimeoutMillis = int32(m.sessionTimeout.Milliseconds())
		vm.Subscription, vm.Assignment = m.metadataFor(g.protocol), m.assignment
		v.Members = append(v.Members, vm)
	}
	return v.AppendTo(nil)
}

// persistGroup writes g's group metadata record.
func (c *groupCoordinator) persistGroup(g *group, now time.Time) error {
	_, err := c.s.appendInternal(offsetsTopic, c.partitionFor(g.id), []kv{{groupMetadataKey(g.id), groupValue(g)}}, internalBatch{}, now)
	return err
}

// offsetCommit is one partition of an OffsetCommit or TxnOffsetCommit.
type offsetCommit struct {
	tp    topicPartition
	entry offsetEntry
	code  int16
}

// commitOffsets validates the committer and stores the offsets; codes are
// set per partition. A top-level validation failure sets every code.
func (c *groupCoordinator) commitOffsets(groupID, memberID string, instanceID *string, generation int32, commits []offsetCommit) {
	now := c.clock.Now()
	c.mu.Lock()
	defer c.mu.Unlock()
	setAll := func(code int16) {
		for i := range commits {
			if commits[i].code == 0 {
				commits[i].code = code
			}
		}
	}
	if c.closed {
		setAll(kerr.NotCoordinator.Code)
		return
	}
	if groupID == "" {
		setAll(kerr.InvalidGroupID.Code)
		return
	}
	g := c.groups[groupID]
	switch {
	case g == nil && generation < 0:
		g = newGroup(groupID, now)
		c.groups[groupID] = g
	case g == nil:
		setAll(kerr.IllegalGeneration.Code)
		return
	case g.state == groupDead:
		setAll(kerr.CoordinatorNotAvailable.Code)
		return
	case generation < 0 && g.state == groupEmpty:
		// A standalone commit (no group management).
	default:
		m, code := g.validateMember(memberID, instanceID)
		if code != 0 {
			setAll(code)
			return
		}
		if generation != g.generation {
			setAll(kerr.IllegalGeneration.Code)
			return
		}
		if g.state == groupCompletingRebalance {
			setAll(kerr.RebalanceInProgress.Code)
			return
		}
		m.lastHeartbeat = now
	}
	c.storeOffsetsLocked(g, commits, now, internalBatch{})
}

func (c *groupCoordinator) storeOffsetsLocked(g *group, commits []offsetCommit, now time.Time, how internalBatch) {
	var recs []kv
	for i := range commits {
		oc := &commits[i]
		if oc.code != 0 {
			continue
		}
		if len(oc.entry.metadata) > offsetMetadataMaxBytes {
			oc.code = kerr.OffsetMetadataTooLarge.Code
			continue
		}
		oc.entry.commitTs = now.UnixMilli()
		recs = append(recs, kv{offsetCommitKey(g.id, oc.tp), offsetCommitValue(oc.entry)})
	}
	if len(recs) == 0 {
		return
	}
	if _, err := c.s.appendInternal(offsetsTopic, c.partitionFor(g.id), recs, how, now); err != nil {
		code := kerr.CoordinatorNotAvailable.Code
		var ke *kafkaError
		if errors.As(err, &ke) {
			code = ke.err.Code
		}
		if how.transactional && isProducerFenceErr(err) {
			code = kerr.ProducerFenced.Code
		}
		c.s.log.Warn("storing offsets", "group", g.id, "err", err)
		for i := range commits {
			if commits[i].code == 0 {
				commits[i].code = code
			}
		}
		return
	}
	for _, oc := range commits {
		if oc.code != 0 {
			continue
		}
		if how.transactional {
			p := g.pendingTxn[how.producerID]
			if p == nil {
				p = map[topicPartition]offsetEntry{}
				g.pendingTxn[how.producerID] = p
			}
			p[oc.tp] = oc.entry
		} else {
			g.offsets[oc.tp] = oc.entry
		}
	}
}

// txnCommitOffsets is TxnOffsetCommit: the offsets are written as part of
// the producer's transaction and become visible with its COMMIT marker.
func (c *groupCoordinator) txnCommitOffsets(groupID, memberID string, instanceID *string, generation int32, pid int64, epoch int16, commits []offsetCommit) {
	now := c.clock.Now()
	c.mu.Lock()
	defer c.mu.Unlock()
	setAll := func(code int16) {
		for i := range commits {
			if commits[i].code == 0 {
				commits[i].code = code
			}
		}
	}
	if c.closed {
		setAll(kerr.NotCoordinator.Code)
		return
	}
	// As Kafka's ClassicGroup.validateOffsetCommit for a transactional
	// commit: an unknown group is created only for generation -1, a
	// commit with generation -1 to an empty group is accepted as is, and
	// the group state is not enforced otherwise.
	g := c.groups[groupID]
	switch {
	case g == nil && generation >= 0:
		setAll(kerr.IllegalGeneration.Code)
		return
	case g == nil:
		g = newGroup(groupID, now)
		c.groups[groupID] = g
	case g.state == groupDead:
		setAll(kerr.CoordinatorNotAvailable.Code)
		return
	}
	if (memberID != "" || generation >= 0 || instanceID != nil) && !(generation < 0 && g.state == groupEmpty) {
		if _, code := g.validateMember(memberID, instanceID); code != 0 {
			setAll(code)
			return
		}
		if generation != g.generation {
			setAll(kerr.IllegalGeneration.Code)
			return
		}
	}
	c.storeOffsetsLocked(g, commits, now, internalBatch{producerID: pid, producerEpoch: epoch, transactional: true})
}

// completeTxn applies or drops producer pid's pending offsets in the groups
// of __consumer_offsets partition part, once its marker is written there.
func (c *groupCoordinator) completeTxn(part int32, pid int64, commit bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, g := range c.groups {
		if c.partitionFor(g.id) != part {
			continue
		}
		c.completeTxnLocked(g, pid, commit)
	}
}

func (c *groupCoordinator) completeTxnLocked(g *group, pid int64, commit bool) {
	p := g.pendingTxn[pid]
	if p == nil {
		return
	}
	delete(g.pendingTxn, pid)
	if commit {
		for tp, e := range p {
			g.offsets[tp] = e
		}
	}
}

// fetchedOffset is one partition of an OffsetFetch answer.
type fetchedOffset struct {
	tp       topicPartition
	offset   int64
	epoch    int32
	metadata string
	code     int16
}

// fetchOffsets answers OffsetFetch for one group; tps nil means all.
func (c *groupCoordinator) fetchOffsets(groupID string, tps []topicPartition, requireStable bool) (int16, []fetchedOffset) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return kerr.NotCoordinator.Code, nil
	}
	g := c.groups[groupID]
	if tps == nil {
		if g == nil {
			return 0, nil
		}
		for tp := range g.offsets {
			tps = append(tps, tp)
		}
		sortTPs(tps)
	}
	out := make([]fetchedOffset, 0, len(tps))
	for _, tp := range tps {
		f := fetchedOffset{tp: tp, offset: -1, epoch: -1}
		if g != nil {
			if requireStable && g.hasPendingTxnOffset(tp) {
				f.code = kerr.UnstableOffsetCommit.Code
			} else if e, ok := g.offsets[tp]; ok {
				f.offset, f.epoch, f.metadata = e.offset, e.leaderEpoch, e.metadata
			}
		}
		out = append(out, f)
	}
	return 0, out
}

func (g *group) hasPendingTxnOffset(tp topicPartition) bool {
	for _, p := range g.pendingTxn {
		if _, ok := p[tp]; ok {
			return true
		}
	}
	return false
}

func sortTPs(tps []topicPartition) {
	sortSlice(tps, func(a, b topicPartition) bool {
		if a.topic != b.topic {
			return a.topic < b.topic
		}
		return a.partition < b.partition
	})
}

// deleteGroupLocked writes tombstones for g's offsets and metadata and
// removes it.
func (c *groupCoordinator) deleteGroupLocked(g *group, now time.Time) error {
	recs := make([]kv, 0, len(g.offsets)+1)
	for tp := range g.offsets {
		recs = append(recs, kv{offsetCommitKey(g.id, tp), nil})
	}
	recs = append(recs, kv{groupMetadataKey(g.id), nil})
	if _, err := c.s.appendInternal(offsetsTopic, c.partitionFor(g.id), recs, internalBatch{}, now); err != nil {
		return err
	}
	g.transition(groupDead, now)
	delete(c.groups, g.id)
	return nil
}

// deleteGroup is DeleteGroups for one group.
func (c *groupCoordinator) deleteGroup(groupID string) int16 {
	now := c.clock.Now()
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return kerr.NotCoordinator.Code
	}
	if groupID == "" {
		return kerr.InvalidGroupID.Code
	}
	g := c.groups[groupID]
	if g == nil || g.state == groupDead {
		return kerr.GroupIDNotFound.Code
	}
	if g.state != groupEmpty || len(g.members) > 0 {
		return kerr.NonEmptyGroup.Code
	}
	if err := c.deleteGroupLocked(g, now); err != nil {
		c.s.log.Warn("deleting group", "group", groupID, "err", err)
		return kerr.CoordinatorNotAvailable.Code
	}
	return 0
}

// subscribedTopics returns the topics g's consumer members subscribe to,
// from their ConsumerMemberMetadata; ok is false when g is not a consumer
// group with members.
func (g *group) subscribedTopics() (map[string]bool, bool) {
	if g.protocolType != "consumer" || len(g.members) == 0 || g.protocol == "" {
		return nil, false
	}
	out := map[string]bool{}
	for _, m := range g.members {
		var md kmsg.ConsumerMemberMetadata
		if err := md.ReadFrom(m.metadataFor(g.protocol)); err != nil {
			// Unknown subscription: treat every topic as subscribed.
			return nil, true
		}
		for _, t := range md.Topics {
			out[t] = true
		}
	}
	return out, true
}

// deleteOffsets is OffsetDelete; codes are set per partition.
func (c *groupCoordinator) deleteOffsets(groupID string, tps []offsetCommit) int16 {
	now := c.clock.Now()
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return kerr.NotCoordinator.Code
	}
	g := c.groups[groupID]
	if g == nil || g.state == groupDead {
		return kerr.GroupIDNotFound.Code
	}
	subs, isConsumer := g.subscribedTopics()
	if g.state != groupEmpty && !isConsumer && len(g.members) > 0 {
		return kerr.NonEmptyGroup.Code
	}
	var recs []kv
	for i := range tps {
		tp := tps[i].tp
		if isConsumer && (subs == nil || subs[tp.topic]) {
			tps[i].code = kerr.GroupSubscribedToTopic.Code
			continue
		}
		if _, ok := g.offsets[tp]; ok {
			recs = append(recs, kv{offsetCommitKey(g.id, tp), nil})
		}
	}
	if len(recs) > 0 {
		if _, err := c.s.appendInternal(offsetsTopic, c.partitionFor(g.id), recs, internalBatch{}, now); err != nil {
			c.s.log.Warn("deleting offsets", "group", groupID, "err", err)
			return kerr.CoordinatorNotAvailable.Code
		}
	}
	for _, oc := range tps {
		if oc.code == 0 {
			delete(g.offsets, oc.tp)
		}
	}
	return 0
}

// expireOffsetsLocked applies offsets.retention.minutes as Kafka 2.1+
// does (KIP-211): an empty group's offsets expire once the group has been
// empty for the retention period; a standalone group's offsets expire
// retention after their commit; a consumer group's offsets of topics no
// member subscribes to expire retention after their commit. An empty group
// left without offsets is deleted.
func (c *groupCoordinator) expireOffsetsLocked(now time.Time) {
	for _, g := range c.groups {
		if len(g.pendingTxn) > 0 {
			continue
		}
		var expired []topicPartition
		subs, isConsumer := g.subscribedTopics()
		for tp, e := range g.offsets {
			var base int64
			switch {
			case g.state == groupEmpty && g.protocolType != "":
				base = g.stateTime.UnixMilli()
			case g.state == groupEmpty:
				base = e.commitTs
			case isConsumer && subs != nil && !subs[tp.topic]:
				base = e.commitTs
			default:
				continue
			}
			if now.UnixMilli()-base >= c.retention.Milliseconds() {
				expired = append(expired, tp)
			}
		}
		var recs []kv
		for _, tp := range expired {
			recs = append(recs, kv{offsetCommitKey(g.id, tp), nil})
		}
		if len(recs) > 0 {
			if _, err := c.s.appendInternal(offsetsTopic, c.partitionFor(g.id), recs, internalBatch{}, now); err != nil {
				c.s.log.Warn("expiring offsets", "group", g.id, "err", err)
				continue
			}
			for _, tp := range expired {
				delete(g.offsets, tp)
			}
			c.s.log.Info("expired group offsets", "group", g.id, "partitions", len(expired))
		}
		if g.state == groupEmpty && len(g.offsets) == 0 && len(g.members) == 0 {
			if err := c.deleteGroupLocked(g, now); err != nil {
				c.s.log.Warn("deleting expired group", "group", g.id, "err", err)
			}
		}
	}
}

// load replays __consumer_offsets (if it exists) into the coordinator.
// Groups whose last metadata record has members come back Stable with
// fresh session deadlines, as Kafka loads them: members of a rebalance
// that was cut short rejoin with their member ids, or expire.
func (c *groupCoordinator) load() error {
	t := c.s.cluster.topic(offsetsTopic)
	if t == nil {
		return nil
	}
	now := c.clock.Now()
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, p := range t.Partitions() {
		l, err := partitionLog(p)
		if err != nil {
			// As Kafka with an offline log: the groups of this
			// partition are not loaded; their requests fail on write
			// (COORDINATOR_NOT_AVAILABLE) until the log is back.
			c.s.log.Error("group coordinator: offsets partition offline, its groups are not loaded", "partition", p.Dir(), "err", err)
			continue
		}
		pendingPids := map[int64]bool{}
		err = c.s.replayInternal(l, func(e internalEntry) {
			if e.control {
				if !pendingPids[e.producerID] {
					return
				}
				delete(pendingPids, e.producerID)
				for _, g := range c.groups {
					if c.partitionFor(g.id) == p.Index {
						c.completeTxnLocked(g, e.producerID, e.commit)
					}
				}
				return
			}
			c.replayRecord(e, now, pendingPids)
		})
		if err != nil {
			c.s.log.Error("group coordinator: replay of an offsets partition stopped early", "partition", p.Dir(), "err", err)
		}
	}
	for _, g := range c.groups {
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
	}
	c.s.log.Info("group coordinator loaded", "groups", len(c.groups))
	return nil
}

func (c *groupCoordinator) replayRecord(e internalEntry, now time.Time, pendingPids map[int64]bool) {
	if len(e.key) < 2 {
		return
	}
	switch binary.BigEndian.Uint16(e.key) {
	case 0, 1:
		var k kmsg.OffsetCommitKey
		if k.ReadFrom(e.key) != nil {
			return
		}
		g := c.groups[k.Group]
		tp := topicPartition{k.Topic, k.Partition}
		if e.value == nil {
			if g != nil {
				delete(g.offsets, tp)
			}
			return
		}
		var v kmsg.OffsetCommitValue
		if v.ReadFrom(e.value) != nil {
			return
		}
		if g == nil {
			g = newGroup(k.Group, time.UnixMilli(e.timestamp))
			c.groups[k.Group] = g
		}
		ent := offsetEntry{offset: v.Offset, leaderEpoch: -1, metadata: v.Metadata, commitTs: v.CommitTimestamp}
		if v.Version >= 3 {
			ent.leaderEpoch = v.LeaderEpoch
		}
		if e.transactional {
			pendingPids[e.producerID] = true
			pm := g.pendingTxn[e.producerID]
			if pm == nil {
				pm = map[topicPartition]offsetEntry{}
				g.pendingTxn[e.producerID] = pm
			}
			pm[tp] = ent
			return
		}
		g.offsets[tp] = ent
	case 2:
		var k kmsg.GroupMetadataKey
		if k.ReadFrom(e.key) != nil {
			return
		}
		if e.value == nil {
			delete(c.groups, k.Group)
			return
		}
		var v kmsg.GroupMetadataValue
		if v.ReadFrom(e.value) != nil {
			return
		}
		g := c.groups[k.Group]
		if g == nil {
			g = newGroup(k.Group, now)
			c.groups[k.Group] = g
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

// groupListing is one ListGroups entry.
type groupListing struct {
	id, protocolType, state string
}

func (c *groupCoordinator) list() []groupListing {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]groupListing, 0, len(c.groups))
	for _, g := range c.groups {
		out = append(out, groupListing{g.id, g.protocolType, g.state.String()})
	}
	sortSlice(out, func(a, b groupListing) bool { return a.id < b.id })
	return out
}

// describe fills one DescribeGroups entry; found is false for an unknown
// group.
func (c *groupCoordinator) describe(groupID string, dg *kmsg.DescribeGroupsResponseGroup) (found bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	g := c.groups[groupID]
	if c.closed {
		dg.ErrorCode = kerr.NotCoordinator.Code
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

package groupcoord

// The group coordinator's durable side: __consumer_offsets records (Kafka's
// schemas), committed offsets, transactional offsets, retention and
// deletion.

import (
	"errors"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/verbatim-kafka/verbatim/coordlog"
)

// PartitionFor is the __consumer_offsets partition of a group.
func (c *Coordinator) PartitionFor(groupID string) int32 {
	return coordlog.PartitionForKey(groupID, c.log.PartitionCount(coordlog.OffsetsTopic))
}

func groupMetadataKey(groupID string) []byte {
	k := kmsg.NewGroupMetadataKey()
	k.Version, k.Group = 2, groupID
	return k.AppendTo(nil)
}

func offsetCommitKey(groupID string, tp coordlog.TopicPartition) []byte {
	k := kmsg.NewOffsetCommitKey()
	k.Version, k.Group, k.Topic, k.Partition = 1, groupID, tp.Topic, tp.Partition
	return k.AppendTo(nil)
}

func offsetCommitValue(e OffsetEntry) []byte {
	v := kmsg.NewOffsetCommitValue()
	v.Version, v.Offset, v.LeaderEpoch, v.Metadata, v.CommitTimestamp = 3, e.Offset, e.LeaderEpoch, e.Metadata, e.CommitTs
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

// persistGroup queues g's group metadata record as it is now.
func (c *Coordinator) persistGroup(g *group, now time.Time, advance func(err error)) {
	c.queue(g, []coordlog.Record{{Key: groupMetadataKey(g.id), Value: groupValue(g)}}, coordlog.Batch{}, now, advance)
}

// OffsetCommit is one partition of an OffsetCommit or TxnOffsetCommit.
type OffsetCommit struct {
	TP    coordlog.TopicPartition
	Entry OffsetEntry
	Code  int16
	// Err is the write error behind Code when the offsets record could
	// not be appended: the broker's handler logs it with its client (the
	// coordinator does not, so it is logged once).
	Err error
}

// setCodes sets code on every commit not already answered.
func setCodes(commits []OffsetCommit, code int16) {
	for i := range commits {
		if commits[i].Code == 0 {
			commits[i].Code = code
		}
	}
}

// CommitOffsets validates the committer and stores the offsets; codes are
// set per partition. A top-level validation failure sets every code.
func (c *Coordinator) CommitOffsets(groupID, memberID string, instanceID *string, generation int32, commits []OffsetCommit) {
	c.run(func(now time.Time) { c.commitOffsets(groupID, memberID, instanceID, generation, commits, now) })
}

func (c *Coordinator) commitOffsets(groupID, memberID string, instanceID *string, generation int32, commits []OffsetCommit, now time.Time) {
	if e := c.refusal(groupID); e != nil {
		setCodes(commits, e.Code)
		return
	}
	if groupID == "" {
		setCodes(commits, kerr.InvalidGroupID.Code)
		return
	}
	g := c.groups[groupID]
	switch {
	case g == nil && generation < 0:
		g = newGroup(groupID, now)
		c.groups[groupID] = g
	case g == nil:
		setCodes(commits, kerr.IllegalGeneration.Code)
		return
	case g.state == groupDead:
		setCodes(commits, kerr.CoordinatorNotAvailable.Code)
		return
	case generation < 0 && g.state == groupEmpty:
		// A standalone commit (no group management).
	default:
		m, code := g.validateMember(memberID, instanceID)
		if code != 0 {
			setCodes(commits, code)
			return
		}
		if generation != g.generation {
			setCodes(commits, kerr.IllegalGeneration.Code)
			return
		}
		if g.state == groupCompletingRebalance {
			setCodes(commits, kerr.RebalanceInProgress.Code)
			return
		}
		m.lastHeartbeat = now
	}
	c.storeOffsetsLocked(g, commits, now, coordlog.Batch{})
}

func (c *Coordinator) storeOffsetsLocked(g *group, commits []OffsetCommit, now time.Time, how coordlog.Batch) {
	var recs []coordlog.Record
	for i := range commits {
		oc := &commits[i]
		if oc.Code != 0 {
			continue
		}
		if len(oc.Entry.Metadata) > offsetMetadataMaxBytes {
			oc.Code = kerr.OffsetMetadataTooLarge.Code
			continue
		}
		oc.Entry.CommitTs = now.UnixMilli()
		recs = append(recs, coordlog.Record{Key: offsetCommitKey(g.id, oc.TP), Value: offsetCommitValue(oc.Entry)})
	}
	if len(recs) == 0 {
		return
	}
	// The offsets become visible (or pending in their transaction) once
	// they are in the log, as before any later write of the group.
	c.queue(g, recs, how, now, func(err error) {
		if err != nil {
			code := coordlog.CodeOf(err, kerr.CoordinatorNotAvailable.Code)
			if how.Transactional && errors.Is(err, coordlog.ErrFenced) {
				code = kerr.ProducerFenced.Code
			}
			for i := range commits {
				if commits[i].Code == 0 {
					commits[i].Err = err
				}
			}
			setCodes(commits, code)
			return
		}
		for _, oc := range commits {
			if oc.Code != 0 {
				continue
			}
			if how.Transactional {
				p := g.pendingTxn[how.ProducerID]
				if p == nil {
					p = map[coordlog.TopicPartition]OffsetEntry{}
					g.pendingTxn[how.ProducerID] = p
				}
				p[oc.TP] = oc.Entry
			} else {
				g.offsets[oc.TP] = oc.Entry
			}
		}
	})
}

// TxnCommitOffsets is TxnOffsetCommit: the offsets are written as part of
// the producer's transaction and become visible with its COMMIT marker.
// The caller has checked the transaction (txncoord) and keeps it from
// ending until this returns.
func (c *Coordinator) TxnCommitOffsets(groupID, memberID string, instanceID *string, generation int32, pid int64, epoch int16, commits []OffsetCommit) {
	c.run(func(now time.Time) {
		c.txnCommitOffsets(groupID, memberID, instanceID, generation, pid, epoch, commits, now)
	})
}

func (c *Coordinator) txnCommitOffsets(groupID, memberID string, instanceID *string, generation int32, pid int64, epoch int16, commits []OffsetCommit, now time.Time) {
	if e := c.refusal(groupID); e != nil {
		setCodes(commits, e.Code)
		return
	}
	// As Kafka's ClassicGroup.validateOffsetCommit for a transactional
	// commit: an unknown group is created only for generation -1, a
	// commit with generation -1 to an empty group is accepted as is, and
	// the group state is not enforced otherwise. A Dead group (being
	// deleted: its tombstones are queued) is COORDINATOR_NOT_AVAILABLE.
	g := c.groups[groupID]
	switch {
	case g == nil && generation >= 0:
		setCodes(commits, kerr.IllegalGeneration.Code)
		return
	case g == nil:
		g = newGroup(groupID, now)
		c.groups[groupID] = g
	case g.state == groupDead:
		setCodes(commits, kerr.CoordinatorNotAvailable.Code)
		return
	}
	if (memberID != "" || generation >= 0 || instanceID != nil) && !(generation < 0 && g.state == groupEmpty) {
		if _, code := g.validateMember(memberID, instanceID); code != 0 {
			setCodes(commits, code)
			return
		}
		if generation != g.generation {
			setCodes(commits, kerr.IllegalGeneration.Code)
			return
		}
	}
	c.storeOffsetsLocked(g, commits, now, coordlog.Batch{ProducerID: pid, ProducerEpoch: epoch, Transactional: true})
}

// CompleteTxn applies or drops producer pid's pending offsets in the groups
// of __consumer_offsets partition part, once its marker is written there.
func (c *Coordinator) CompleteTxn(part int32, pid int64, commit bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.owned.Loading(part) {
		// Its groups are being replayed: applied once they are in.
		c.loadingTxns[part] = append(c.loadingTxns[part], txnCompletion{pid, commit})
		return
	}
	for _, g := range c.groups {
		if c.PartitionFor(g.id) != part {
			continue
		}
		completeTxn(g, pid, commit)
	}
}

func completeTxn(g *group, pid int64, commit bool) {
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

// FetchedOffset is one partition of an OffsetFetch answer.
type FetchedOffset struct {
	TP       coordlog.TopicPartition
	Offset   int64
	Epoch    int32
	Metadata string
	Code     int16
}

// FetchOffsets answers OffsetFetch for one group; tps nil means all.
func (c *Coordinator) FetchOffsets(groupID string, tps []coordlog.TopicPartition, requireStable bool) (int16, []FetchedOffset) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e := c.refusal(groupID); e != nil {
		return e.Code, nil
	}
	g := c.groups[groupID]
	if tps == nil {
		if g == nil {
			return 0, nil
		}
		for tp := range g.offsets {
			tps = append(tps, tp)
		}
		coordlog.SortTPs(tps)
	}
	out := make([]FetchedOffset, 0, len(tps))
	for _, tp := range tps {
		f := FetchedOffset{TP: tp, Offset: -1, Epoch: -1}
		if g != nil {
			if requireStable && g.hasPendingTxnOffset(tp) {
				f.Code = kerr.UnstableOffsetCommit.Code
			} else if e, ok := g.offsets[tp]; ok {
				f.Offset, f.Epoch, f.Metadata = e.Offset, e.LeaderEpoch, e.Metadata
			}
		}
		out = append(out, f)
	}
	return 0, out
}

func (g *group) hasPendingTxnOffset(tp coordlog.TopicPartition) bool {
	for _, p := range g.pendingTxn {
		if _, ok := p[tp]; ok {
			return true
		}
	}
	return false
}

// deleteGroupLocked queues tombstones for g's offsets and metadata. g is
// Dead while they are written (requests for it are answered
// COORDINATOR_NOT_AVAILABLE, as Kafka answers for a Dead group) and is
// removed once they are durable; if they fail it is back as it was.
// advance, if not nil, gets the outcome.
func (c *Coordinator) deleteGroupLocked(g *group, now time.Time, advance func(err error)) {
	recs := make([]coordlog.Record, 0, len(g.offsets)+1)
	for tp := range g.offsets {
		recs = append(recs, coordlog.Record{Key: offsetCommitKey(g.id, tp)})
	}
	recs = append(recs, coordlog.Record{Key: groupMetadataKey(g.id)})
	prev, prevTime := g.state, g.stateTime
	g.transition(groupDead, now)
	c.queue(g, recs, coordlog.Batch{}, now, func(err error) {
		if err != nil {
			g.state, g.stateTime = prev, prevTime
		} else if c.groups[g.id] == g {
			delete(c.groups, g.id)
		}
		if advance != nil {
			advance(err)
		}
	})
}

// DeleteGroup is DeleteGroups for one group.
func (c *Coordinator) DeleteGroup(groupID string) int16 {
	var code *int16
	c.run(func(now time.Time) { code = c.deleteGroup(groupID, now) })
	return *code
}

// deleteGroup is DeleteGroup under c.mu; the code is final once what it
// queued is advanced.
func (c *Coordinator) deleteGroup(groupID string, now time.Time) *int16 {
	code := new(int16)
	fail := func(e *kerr.Error) *int16 {
		*code = e.Code
		return code
	}
	if e := c.refusal(groupID); e != nil {
		return fail(e)
	}
	if groupID == "" {
		return fail(kerr.InvalidGroupID)
	}
	g := c.groups[groupID]
	if g == nil || g.state == groupDead {
		return fail(kerr.GroupIDNotFound)
	}
	if g.state != groupEmpty || len(g.members) > 0 {
		return fail(kerr.NonEmptyGroup)
	}
	c.deleteGroupLocked(g, now, func(err error) {
		if err != nil {
			c.writeFailed("deleting group", groupID, err)
			*code = kerr.CoordinatorNotAvailable.Code
		}
	})
	return code
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

// DeleteOffsets is OffsetDelete; codes are set per partition.
func (c *Coordinator) DeleteOffsets(groupID string, tps []OffsetCommit) int16 {
	var code *int16
	c.run(func(now time.Time) { code = c.deleteOffsets(groupID, tps, now) })
	return *code
}

// deleteOffsets is DeleteOffsets under c.mu; the code is final once what
// it queued is advanced.
func (c *Coordinator) deleteOffsets(groupID string, tps []OffsetCommit, now time.Time) *int16 {
	code := new(int16)
	fail := func(e *kerr.Error) *int16 {
		*code = e.Code
		return code
	}
	if e := c.refusal(groupID); e != nil {
		return fail(e)
	}
	g := c.groups[groupID]
	if g == nil || g.state == groupDead {
		return fail(kerr.GroupIDNotFound)
	}
	subs, isConsumer := g.subscribedTopics()
	if g.state != groupEmpty && !isConsumer && len(g.members) > 0 {
		return fail(kerr.NonEmptyGroup)
	}
	var recs []coordlog.Record
	var gone []coordlog.TopicPartition
	for i := range tps {
		tp := tps[i].TP
		if isConsumer && (subs == nil || subs[tp.Topic]) {
			tps[i].Code = kerr.GroupSubscribedToTopic.Code
			continue
		}
		if _, ok := g.offsets[tp]; ok {
			recs = append(recs, coordlog.Record{Key: offsetCommitKey(g.id, tp)})
			gone = append(gone, tp)
		}
	}
	if len(recs) == 0 {
		return code
	}
	c.queue(g, recs, coordlog.Batch{}, now, func(err error) {
		if err != nil {
			c.writeFailed("deleting offsets", groupID, err)
			*code = kerr.CoordinatorNotAvailable.Code
			return
		}
		for _, tp := range gone {
			delete(g.offsets, tp)
		}
	})
	return code
}

// expireOffsetsLocked applies offsets.retention.minutes as Kafka 2.1+
// does (KIP-211): an empty group's offsets expire once the group has been
// empty for the retention period; a standalone group's offsets expire
// retention after their commit; a consumer group's offsets of topics no
// member subscribes to expire retention after their commit. An empty group
// left without offsets is deleted.
func (c *Coordinator) expireOffsetsLocked(now time.Time) {
	for _, g := range c.groups {
		if len(g.pendingTxn) > 0 || g.inflight > 0 || g.state == groupDead {
			// Decided once its writes are in.
			continue
		}
		var expired []coordlog.TopicPartition
		subs, isConsumer := g.subscribedTopics()
		for tp, e := range g.offsets {
			var base int64
			switch {
			case g.state == groupEmpty && g.protocolType != "":
				base = g.stateTime.UnixMilli()
			case g.state == groupEmpty:
				base = e.CommitTs
			case isConsumer && subs != nil && !subs[tp.Topic]:
				base = e.CommitTs
			default:
				continue
			}
			if now.UnixMilli()-base >= c.retention.Milliseconds() {
				expired = append(expired, tp)
			}
		}
		if len(expired) == 0 {
			c.deleteIfExpired(g, now)
			continue
		}
		recs := make([]coordlog.Record, 0, len(expired))
		for _, tp := range expired {
			recs = append(recs, coordlog.Record{Key: offsetCommitKey(g.id, tp)})
		}
		c.queue(g, recs, coordlog.Batch{}, now, func(err error) {
			if err != nil {
				c.writeFailed("expiring offsets", g.id, err)
				return
			}
			for _, tp := range expired {
				delete(g.offsets, tp)
			}
			c.lg.Info("expired group offsets", "group", g.id, "partitions", len(expired))
			c.deleteIfExpired(g, now)
		})
	}
}

// deleteIfExpired deletes g if it is empty with no offsets left.
func (c *Coordinator) deleteIfExpired(g *group, now time.Time) {
	if g.state == groupEmpty && len(g.offsets) == 0 && len(g.members) == 0 {
		c.deleteGroupLocked(g, now, func(err error) {
			if err != nil {
				c.writeFailed("deleting expired group", g.id, err)
			}
		})
	}
}

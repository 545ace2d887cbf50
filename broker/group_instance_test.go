package broker

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/verbatim-kafka/verbatim/coordlog/coordlogtest"
	"github.com/verbatim-kafka/verbatim/groupcoord"
)

// memberCase is one (member id, group instance id) pair a request names
// and the answer Kafka's ClassicGroup.validateMember gives it.
type memberCase struct {
	name   string
	member string
	inst   *string
	want   int16
}

// stableStaticGroup builds group g, Stable at generation 2, with dynamic
// leader d and static member s (instance id "inst-s"); it returns the
// cases every member-checking API answers alike.
func stableStaticGroup(t *testing.T, b *testBroker, g string) (d, s string, cases []memberCase) {
	t.Helper()
	d = wireJoin(t, b, g, "", nil, 20000).MemberID
	if r := wireJoin(t, b, g, d, nil, 20000); r.ErrorCode != 0 || r.Generation != 1 {
		t.Fatalf("first join: %+v", r)
	}
	// The static member's join waits for d's rejoin: it goes to the
	// coordinator directly, which answers on a channel.
	inst := "inst-s"
	r, sch := b.srv.groups.Join(groupcoord.JoinRequest{Group: g, InstanceID: &inst, ProtocolType: "consumer",
		Protocols:      []kmsg.JoinGroupRequestProtocol{{Name: "range", Metadata: []byte("md")}},
		SessionTimeout: 10 * time.Second, RebalanceTimeout: 20 * time.Second, ClientID: "c", RequireKnownMember: true, Version: 9})
	if sch == nil {
		t.Fatalf("static join answered at once: %+v", r)
	}
	if rd := wireJoin(t, b, g, d, nil, 20000); rd.ErrorCode != 0 || rd.Generation != 2 || rd.LeaderID != d {
		t.Fatalf("rebalance: %+v", rd)
	}
	select {
	case rs := <-sch:
		if rs.Code != 0 || rs.Generation != 2 {
			t.Fatalf("static member's join: %+v", rs)
		}
		s = rs.MemberID
	default:
		t.Fatal("static member's join not answered after the rebalance")
	}
	if r := wireSync(t, b, g, d, nil, 2, d, s); r.ErrorCode != 0 {
		t.Fatalf("leader sync: %+v", r)
	}
	if r := wireSync(t, b, g, s, &inst, 2); r.ErrorCode != 0 || string(r.MemberAssignment) != "a-"+s {
		t.Fatalf("static member's sync: %+v", r)
	}
	unknown, other := "nobody-registered", inst
	return d, s, []memberCase{
		{"dynamic member, unregistered instance id", d, &unknown, kerr.UnknownMemberID.Code},
		{"unknown member, unregistered instance id", "ghost", &unknown, kerr.UnknownMemberID.Code},
		{"dynamic member, instance id of another member", d, &other, kerr.FencedInstanceID.Code},
		{"unknown member, instance id of another member", "ghost", &other, kerr.FencedInstanceID.Code},
		{"empty member id, instance id of another member", "", &other, kerr.FencedInstanceID.Code},
		{"unknown member, no instance id", "ghost", nil, kerr.UnknownMemberID.Code},
		{"static member, its instance id", s, &inst, 0},
		{"static member, no instance id", s, nil, 0},
		{"dynamic member, no instance id", d, nil, 0},
	}
}

// Heartbeat, SyncGroup, JoinGroup of a known member, OffsetCommit,
// TxnOffsetCommit and LeaveGroup check (member id, instance id) as
// Kafka 4.x's group coordinator does: an instance id nobody holds is
// UNKNOWN_MEMBER_ID (it was FENCED_INSTANCE_ID), one held by another
// member id FENCED_INSTANCE_ID. Each API on the wire, at its newest
// version.
func TestGroupInstanceIDChecksPerAPI(t *testing.T) {
	clk := coordlogtest.NewClock(time.Now())
	b := startClockBroker(t, t.TempDir(), clk)
	createTopic(t, b, "vi", 1, nil)
	const g = "vi-g"
	d, s, cases := stableStaticGroup(t, b, g)
	pid, epoch := openRawTxn(t, b, "vi-tx", "vi")
	areq := kmsg.NewPtrAddOffsetsToTxnRequest()
	areq.TransactionalID, areq.ProducerID, areq.ProducerEpoch, areq.Group = "vi-tx", pid, epoch, g
	if r := rawRequest[*kmsg.AddOffsetsToTxnResponse](t, b, areq); r.ErrorCode != 0 {
		t.Fatalf("add offsets: %+v", r)
	}

	apis := []struct {
		name string
		call func(member string, inst *string) int16
		// skip: cases that are not a member check for this API
		skip func(memberCase) bool
	}{
		{"Heartbeat", func(member string, inst *string) int16 {
			req := kmsg.NewPtrHeartbeatRequest()
			req.Version, req.Group, req.Generation, req.MemberID, req.InstanceID = 4, g, 2, member, inst
			return rawRequest[*kmsg.HeartbeatResponse](t, b, req).ErrorCode
		}, nil},
		{"SyncGroup", func(member string, inst *string) int16 {
			req := kmsg.NewPtrSyncGroupRequest()
			req.Version, req.Group, req.Generation, req.MemberID, req.InstanceID = 5, g, 2, member, inst
			return rawRequest[*kmsg.SyncGroupResponse](t, b, req).ErrorCode
		}, nil},
		{"JoinGroup", func(member string, inst *string) int16 {
			req := kmsg.NewPtrJoinGroupRequest()
			req.Version, req.Group, req.MemberID, req.InstanceID = 9, g, member, inst
			req.ProtocolType, req.Protocols = "consumer", []kmsg.JoinGroupRequestProtocol{{Name: "range", Metadata: []byte("md")}}
			req.SessionTimeoutMillis, req.RebalanceTimeoutMillis = 10000, 20000
			r := rawRequest[*kmsg.JoinGroupResponse](t, b, req)
			if r.ErrorCode == 0 && r.Generation != 2 {
				t.Errorf("JoinGroup %s: generation %d, want the current 2 without a rebalance", member, r.Generation)
			}
			return r.ErrorCode
		}, func(mc memberCase) bool {
			// An empty member id joins as a new member (a static
			// replacement), and the leader's rejoin starts a
			// rebalance: neither is a member check.
			return mc.member == "" || mc.member == d && mc.want == 0
		}},
		{"OffsetCommit", func(member string, inst *string) int16 {
			req := kmsg.NewPtrOffsetCommitRequest()
			req.Version, req.Group, req.Generation, req.MemberID, req.InstanceID = 9, g, 2, member, inst
			req.Topics = []kmsg.OffsetCommitRequestTopic{{Topic: "vi", Partitions: []kmsg.OffsetCommitRequestTopicPartition{{Partition: 0, Offset: 1, LeaderEpoch: -1}}}}
			return rawRequest[*kmsg.OffsetCommitResponse](t, b, req).Topics[0].Partitions[0].ErrorCode
		}, nil},
		{"TxnOffsetCommit", func(member string, inst *string) int16 {
			req := kmsg.NewPtrTxnOffsetCommitRequest()
			req.Version = 4
			req.TransactionalID, req.Group, req.ProducerID, req.ProducerEpoch = "vi-tx", g, pid, epoch
			req.Generation, req.MemberID, req.InstanceID = 2, member, inst
			req.Topics = []kmsg.TxnOffsetCommitRequestTopic{{Topic: "vi", Partitions: []kmsg.TxnOffsetCommitRequestTopicPartition{{Partition: 0, Offset: 1, LeaderEpoch: -1}}}}
			return rawRequest[*kmsg.TxnOffsetCommitResponse](t, b, req).Topics[0].Partitions[0].ErrorCode
		}, nil},
	}
	for _, api := range apis {
		for _, mc := range cases {
			if api.skip != nil && api.skip(mc) {
				continue
			}
			if got := api.call(mc.member, mc.inst); got != mc.want {
				t.Errorf("%s, %s: error %d, want %d", api.name, mc.name, got, mc.want)
			}
		}
	}

	// LeaveGroup last: its successes remove members.
	leave := func(member string, inst *string) int16 {
		req := kmsg.NewPtrLeaveGroupRequest()
		req.Version, req.Group = 5, g
		req.Members = []kmsg.LeaveGroupRequestMember{{MemberID: member, InstanceID: inst}}
		r := rawRequest[*kmsg.LeaveGroupResponse](t, b, req)
		if r.ErrorCode != 0 || len(r.Members) != 1 {
			t.Fatalf("LeaveGroup: %+v", r)
		}
		return r.Members[0].ErrorCode
	}
	for _, mc := range cases {
		if mc.want == 0 || mc.member == "" {
			// An empty member id with an instance id removes that
			// static member (administrative removal): checked below.
			continue
		}
		if got := leave(mc.member, mc.inst); got != mc.want {
			t.Errorf("LeaveGroup, %s: error %d, want %d", mc.name, got, mc.want)
		}
	}
	if got := leave(s, nil); got != 0 {
		t.Errorf("LeaveGroup, static member without its instance id: %d", got)
	}
	inst := "inst-s"
	if got := leave("", &inst); got != kerr.UnknownMemberID.Code {
		t.Errorf("LeaveGroup by the instance id of a member that left: %d", got)
	}
	if got := leave(d, nil); got != 0 {
		t.Errorf("LeaveGroup, dynamic member: %d", got)
	}
	if desc := describeGroup(t, b, g); len(desc.Members) != 0 {
		t.Fatalf("members left: %+v", desc.Members)
	}
}

// TxnOffsetCommit's group checks follow Kafka's ClassicGroup
// validateOffsetCommit for transactional commits: a generation for a group
// that does not exist is ILLEGAL_GENERATION (the group is not created),
// generation -1 to an empty group is accepted whatever member id it names,
// and a generation to an empty group needs a known member.
func TestTxnOffsetCommitGroupChecks(t *testing.T) {
	clk := coordlogtest.NewClock(time.Now())
	b := startClockBroker(t, t.TempDir(), clk)
	createTopic(t, b, "tg", 1, nil)
	pid, epoch := openRawTxn(t, b, "tg-tx", "tg")
	commit := func(group, member string, gen int32) int16 {
		areq := kmsg.NewPtrAddOffsetsToTxnRequest()
		areq.TransactionalID, areq.ProducerID, areq.ProducerEpoch, areq.Group = "tg-tx", pid, epoch, group
		if r := rawRequest[*kmsg.AddOffsetsToTxnResponse](t, b, areq); r.ErrorCode != 0 {
			t.Fatalf("add offsets of %s: %+v", group, r)
		}
		req := kmsg.NewPtrTxnOffsetCommitRequest()
		req.Version = 4
		req.TransactionalID, req.Group, req.ProducerID, req.ProducerEpoch = "tg-tx", group, pid, epoch
		req.Generation, req.MemberID = gen, member
		req.Topics = []kmsg.TxnOffsetCommitRequestTopic{{Topic: "tg", Partitions: []kmsg.TxnOffsetCommitRequestTopicPartition{{Partition: 0, Offset: 1, LeaderEpoch: -1}}}}
		return rawRequest[*kmsg.TxnOffsetCommitResponse](t, b, req).Topics[0].Partitions[0].ErrorCode
	}
	if got := commit("tg-none", "m", 1); got != kerr.IllegalGeneration.Code {
		t.Fatalf("unknown group with a generation: %d", got)
	}
	for _, l := range b.srv.groups.List() {
		if l.ID == "tg-none" {
			t.Fatal("a refused commit created the group")
		}
	}
	if got := commit("tg-empty", "", -1); got != 0 {
		t.Fatalf("standalone commit to a new group: %d", got)
	}
	if got := commit("tg-empty", "someone", -1); got != 0 {
		t.Fatalf("generation -1 with a member id to an empty group: %d", got)
	}
	if got := commit("tg-empty", "someone", 0); got != kerr.UnknownMemberID.Code {
		t.Fatalf("generation 0 with an unknown member to an empty group: %d", got)
	}
}

package groupcoord

import (
	"fmt"
	"testing"
	"time"

	"github.com/verbatim-kafka/verbatim/coordlog/coordlogtest"
)

// FuzzGroupStateMachine runs arbitrary sequences of JoinGroup (dynamic
// and static), SyncGroup, Heartbeat, LeaveGroup and clock ticks against
// one group and checks the coordinator's invariants after every step:
// nothing panics or blocks, an Empty group has no members, a Stable group
// has no member waiting to join, the leader is a member, the static map
// points at members with that instance id, and every waiting member's
// channel has room for its one answer.
func FuzzGroupStateMachine(f *testing.F) {
	f.Add([]byte{0, 0, 1, 0, 2, 0, 3, 0, 5, 9, 0, 1, 1, 1, 2, 0, 2, 1})
	f.Add([]byte{6, 0, 6, 1, 1, 0, 2, 0, 2, 1, 6, 1, 3, 1, 4, 0, 5, 30})
	f.Add([]byte{0, 0, 0, 1, 5, 25, 1, 1, 5, 25, 4, 1, 4, 0})
	clk := coordlogtest.NewClock(time.UnixMilli(1_700_000_000_000))
	c := New(Config{Log: coordlogtest.New(), Clock: clk})
	run := 0
	f.Fuzz(func(t *testing.T, ops []byte) {
		run++
		group := fmt.Sprint("fz-", run)
		var members []string // ids ever handed out (may be stale)
		pick := func(b byte) string {
			if len(members) == 0 {
				return "none"
			}
			return members[int(b)%len(members)]
		}
		insts := []string{"i0", "i1"}
		for i := 0; i+1 < len(ops) && i < 200; i += 2 {
			op, arg := ops[i]%7, ops[i+1]
			switch op {
			case 0: // new dynamic member, first step
				if res, _ := c.Join(jreq(group, "", nil, "md")); res.MemberID != "" {
					members = append(members, res.MemberID)
				}
			case 1: // (re)join of a known id
				md := "md"
				if arg&0x80 != 0 {
					md = "other"
				}
				c.Join(jreq(group, pick(arg), nil, md))
			case 2: // sync, as leader if it is one
				c.mu.Lock()
				g := c.groups[group]
				var gen int32
				var assign map[string][]byte
				if g != nil {
					gen = g.generation
					assign = map[string][]byte{}
					for id := range g.members {
						assign[id] = []byte(id)
					}
				}
				c.mu.Unlock()
				c.Sync(SyncRequest{Group: group, MemberID: pick(arg), Generation: gen - int32(arg&1), Assignments: assign})
			case 3:
				c.Heartbeat(group, pick(arg), nil, int32(arg%4))
			case 4:
				c.Leave(group, []LeaveMember{{MemberID: pick(arg)}})
			case 5:
				c.Tick(clk.Advance(time.Duration(arg) * time.Second))
			case 6: // static member join, unknown or known id
				inst := insts[int(arg)%2]
				id := ""
				if arg&0x80 != 0 {
					id = pick(arg)
				}
				if res, _ := c.Join(jreq(group, id, &inst, "md")); res.MemberID != "" {
					members = append(members, res.MemberID)
				}
			}
			checkGroupInvariants(t, c, group)
		}
	})
}

func checkGroupInvariants(t *testing.T, c *Coordinator, id string) {
	t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	g := c.groups[id]
	if g == nil {
		return
	}
	if g.state == groupEmpty && len(g.members) > 0 {
		t.Fatalf("Empty group with %d members", len(g.members))
	}
	if len(g.members) > 0 && g.members[g.leader] == nil && g.state != groupPreparingRebalance {
		t.Fatalf("state %v: leader %q is not a member", g.state, g.leader)
	}
	for inst, mid := range g.static {
		m := g.members[mid]
		if m == nil || m.instanceID == nil || *m.instanceID != inst {
			t.Fatalf("static %q points at %q, not a member with that instance", inst, mid)
		}
	}
	for mid, m := range g.members {
		if m.id != mid {
			t.Fatalf("member %q indexed as %q", m.id, mid)
		}
		if g.state == groupStable && m.joinWait != nil {
			t.Fatalf("Stable group with member %q waiting to join", mid)
		}
		if m.joinWait != nil && len(m.joinWait) != 0 {
			t.Fatalf("member %q waits on a channel already answered", mid)
		}
		if m.syncWait != nil && len(m.syncWait) != 0 {
			t.Fatalf("member %q waits on a sync channel already answered", mid)
		}
	}
	for mid := range g.pendingSync {
		if g.members[mid] == nil {
			t.Fatalf("pending sync of non-member %q", mid)
		}
	}
}

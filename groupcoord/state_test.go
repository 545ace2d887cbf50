package groupcoord

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/verbatim-kafka/verbatim/coordlog"
	"github.com/verbatim-kafka/verbatim/coordlog/coordlogtest"
)

// These tests drive the group coordinator directly with a manual clock,
// over an in-memory log; a restart is a new coordinator loading that log.

// start returns a loaded coordinator over l with no initial rebalance
// delay.
func start(t *testing.T, l coordlog.Log, clk coordlog.Clock) *Coordinator {
	t.Helper()
	return coordlogtest.Start(t, New(Config{Log: l, Clock: clk}))
}

func describe(c *Coordinator, group string) kmsg.DescribeGroupsResponseGroup {
	d := kmsg.NewDescribeGroupsResponseGroup()
	c.Describe(group, &d)
	return d
}

func protos(md string) []kmsg.JoinGroupRequestProtocol {
	return []kmsg.JoinGroupRequestProtocol{{Name: "range", Metadata: []byte(md)}}
}

func jreq(group, member string, inst *string, md string) JoinRequest {
	return JoinRequest{Group: group, MemberID: member, InstanceID: inst, ProtocolType: "consumer", Protocols: protos(md),
		SessionTimeout: 10 * time.Second, RebalanceTimeout: 20 * time.Second, ClientID: "c", RequireKnownMember: true, Version: 9}
}

// recvJoin returns the join result waiting on ch, failing if none is there.
func recvJoin(t *testing.T, ch chan JoinResult) JoinResult {
	t.Helper()
	select {
	case r := <-ch:
		return r
	default:
		t.Fatal("join not answered")
		return JoinResult{}
	}
}

func pendingJoin(ch chan JoinResult) bool { return len(ch) == 0 }

// joinNew runs the KIP-394 two-step join of a dynamic member and returns
// its id and the channel of its join.
func joinNew(t *testing.T, c *Coordinator, group string) (string, chan JoinResult) {
	t.Helper()
	res, ch := c.Join(jreq(group, "", nil, "md"))
	if ch != nil || res.Code != kerr.MemberIDRequired.Code || res.MemberID == "" {
		t.Fatalf("first join: %+v", res)
	}
	id := res.MemberID
	res, ch = c.Join(jreq(group, id, nil, "md"))
	if ch == nil {
		t.Fatalf("second join answered at once: %+v", res)
	}
	return id, ch
}

func syncAll(t *testing.T, c *Coordinator, group string, gen int32, leader string, members ...string) {
	t.Helper()
	assign := map[string][]byte{}
	for _, m := range members {
		assign[m] = []byte("a-" + m)
	}
	var waits []chan SyncResult
	for _, m := range members {
		if m == leader {
			continue
		}
		res, ch := c.Sync(SyncRequest{Group: group, MemberID: m, Generation: gen})
		if ch == nil {
			t.Fatalf("follower sync answered at once: %+v", res)
		}
		waits = append(waits, ch)
	}
	res, ch := c.Sync(SyncRequest{Group: group, MemberID: leader, Generation: gen, Assignments: assign})
	if ch == nil {
		t.Fatalf("leader sync: %+v", res)
	}
	waits = append(waits, ch)
	for _, w := range waits {
		select {
		case r := <-w:
			if r.Code != 0 {
				t.Fatalf("sync: %+v", r)
			}
		default:
			t.Fatal("sync not answered after the leader's")
		}
	}
}

func sessionExpiryRebalances(t *testing.T, clk *coordlogtest.Clock, c *Coordinator) {
	m1, ch1 := joinNew(t, c, "s")
	r1 := recvJoin(t, ch1) // alone: no initial delay in tests
	if r1.Code != 0 || r1.Generation != 1 || r1.Leader != m1 || len(r1.Members) != 1 {
		t.Fatalf("join: %+v", r1)
	}
	m2, ch2 := joinNew(t, c, "s")
	if !pendingJoin(ch2) {
		t.Fatal("second member answered before the first rejoined")
	}
	if code := c.Heartbeat("s", m1, nil, 1); code != kerr.RebalanceInProgress.Code {
		t.Fatalf("heartbeat during rebalance: %d", code)
	}
	_, ch1 = c.Join(jreq("s", m1, nil, "md"))
	r1, r2 := recvJoin(t, ch1), recvJoin(t, ch2)
	if r1.Generation != 2 || r2.Generation != 2 || (len(r1.Members) == 0) == (len(r2.Members) == 0) {
		t.Fatalf("generation 2: %+v %+v", r1, r2)
	}
	syncAll(t, c, "s", 2, r1.Leader, m1, m2)
	if code := c.Heartbeat("s", m2, nil, 2); code != 0 {
		t.Fatalf("heartbeat: %d", code)
	}
	if code := c.Heartbeat("s", m2, nil, 1); code != kerr.IllegalGeneration.Code {
		t.Fatalf("stale generation: %d", code)
	}
	// m1 stops heartbeating; m2 keeps going. After m1's session timeout
	// the group rebalances without it.
	for i := 0; i < 4; i++ {
		c.Tick(clk.Advance(3 * time.Second))
		if i < 3 {
			if code := c.Heartbeat("s", m2, nil, 2); code != 0 {
				t.Fatalf("heartbeat %d: %d", i, code)
			}
		}
	}
	if code := c.Heartbeat("s", m1, nil, 2); code != kerr.UnknownMemberID.Code {
		t.Fatalf("expired member heartbeat: %d", code)
	}
	if code := c.Heartbeat("s", m2, nil, 2); code != kerr.RebalanceInProgress.Code {
		t.Fatalf("survivor heartbeat: %d", code)
	}
	_, ch2 = c.Join(jreq("s", m2, nil, "md"))
	if r := recvJoin(t, ch2); r.Generation != 3 || r.Leader != m2 || len(r.Members) != 1 {
		t.Fatalf("generation 3: %+v", r)
	}
}

func rebalanceTimeoutDropsMembersThatDoNotRejoin(t *testing.T, clk *coordlogtest.Clock, c *Coordinator) {
	m1, ch1 := joinNew(t, c, "r")
	recvJoin(t, ch1)
	syncAll(t, c, "r", 1, m1, m1)
	// A new member triggers a rebalance; m1 keeps heartbeating but never
	// rejoins (a consumer stuck in processing).
	_, ch2 := joinNew(t, c, "r")
	for i := 0; i < 6; i++ {
		c.Heartbeat("r", m1, nil, 1)
		c.Tick(clk.Advance(3 * time.Second))
	}
	if !pendingJoin(ch2) {
		t.Fatal("join completed before the rebalance timeout")
	}
	c.Tick(clk.Advance(3 * time.Second)) // 21 s > rebalance timeout 20 s
	r := recvJoin(t, ch2)
	if r.Code != 0 || r.Generation != 2 || len(r.Members) != 1 {
		t.Fatalf("after the rebalance timeout: %+v", r)
	}
	if code := c.Heartbeat("r", m1, nil, 1); code != kerr.UnknownMemberID.Code {
		t.Fatalf("member that did not rejoin: %d", code)
	}
}

func pendingMemberIDExpires(t *testing.T, clk *coordlogtest.Clock, c *Coordinator) {
	res, _ := c.Join(jreq("p", "", nil, "md"))
	if res.Code != kerr.MemberIDRequired.Code {
		t.Fatalf("%+v", res)
	}
	c.Tick(clk.Advance(11 * time.Second))
	if r, ch := c.Join(jreq("p", res.MemberID, nil, "md")); ch != nil || r.Code != kerr.UnknownMemberID.Code {
		t.Fatalf("join with an expired pending id: %+v", r)
	}
}

func TestGroupStaticMembership(t *testing.T) {
	clk := coordlogtest.NewClock(time.Now())
	l := coordlogtest.New()
	c := start(t, l, clk)
	i1, i2 := "inst-1", "inst-2"
	// Static members join without the KIP-394 round trip.
	r, ch1 := c.Join(jreq("st", "", &i1, "md"))
	if ch1 == nil {
		t.Fatalf("static join: %+v", r)
	}
	a := recvJoin(t, ch1)
	r, ch2 := c.Join(jreq("st", "", &i2, "md"))
	if ch2 == nil {
		t.Fatalf("static join 2: %+v", r)
	}
	_, ch1 = c.Join(jreq("st", a.MemberID, &i1, "md"))
	a, bb := recvJoin(t, ch1), recvJoin(t, ch2)
	syncAll(t, c, "st", 2, a.Leader, a.MemberID, bb.MemberID)
	gen := a.Generation
	// inst-2 restarts (new process, unknown member id): it gets a new
	// member id and the current assignment without a rebalance.
	r, ch := c.Join(jreq("st", "", &i2, "md"))
	if ch != nil || r.Code != 0 || r.Generation != gen || r.MemberID == bb.MemberID {
		t.Fatalf("static rejoin: %+v (ch %v)", r, ch != nil)
	}
	if code := c.Heartbeat("st", a.MemberID, &i1, gen); code != 0 {
		t.Fatalf("other member disturbed: %d", code)
	}
	s, sch := c.Sync(SyncRequest{Group: "st", MemberID: r.MemberID, InstanceID: &i2, Generation: gen})
	if sch != nil || s.Code != 0 || string(s.Assignment) != "a-"+bb.MemberID {
		t.Fatalf("static member's assignment after rejoin: %+v", s)
	}
	// The old incarnation is fenced (KIP-345).
	if code := c.Heartbeat("st", bb.MemberID, &i2, gen); code != kerr.FencedInstanceID.Code {
		t.Fatalf("old incarnation heartbeat: %d", code)
	}
	_, ms := c.Leave("st", []LeaveMember{{MemberID: bb.MemberID, InstanceID: &i2}})
	if ms[0].Code != kerr.FencedInstanceID.Code {
		t.Fatalf("old incarnation leave: %+v", ms)
	}
	// A restart keeps the static mapping.
	c.Shutdown()
	c = start(t, l, clk)
	if code := c.Heartbeat("st", r.MemberID, &i2, gen); code != 0 {
		t.Fatalf("static member after broker restart: %d", code)
	}
	d := describe(c, "st")
	if d.State != "Stable" || len(d.Members) != 2 {
		t.Fatalf("after restart: %+v", d)
	}
}

func TestGroupRestartMidRebalance(t *testing.T) {
	clk := coordlogtest.NewClock(time.Now())
	l := coordlogtest.New()
	c := start(t, l, clk)
	m1, ch1 := joinNew(t, c, "mr")
	recvJoin(t, ch1)
	syncAll(t, c, "mr", 1, m1, m1)
	m2, ch2 := joinNew(t, c, "mr")
	_ = ch2
	// The coordinator stops in PreparingRebalance (m2 waiting, m1 not yet
	// rejoined). m2's wait is answered NOT_COORDINATOR by the shutdown.
	c.Shutdown()
	if r := recvJoin(t, ch2); r.Code != kerr.NotCoordinator.Code {
		t.Fatalf("waiting join at shutdown: %+v", r)
	}
	c = start(t, l, clk)
	// The last durable generation (1, m1 only) is back; m1 heartbeats on,
	// m2 (never part of a durable generation) is unknown and rejoins.
	if code := c.Heartbeat("mr", m1, nil, 1); code != 0 {
		t.Fatalf("m1 after restart: %d", code)
	}
	if r, ch := c.Join(jreq("mr", m2, nil, "md")); ch != nil || r.Code != kerr.UnknownMemberID.Code {
		t.Fatalf("m2 after restart: %+v", r)
	}
	m2, ch2 = joinNew(t, c, "mr")
	_, ch1 = c.Join(jreq("mr", m1, nil, "md"))
	r1, r2 := recvJoin(t, ch1), recvJoin(t, ch2)
	if r1.Generation != 2 || r2.Generation != 2 {
		t.Fatalf("rebalance after restart: %+v %+v", r1, r2)
	}
	syncAll(t, c, "mr", 2, r1.Leader, m1, m2)
	if d := describe(c, "mr"); d.State != "Stable" || len(d.Members) != 2 {
		t.Fatalf("%+v", d)
	}
}

func joinErrors(t *testing.T, clk *coordlogtest.Clock, c *Coordinator) {
	r := jreq("e", "", nil, "md")
	r.SessionTimeout = time.Second
	if res, _ := c.Join(r); res.Code != kerr.InvalidSessionTimeout.Code {
		t.Fatalf("short session: %+v", res)
	}
	if res, _ := c.Join(jreq("", "", nil, "md")); res.Code != kerr.InvalidGroupID.Code {
		t.Fatalf("empty group: %+v", res)
	}
	m1, ch := joinNew(t, c, "e")
	recvJoin(t, ch)
	other := jreq("e", "", nil, "md")
	other.Protocols = []kmsg.JoinGroupRequestProtocol{{Name: "roundrobin"}}
	if res, _ := c.Join(other); res.Code != kerr.InconsistentGroupProtocol.Code {
		t.Fatalf("protocol mismatch: %+v", res)
	}
	if res, _ := c.Join(jreq("e", "nobody", nil, "md")); res.Code != kerr.UnknownMemberID.Code {
		t.Fatalf("unknown member: %+v", res)
	}
	if s, _ := c.Sync(SyncRequest{Group: "e", MemberID: m1, Generation: 7}); s.Code != kerr.IllegalGeneration.Code {
		t.Fatalf("sync with a wrong generation: %+v", s)
	}
	pt := "connect"
	if s, _ := c.Sync(SyncRequest{Group: "e", MemberID: m1, Generation: 1, ProtocolType: &pt}); s.Code != kerr.InconsistentGroupProtocol.Code {
		t.Fatalf("sync with a wrong protocol type: %+v", s)
	}
}

// TestGroupCoordinatorStateMachine runs the state machine cases that need
// no restart on one coordinator (each with its own group), with a manual
// clock.
func TestGroupCoordinatorStateMachine(t *testing.T) {
	clk := coordlogtest.NewClock(time.Now())
	c := start(t, coordlogtest.New(), clk)
	for _, tc := range []struct {
		name string
		fn   func(*testing.T, *coordlogtest.Clock, *Coordinator)
	}{
		{"SessionExpiryRebalances", sessionExpiryRebalances},
		{"RebalanceTimeoutDropsMembersThatDoNotRejoin", rebalanceTimeoutDropsMembersThatDoNotRejoin},
		{"PendingMemberIDExpires", pendingMemberIDExpires},
		{"JoinErrors", joinErrors},
	} {
		t.Run(tc.name, func(t *testing.T) { tc.fn(t, clk, c) })
	}
}

package broker

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// These tests drive the group coordinator directly with a manual clock.

func protos(md string) []kmsg.JoinGroupRequestProtocol {
	return []kmsg.JoinGroupRequestProtocol{{Name: "range", Metadata: []byte(md)}}
}

func jreq(group, member string, inst *string, md string) joinRequest {
	return joinRequest{group: group, memberID: member, instanceID: inst, protocolType: "consumer", protocols: protos(md),
		sessionTimeout: 10 * time.Second, rebalanceTimeout: 20 * time.Second, clientID: "c", requireKnownMember: true, version: 9}
}

// recvJoin returns the join result waiting on ch, failing if none is there.
func recvJoin(t *testing.T, ch chan joinResult) joinResult {
	t.Helper()
	select {
	case r := <-ch:
		return r
	default:
		t.Fatal("join not answered")
		return joinResult{}
	}
}

func pendingJoin(ch chan joinResult) bool { return len(ch) == 0 }

// joinNew runs the KIP-394 two-step join of a dynamic member and returns
// its id and the channel of its join.
func joinNew(t *testing.T, c *groupCoordinator, group string) (string, chan joinResult) {
	t.Helper()
	res, ch := c.join(jreq(group, "", nil, "md"))
	if ch != nil || res.code != kerr.MemberIDRequired.Code || res.memberID == "" {
		t.Fatalf("first join: %+v", res)
	}
	id := res.memberID
	res, ch = c.join(jreq(group, id, nil, "md"))
	if ch == nil {
		t.Fatalf("second join answered at once: %+v", res)
	}
	return id, ch
}

func syncAll(t *testing.T, c *groupCoordinator, group string, gen int32, leader string, members ...string) {
	t.Helper()
	assign := map[string][]byte{}
	for _, m := range members {
		assign[m] = []byte("a-" + m)
	}
	var waits []chan syncResult
	for _, m := range members {
		if m == leader {
			continue
		}
		res, ch := c.sync(syncRequest{group: group, memberID: m, generation: gen})
		if ch == nil {
			t.Fatalf("follower sync answered at once: %+v", res)
		}
		waits = append(waits, ch)
	}
	res, ch := c.sync(syncRequest{group: group, memberID: leader, generation: gen, assignments: assign})
	if ch == nil {
		t.Fatalf("leader sync: %+v", res)
	}
	waits = append(waits, ch)
	for _, w := range waits {
		select {
		case r := <-w:
			if r.code != 0 {
				t.Fatalf("sync: %+v", r)
			}
		default:
			t.Fatal("sync not answered after the leader's")
		}
	}
}

func sessionExpiryRebalances(t *testing.T, clk *manualClock, b *testBroker) {
	c := b.srv.groups
	m1, ch1 := joinNew(t, c, "s")
	r1 := recvJoin(t, ch1) // alone: no initial delay in tests
	if r1.code != 0 || r1.generation != 1 || r1.leader != m1 || len(r1.members) != 1 {
		t.Fatalf("join: %+v", r1)
	}
	m2, ch2 := joinNew(t, c, "s")
	if !pendingJoin(ch2) {
		t.Fatal("second member answered before the first rejoined")
	}
	if code := c.heartbeat("s", m1, nil, 1); code != kerr.RebalanceInProgress.Code {
		t.Fatalf("heartbeat during rebalance: %d", code)
	}
	_, ch1 = c.join(jreq("s", m1, nil, "md"))
	r1, r2 := recvJoin(t, ch1), recvJoin(t, ch2)
	if r1.generation != 2 || r2.generation != 2 || (len(r1.members) == 0) == (len(r2.members) == 0) {
		t.Fatalf("generation 2: %+v %+v", r1, r2)
	}
	syncAll(t, c, "s", 2, r1.leader, m1, m2)
	if code := c.heartbeat("s", m2, nil, 2); code != 0 {
		t.Fatalf("heartbeat: %d", code)
	}
	if code := c.heartbeat("s", m2, nil, 1); code != kerr.IllegalGeneration.Code {
		t.Fatalf("stale generation: %d", code)
	}
	// m1 stops heartbeating; m2 keeps going. After m1's session timeout
	// the group rebalances without it.
	for i := 0; i < 4; i++ {
		c.tick(clk.advance(3 * time.Second))
		if i < 3 {
			if code := c.heartbeat("s", m2, nil, 2); code != 0 {
				t.Fatalf("heartbeat %d: %d", i, code)
			}
		}
	}
	if code := c.heartbeat("s", m1, nil, 2); code != kerr.UnknownMemberID.Code {
		t.Fatalf("expired member heartbeat: %d", code)
	}
	if code := c.heartbeat("s", m2, nil, 2); code != kerr.RebalanceInProgress.Code {
		t.Fatalf("survivor heartbeat: %d", code)
	}
	_, ch2 = c.join(jreq("s", m2, nil, "md"))
	if r := recvJoin(t, ch2); r.generation != 3 || r.leader != m2 || len(r.members) != 1 {
		t.Fatalf("generation 3: %+v", r)
	}
}

func rebalanceTimeoutDropsMembersThatDoNotRejoin(t *testing.T, clk *manualClock, b *testBroker) {
	c := b.srv.groups
	m1, ch1 := joinNew(t, c, "r")
	recvJoin(t, ch1)
	syncAll(t, c, "r", 1, m1, m1)
	// A new member triggers a rebalance; m1 keeps heartbeating but never
	// rejoins (a consumer stuck in processing).
	_, ch2 := joinNew(t, c, "r")
	for i := 0; i < 6; i++ {
		c.heartbeat("r", m1, nil, 1)
		c.tick(clk.advance(3 * time.Second))
	}
	if !pendingJoin(ch2) {
		t.Fatal("join completed before the rebalance timeout")
	}
	c.tick(clk.advance(3 * time.Second)) // 21 s > rebalance timeout 20 s
	r := recvJoin(t, ch2)
	if r.code != 0 || r.generation != 2 || len(r.members) != 1 {
		t.Fatalf("after the rebalance timeout: %+v", r)
	}
	if code := c.heartbeat("r", m1, nil, 1); code != kerr.UnknownMemberID.Code {
		t.Fatalf("member that did not rejoin: %d", code)
	}
}

func pendingMemberIDExpires(t *testing.T, clk *manualClock, b *testBroker) {
	c := b.srv.groups
	res, _ := c.join(jreq("p", "", nil, "md"))
	if res.code != kerr.MemberIDRequired.Code {
		t.Fatalf("%+v", res)
	}
	c.tick(clk.advance(11 * time.Second))
	if r, ch := c.join(jreq("p", res.memberID, nil, "md")); ch != nil || r.code != kerr.UnknownMemberID.Code {
		t.Fatalf("join with an expired pending id: %+v", r)
	}
}

func TestGroupStaticMembership(t *testing.T) {
	clk := &manualClock{t: time.Now()}
	dir := t.TempDir()
	b := startClockBroker(t, dir, clk)
	c := b.srv.groups
	i1, i2 := "inst-1", "inst-2"
	// Static members join without the KIP-394 round trip.
	r, ch1 := c.join(jreq("st", "", &i1, "md"))
	if ch1 == nil {
		t.Fatalf("static join: %+v", r)
	}
	a := recvJoin(t, ch1)
	r, ch2 := c.join(jreq("st", "", &i2, "md"))
	if ch2 == nil {
		t.Fatalf("static join 2: %+v", r)
	}
	_, ch1 = c.join(jreq("st", a.memberID, &i1, "md"))
	a, bb := recvJoin(t, ch1), recvJoin(t, ch2)
	syncAll(t, c, "st", 2, a.leader, a.memberID, bb.memberID)
	gen := a.generation
	// inst-2 restarts (new process, unknown member id): it gets a new
	// member id and the current assignment without a rebalance.
	r, ch := c.join(jreq("st", "", &i2, "md"))
	if ch != nil || r.code != 0 || r.generation != gen || r.memberID == bb.memberID {
		t.Fatalf("static rejoin: %+v (ch %v)", r, ch != nil)
	}
	if code := c.heartbeat("st", a.memberID, &i1, gen); code != 0 {
		t.Fatalf("other member disturbed: %d", code)
	}
	s, sch := c.sync(syncRequest{group: "st", memberID: r.memberID, instanceID: &i2, generation: gen})
	if sch != nil || s.code != 0 || string(s.assignment) != "a-"+bb.memberID {
		t.Fatalf("static member's assignment after rejoin: %+v", s)
	}
	// The old incarnation is fenced (KIP-345).
	if code := c.heartbeat("st", bb.memberID, &i2, gen); code != kerr.FencedInstanceID.Code {
		t.Fatalf("old incarnation heartbeat: %d", code)
	}
	_, ms := c.leave("st", []leaveMember{{memberID: bb.memberID, instanceID: &i2}})
	if ms[0].code != kerr.FencedInstanceID.Code {
		t.Fatalf("old incarnation leave: %+v", ms)
	}
	// A restart of the broker keeps the static mapping.
	b.stop()
	b = startClockBroker(t, dir, clk)
	c = b.srv.groups
	if code := c.heartbeat("st", r.memberID, &i2, gen); code != 0 {
		t.Fatalf("static member after broker restart: %d", code)
	}
	d := describeGroup(t, b, "st")
	if d.State != "Stable" || len(d.Members) != 2 {
		t.Fatalf("after restart: %+v", d)
	}
}

func TestGroupRestartMidRebalance(t *testing.T) {
	clk := &manualClock{t: time.Now()}
	dir := t.TempDir()
	b := startClockBroker(t, dir, clk)
	c := b.srv.groups
	m1, ch1 := joinNew(t, c, "mr")
	recvJoin(t, ch1)
	syncAll(t, c, "mr", 1, m1, m1)
	m2, ch2 := joinNew(t, c, "mr")
	_ = ch2
	// The broker stops in PreparingRebalance (m2 waiting, m1 not yet
	// rejoined). m2's wait is answered NOT_COORDINATOR by the shutdown.
	b.stop()
	if r := recvJoin(t, ch2); r.code != kerr.NotCoordinator.Code {
		t.Fatalf("waiting join at shutdown: %+v", r)
	}
	b = startClockBroker(t, dir, clk)
	c = b.srv.groups
	// The last durable generation (1, m1 only) is back; m1 heartbeats on,
	// m2 (never part of a durable generation) is unknown and rejoins.
	if code := c.heartbeat("mr", m1, nil, 1); code != 0 {
		t.Fatalf("m1 after restart: %d", code)
	}
	if r, ch := c.join(jreq("mr", m2, nil, "md")); ch != nil || r.code != kerr.UnknownMemberID.Code {
		t.Fatalf("m2 after restart: %+v", r)
	}
	m2, ch2 = joinNew(t, c, "mr")
	_, ch1 = c.join(jreq("mr", m1, nil, "md"))
	r1, r2 := recvJoin(t, ch1), recvJoin(t, ch2)
	if r1.generation != 2 || r2.generation != 2 {
		t.Fatalf("rebalance after restart: %+v %+v", r1, r2)
	}
	syncAll(t, c, "mr", 2, r1.leader, m1, m2)
	if d := describeGroup(t, b, "mr"); d.State != "Stable" || len(d.Members) != 2 {
		t.Fatalf("%+v", d)
	}
}

func joinErrors(t *testing.T, clk *manualClock, b *testBroker) {
	c := b.srv.groups
	r := jreq("e", "", nil, "md")
	r.sessionTimeout = time.Second
	if res, _ := c.join(r); res.code != kerr.InvalidSessionTimeout.Code {
		t.Fatalf("short session: %+v", res)
	}
	if res, _ := c.join(jreq("", "", nil, "md")); res.code != kerr.InvalidGroupID.Code {
		t.Fatalf("empty group: %+v", res)
	}
	m1, ch := joinNew(t, c, "e")
	recvJoin(t, ch)
	other := jreq("e", "", nil, "md")
	other.protocols = []kmsg.JoinGroupRequestProtocol{{Name: "roundrobin"}}
	if res, _ := c.join(other); res.code != kerr.InconsistentGroupProtocol.Code {
		t.Fatalf("protocol mismatch: %+v", res)
	}
	if res, _ := c.join(jreq("e", "nobody", nil, "md")); res.code != kerr.UnknownMemberID.Code {
		t.Fatalf("unknown member: %+v", res)
	}
	if s, _ := c.sync(syncRequest{group: "e", memberID: m1, generation: 7}); s.code != kerr.IllegalGeneration.Code {
		t.Fatalf("sync with a wrong generation: %+v", s)
	}
	pt := "connect"
	if s, _ := c.sync(syncRequest{group: "e", memberID: m1, generation: 1, protocolType: &pt}); s.code != kerr.InconsistentGroupProtocol.Code {
		t.Fatalf("sync with a wrong protocol type: %+v", s)
	}
}

func joinWaitEndsBeforeRequestTimeout(t *testing.T, clk *manualClock, b *testBroker) {
	c := b.srv.groups
	m1, ch1 := joinNew(t, c, "w")
	recvJoin(t, ch1)
	syncAll(t, c, "w", 1, m1, m1)
	req := kmsg.NewPtrJoinGroupRequest()
	req.Version = 9
	req.Group, req.ProtocolType, req.Protocols = "w", "consumer", protos("md")
	req.SessionTimeoutMillis, req.RebalanceTimeoutMillis = 10000, 60000
	first := rawRequest[*kmsg.JoinGroupResponse](t, b, req)
	if first.ErrorCode != kerr.MemberIDRequired.Code {
		t.Fatalf("first join: %+v", first)
	}
	req.MemberID = first.MemberID
	// m1 never rejoins, so this join would wait for the rebalance
	// timeout (60 s); it is answered before the 2 s request timeout
	// closes the connection instead.
	start := time.Now()
	resp := rawRequest[*kmsg.JoinGroupResponse](t, b, req)
	if resp.ErrorCode != kerr.RebalanceInProgress.Code || resp.MemberID != first.MemberID {
		t.Fatalf("waiting join: %+v", resp)
	}
	if el := time.Since(start); el > 2*time.Second {
		t.Fatalf("answered after %v, beyond the request timeout", el)
	}
	// m1 rejoins: the rebalance completes for both (the rejoining
	// member's join is answered again).
	_, ch1 = c.join(jreq("w", m1, nil, "md"))
	if r := recvJoin(t, ch1); r.code != 0 || r.generation != 2 || len(r.members) != 2 && r.leader == m1 {
		t.Fatalf("after m1 rejoined: %+v", r)
	}
	again := rawRequest[*kmsg.JoinGroupResponse](t, b, req)
	if again.ErrorCode != 0 || again.Generation != 2 {
		t.Fatalf("rejoin of the member that got REBALANCE_IN_PROGRESS: %+v", again)
	}
}

// TestGroupCoordinatorStateMachine runs the state machine cases that need
// no broker restart on one broker (each with its own group), with a manual
// clock and a 2 s request timeout.
func TestGroupCoordinatorStateMachine(t *testing.T) {
	clk := &manualClock{t: time.Now()}
	old, oldDelay := newCoordClock, initialRebalanceDelay
	newCoordClock, initialRebalanceDelay = func() coordClock { return clk }, 0
	t.Cleanup(func() { newCoordClock, initialRebalanceDelay = old, oldDelay })
	b := startBroker(t, t.TempDir(), func(c *Config) { c.RequestTimeout = 2 * time.Second })
	for _, tc := range []struct {
		name string
		fn   func(*testing.T, *manualClock, *testBroker)
	}{
		{"SessionExpiryRebalances", sessionExpiryRebalances},
		{"RebalanceTimeoutDropsMembersThatDoNotRejoin", rebalanceTimeoutDropsMembersThatDoNotRejoin},
		{"PendingMemberIDExpires", pendingMemberIDExpires},
		{"JoinErrors", joinErrors},
		{"JoinWaitEndsBeforeRequestTimeout", joinWaitEndsBeforeRequestTimeout},
	} {
		t.Run(tc.name, func(t *testing.T) { tc.fn(t, clk, b) })
	}
}

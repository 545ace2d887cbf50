package broker

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/verbatim-kafka/verbatim/coordlog"
	"github.com/verbatim-kafka/verbatim/coordlog/coordlogtest"
)

// A JoinGroup that waits for other members is a deferred reply; it is
// answered REBALANCE_IN_PROGRESS before the request timeout closes the
// connection, and the member's later rejoin gets the generation.
func TestGroupJoinWaitEndsBeforeRequestTimeout(t *testing.T) {
	clk := coordlogtest.NewClock(time.Now())
	old, oldDelay := newCoordClock, initialRebalanceDelay
	newCoordClock, initialRebalanceDelay = func() coordlog.Clock { return clk }, 0
	t.Cleanup(func() { newCoordClock, initialRebalanceDelay = old, oldDelay })
	b := startBroker(t, t.TempDir(), func(c *Config) { c.RequestTimeout = 2 * time.Second })
	join := func(member string) *kmsg.JoinGroupResponse {
		req := kmsg.NewPtrJoinGroupRequest()
		req.Version = 9
		req.Group, req.MemberID, req.ProtocolType = "w", member, "consumer"
		req.Protocols = []kmsg.JoinGroupRequestProtocol{{Name: "range", Metadata: []byte("md")}}
		req.SessionTimeoutMillis, req.RebalanceTimeoutMillis = 10000, 60000
		return rawRequest[*kmsg.JoinGroupResponse](t, b, req)
	}
	// m1 alone: generation 1, synced.
	m1 := join("").MemberID
	if r := join(m1); r.ErrorCode != 0 || r.Generation != 1 {
		t.Fatalf("m1 join: %+v", r)
	}
	sreq := kmsg.NewPtrSyncGroupRequest()
	sreq.Version = 5
	sreq.Group, sreq.MemberID, sreq.Generation = "w", m1, 1
	sreq.ProtocolType, sreq.Protocol = sp("consumer"), sp("range")
	sreq.GroupAssignment = []kmsg.SyncGroupRequestGroupAssignment{{MemberID: m1, MemberAssignment: []byte("a")}}
	if r := rawRequest[*kmsg.SyncGroupResponse](t, b, sreq); r.ErrorCode != 0 {
		t.Fatalf("m1 sync: %+v", r)
	}
	first := join("")
	if first.ErrorCode != kerr.MemberIDRequired.Code {
		t.Fatalf("first join: %+v", first)
	}
	// m1 never rejoins, so this join would wait for the rebalance
	// timeout (60 s); it is answered before the 2 s request timeout
	// closes the connection instead.
	start := time.Now()
	resp := join(first.MemberID)
	if resp.ErrorCode != kerr.RebalanceInProgress.Code || resp.MemberID != first.MemberID {
		t.Fatalf("waiting join: %+v", resp)
	}
	if el := time.Since(start); el > 2*time.Second {
		t.Fatalf("answered after %v, beyond the request timeout", el)
	}
	// m1 rejoins: the rebalance completes for both (the member that got
	// REBALANCE_IN_PROGRESS is answered again when it rejoins).
	if r := join(m1); r.ErrorCode != 0 || r.Generation != 2 {
		t.Fatalf("after m1 rejoined: %+v", r)
	}
	if again := join(first.MemberID); again.ErrorCode != 0 || again.Generation != 2 {
		t.Fatalf("rejoin of the member that got REBALANCE_IN_PROGRESS: %+v", again)
	}
}

package broker

// JoinGroup (key 11), versions 0-9.
//
// Behaviour: Kafka's classic group protocol (group_coordinator.go): the
// join phase of a rebalance with session and rebalance timeouts (v0: the
// rebalance timeout is the session timeout), the delayed first rebalance
// of an empty group (group.initial.rebalance.delay.ms, 3 s by default;
// serve --group-initial-rebalance-delay), protocol
// selection by vote, INCONSISTENT_GROUP_PROTOCOL, INVALID_SESSION_TIMEOUT
// (6 s..30 min, Kafka's broker defaults), KIP-394 (v4+: an unknown member
// first gets MEMBER_ID_REQUIRED with its id), KIP-345 static membership
// (v5+ group.instance.id: a rejoining instance replaces its old member id
// without a rebalance unless its subscription changed; the old id is
// fenced with FENCED_INSTANCE_ID), v7+ protocol type/name in the answer,
// v9 SkipAssignment for a static leader rejoining a stable group. The
// answer waits (deferred, the connection keeps reading) until the join
// phase ends.
//
// Deviations from Apache Kafka: a join cannot wait longer than the
// broker's --request-timeout (default 30 s); one second before it, the
// waiting join is answered REBALANCE_IN_PROGRESS and the client rejoins
// with its member id (Kafka holds the join up to the rebalance timeout).
// Reason (v8+) is only logged.

import (
	"context"
	"net"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func init() { register(kmsg.JoinGroup.Int16(), 0, 9, handleJoinGroup) }

func clientHost(r *Request) string {
	if r.Remote == nil {
		return ""
	}
	host, _, err := net.SplitHostPort(r.Remote.String())
	if err != nil {
		return "/" + r.Remote.String()
	}
	return "/" + host
}

func handleJoinGroup(_ context.Context, s *Server, r *Request) (Reply, error) {
	req := r.Msg.(*kmsg.JoinGroupRequest)
	jr := joinRequest{
		group: req.Group, memberID: req.MemberID, instanceID: req.InstanceID,
		protocolType: req.ProtocolType, protocols: req.Protocols,
		sessionTimeout:   time.Duration(req.SessionTimeoutMillis) * time.Millisecond,
		rebalanceTimeout: time.Duration(req.RebalanceTimeoutMillis) * time.Millisecond,
		clientID:         r.ClientID, clientHost: clientHost(r),
		requireKnownMember: req.Version >= 4, version: req.Version,
	}
	if req.Version == 0 {
		jr.rebalanceTimeout = jr.sessionTimeout
	}
	if req.Version < 5 {
		jr.instanceID = nil
	}
	if req.Reason != nil && *req.Reason != "" {
		s.log.Debug("join group", "group", req.Group, "member", req.MemberID, "reason", *req.Reason)
	}
	res, ch := s.groups.join(jr)
	if ch == nil {
		return joinResponse(req, res), nil
	}
	return Defer(joinAwait{req: req, ch: ch}), nil
}

type joinAwait struct {
	req *kmsg.JoinGroupRequest
	ch  chan joinResult
}

// awaitMargin is how long before the request deadline a waiting join or
// sync is answered REBALANCE_IN_PROGRESS instead of letting the deadline
// close the connection: clients rejoin with their member id at once, and
// a member that lost its join answer gets it again on that rejoin.
const awaitMargin = time.Second

// awaitTimeout is the channel that fires awaitMargin before ctx's deadline
// (nil: no deadline).
func awaitTimeout(ctx context.Context) (<-chan time.Time, func()) {
	dl, ok := ctx.Deadline()
	if !ok {
		return nil, func() {}
	}
	t := time.NewTimer(max(time.Until(dl)-awaitMargin, 0))
	return t.C, func() { t.Stop() }
}

func (j joinAwait) Await(ctx context.Context) (Reply, error) {
	timeout, stop := awaitTimeout(ctx)
	defer stop()
	select {
	case res := <-j.ch:
		return joinResponse(j.req, res), nil
	case <-timeout:
		return joinResponse(j.req, joinResult{code: kerr.RebalanceInProgress.Code, memberID: j.req.MemberID, generation: -1}), nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func joinResponse(req *kmsg.JoinGroupRequest, res joinResult) *kmsg.JoinGroupResponse {
	resp := req.ResponseKind().(*kmsg.JoinGroupResponse)
	resp.ErrorCode = res.code
	resp.Generation = res.generation
	resp.MemberID = res.memberID
	resp.LeaderID = res.leader
	resp.Protocol = nil
	if res.code == 0 {
		pt, p := res.protocolType, res.protocol
		resp.ProtocolType, resp.Protocol = &pt, &p
	} else if req.Version < 7 {
		empty := ""
		resp.Protocol = &empty
	}
	resp.SkipAssignment = res.skipAssignment
	resp.Members = res.members
	if req.Version < 5 {
		for i := range resp.Members {
			resp.Members[i].InstanceID = nil
		}
	}
	return resp
}

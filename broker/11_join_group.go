package broker

// JoinGroup (key 11), versions 0-9.
//
// Behaviour: Kafka's classic group protocol (groupcoord): the
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
// Authorization (with the authorizer on, authorize.go): READ on the group
// (GROUP_AUTHORIZATION_FAILED).
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

	"github.com/verbatim-kafka/verbatim/authz"
	"github.com/verbatim-kafka/verbatim/groupcoord"
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
	if !s.authorized(r, authz.OpRead, authz.ResourceGroup, req.Group) {
		return joinResponse(req, groupcoord.JoinResult{Code: kerr.GroupAuthorizationFailed.Code, Generation: -1}), nil
	}
	jr := groupcoord.JoinRequest{
		Group: req.Group, MemberID: req.MemberID, InstanceID: req.InstanceID,
		ProtocolType: req.ProtocolType, Protocols: req.Protocols,
		SessionTimeout:   time.Duration(req.SessionTimeoutMillis) * time.Millisecond,
		RebalanceTimeout: time.Duration(req.RebalanceTimeoutMillis) * time.Millisecond,
		ClientID:         r.ClientID, ClientHost: clientHost(r),
		RequireKnownMember: req.Version >= 4, Version: req.Version,
	}
	if req.Version == 0 {
		jr.RebalanceTimeout = jr.SessionTimeout
	}
	if req.Version < 5 {
		jr.InstanceID = nil
	}
	if req.Reason != nil && *req.Reason != "" {
		s.log.Debug("join group", "group", req.Group, "member", req.MemberID, "reason", *req.Reason)
	}
	res, ch := s.groups.Join(jr)
	if ch == nil {
		return joinResponse(req, res), nil
	}
	return Defer(joinAwait{req: req, ch: ch}), nil
}

type joinAwait struct {
	req *kmsg.JoinGroupRequest
	ch  chan groupcoord.JoinResult
}

// awaitMargin is how long before the request deadline a waiting join or
// sync is answered REBALANCE_IN_PROGRESS instead of letting the deadline
// close the connection: clients rejoin with their member id at once, and
// a member that lost its join answer gets it again on that rejoin.
const awaitMargin = time.Second

// awaitGroupResult waits for a join's or a sync's result on ch; awaitMargin
// before ctx's deadline it gives up with timedOut (REBALANCE_IN_PROGRESS).
// The error is ctx's when it ends first.
func awaitGroupResult[R any](ctx context.Context, ch <-chan R, timedOut R) (R, error) {
	var timeout <-chan time.Time // none without a deadline
	if dl, ok := ctx.Deadline(); ok {
		t := time.NewTimer(max(time.Until(dl)-awaitMargin, 0))
		defer t.Stop()
		timeout = t.C
	}
	select {
	case res := <-ch:
		return res, nil
	case <-timeout:
		return timedOut, nil
	case <-ctx.Done():
		var none R
		return none, ctx.Err()
	}
}

func (j joinAwait) Await(ctx context.Context) (Reply, error) {
	res, err := awaitGroupResult(ctx, j.ch, groupcoord.JoinResult{Code: kerr.RebalanceInProgress.Code, MemberID: j.req.MemberID, Generation: -1})
	if err != nil {
		return nil, err
	}
	return joinResponse(j.req, res), nil
}

func joinResponse(req *kmsg.JoinGroupRequest, res groupcoord.JoinResult) *kmsg.JoinGroupResponse {
	resp := req.ResponseKind().(*kmsg.JoinGroupResponse)
	resp.ErrorCode = res.Code
	resp.Generation = res.Generation
	resp.MemberID = res.MemberID
	resp.LeaderID = res.Leader
	resp.Protocol = nil
	if res.Code == 0 {
		pt, p := res.ProtocolType, res.Protocol
		resp.ProtocolType, resp.Protocol = &pt, &p
	} else if req.Version < 7 {
		empty := ""
		resp.Protocol = &empty
	}
	resp.SkipAssignment = res.SkipAssignment
	resp.Members = res.Members
	if req.Version < 5 {
		for i := range resp.Members {
			resp.Members[i].InstanceID = nil
		}
	}
	return resp
}

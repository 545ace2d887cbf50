package broker

// The link's topic requests: StartMirrorTopics, PauseMirrorTopics (pause
// and resume) and TruncateMirrorTopics (link_admin.go has the rules).

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/verbatim-kafka/verbatim/wireext"
)

// topicSplit is a request's topics after the per-topic check: the
// distinct names in request order, those the service gets, and the
// refused ones with their error.
type topicSplit struct {
	order   []string
	allowed []string
	refused map[string]error
}

func (s *Server) splitMirrorTopics(r *Request, topics []string, mayCreate bool) topicSplit {
	sp := topicSplit{refused: map[string]error{}}
	seen := make(map[string]bool, len(topics))
	for _, t := range topics {
		if seen[t] {
			continue
		}
		seen[t] = true
		sp.order = append(sp.order, t)
		if err := s.mirrorTopicRefusal(r, t, mayCreate); err != nil {
			sp.refused[t] = err
			continue
		}
		sp.allowed = append(sp.allowed, t)
	}
	return sp
}

// results merges the service's answers (or its error, for every topic it
// was given) with the refusals, in request order; topics the service
// answered that the request did not name (a whole link's) follow.
func (sp *topicSplit) results(got []wireext.MirrorTopicResult, err error) []wireext.MirrorTopicResult {
	byName := make(map[string]wireext.MirrorTopicResult, len(got))
	for _, g := range got {
		byName[g.Topic] = g
	}
	out := make([]wireext.MirrorTopicResult, 0, len(sp.order)+len(got))
	named := make(map[string]bool, len(sp.order))
	for _, t := range sp.order {
		named[t] = true
		res := wireext.MirrorTopicResult{Topic: t}
		if rerr, ok := sp.refused[t]; ok {
			res.ErrorCode, res.ErrorMessage = linkErr(rerr)
		} else if g, ok := byName[t]; ok && err == nil {
			res = g
		} else if err != nil {
			res.ErrorCode, res.ErrorMessage = linkErr(err)
		} else {
			res.ErrorCode, res.ErrorMessage = kerr.UnknownServerError.Code, "the link service answered nothing for this topic"
		}
		out = append(out, res)
	}
	for _, g := range got {
		if !named[g.Topic] && err == nil {
			out = append(out, g)
		}
	}
	return out
}

// topicsRefusal is the request-level check of the topic requests.
func (s *Server) topicsRefusal(r *Request, action string) error {
	if s.linkSvc() == nil {
		return errNoLinks
	}
	if !s.mirrorAdminPermitted(r) {
		return errMirrorAdminPermission(r, action)
	}
	return nil
}

func handleStartMirrorTopics(ctx context.Context, s *Server, r *Request) (Reply, error) {
	req, err := decodeLink[wireext.StartMirrorTopicsRequest](r)
	if err != nil {
		return nil, err
	}
	resp := &wireext.StartMirrorTopicsResponse{}
	err = s.topicsRefusal(r, "starting mirror topics of cluster link "+req.Link)
	if err == nil && (req.Link == "" || len(req.Topics) == 0) {
		err = kafkaErr(kerr.InvalidRequest, "StartMirrorTopics needs a link and at least one topic")
	}
	if err != nil {
		resp.ErrorCode, resp.ErrorMessage = linkErr(err)
		s.auditRecord(r, "start mirror topics", auditLinkType, req.Link, resp.ErrorCode, "topics", req.Topics)
		return linkReply{resp}, nil
	}
	sp := s.splitMirrorTopics(r, req.Topics, true)
	var got []wireext.MirrorTopicResult
	if len(sp.allowed) > 0 {
		sub := *req
		sub.Topics = sp.allowed
		got, err = s.linkSvc().StartMirrorTopics(ctx, r.Principal, sub)
	}
	resp.Topics = sp.results(got, err)
	for _, t := range resp.Topics {
		s.auditRecord(r, "start mirror topic", "TOPIC", t.Topic, t.ErrorCode, "link", req.Link,
			"truncate_to_common", req.TruncateToCommon, "keep_topic", auditString(req.KeepTopic), "truncated", truncations(t.Partitions))
	}
	return linkReply{resp}, nil
}

func handlePauseMirrorTopics(ctx context.Context, s *Server, r *Request) (Reply, error) {
	req, err := decodeLink[wireext.PauseMirrorTopicsRequest](r)
	if err != nil {
		return nil, err
	}
	action := "resume mirror topic"
	if req.Pause {
		action = "pause mirror topic"
	}
	resp := &wireext.PauseMirrorTopicsResponse{}
	err = s.topicsRefusal(r, action+"s")
	if err == nil && req.Link == "" && len(req.Topics) == 0 {
		err = kafkaErr(kerr.InvalidRequest, "PauseMirrorTopics needs a link or topics")
	}
	whole := len(req.Topics) == 0
	topics := req.Topics
	if err == nil && whole && s.acl != nil {
		// Each of the link's topics is checked.
		var st []wireext.MirrorPartitionStatus
		st, err = s.linkSvc().DescribeMirrors(ctx, wireext.DescribeMirrorsRequest{Link: req.Link})
		for _, p := range st {
			topics = append(topics, p.Topic)
		}
	}
	if err != nil {
		resp.ErrorCode, resp.ErrorMessage = linkErr(err)
		s.auditRecord(r, action+"s", auditLinkType, req.Link, resp.ErrorCode, "topics", req.Topics)
		return linkReply{resp}, nil
	}
	sp := s.splitMirrorTopics(r, topics, false)
	sub := *req
	var got []wireext.MirrorTopicResult
	if whole && len(sp.refused) == 0 {
		// The whole link, as asked (also topics it gains meanwhile).
		sp.order = nil
		got, err = s.linkSvc().PauseMirrorTopics(ctx, r.Principal, sub)
	} else if sub.Topics = sp.allowed; len(sub.Topics) > 0 {
		got, err = s.linkSvc().PauseMirrorTopics(ctx, r.Principal, sub)
	}
	if whole && len(sp.order) == 0 && err != nil {
		resp.ErrorCode, resp.ErrorMessage = linkErr(err)
	}
	resp.Topics = sp.results(got, err)
	if whole {
		s.auditRecord(r, action+"s", auditLinkType, req.Link, resp.ErrorCode, "topics", len(resp.Topics))
	}
	for _, t := range resp.Topics {
		s.auditRecord(r, action, "TOPIC", t.Topic, t.ErrorCode, "link", req.Link)
	}
	return linkReply{resp}, nil
}

func handleTruncateMirrorTopics(ctx context.Context, s *Server, r *Request) (Reply, error) {
	req, err := decodeLink[wireext.TruncateMirrorTopicsRequest](r)
	if err != nil {
		return nil, err
	}
	resp := &wireext.TruncateMirrorTopicsResponse{}
	err = s.topicsRefusal(r, "truncating mirror topics")
	if err == nil && len(req.Topics) == 0 {
		err = kafkaErr(kerr.InvalidRequest, "TruncateMirrorTopics needs at least one topic")
	}
	if err != nil {
		resp.ErrorCode, resp.ErrorMessage = linkErr(err)
		s.auditRecord(r, "truncate mirror topics", "TOPIC", "", resp.ErrorCode, "topics", req.Topics)
		return linkReply{resp}, nil
	}
	sp := s.splitMirrorTopics(r, req.Topics, false)
	var got []wireext.MirrorTopicResult
	if len(sp.allowed) > 0 {
		sub := *req
		sub.Topics = sp.allowed
		got, err = s.linkSvc().TruncateMirrorTopics(ctx, r.Principal, sub)
	}
	resp.Topics = sp.results(got, err)
	for _, t := range resp.Topics {
		s.auditRecord(r, "truncate mirror topic", "TOPIC", t.Topic, t.ErrorCode,
			"keep_topic", auditString(req.KeepTopic), "truncated", truncations(t.Partitions))
	}
	return linkReply{resp}, nil
}

// truncations describes what a truncation cut, for the audit log.
func truncations(ps []wireext.TruncatedPartition) []string {
	out := make([]string, 0, len(ps))
	for _, p := range ps {
		if p.TruncatedTo < 0 {
			out = append(out, fmt.Sprintf("%d: nothing removed", p.Partition))
			continue
		}
		out = append(out, fmt.Sprintf("%d: from offset %d, %d batches (%d bytes) kept in %s", p.Partition, p.TruncatedTo, p.RemovedBatches, p.RemovedBytes, p.KeptIn))
	}
	return out
}

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

func (s *Server) splitMirrorTopics(r *Request, topics []string, mayCreate bool, keep *string) topicSplit {
	sp := topicSplit{refused: map[string]error{}}
	seen := make(map[string]bool, len(topics))
	for _, t := range topics {
		if seen[t] {
			continue
		}
		seen[t] = true
		sp.order = append(sp.order, t)
		err := s.mirrorTopicRefusal(r, t, mayCreate)
		if err == nil && keep != nil {
			err = s.keepTopicRefusal(r, t, *keep)
		}
		if err != nil {
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
			res.ErrorCode, res.ErrorMessage = linkAnswer(rerr)
		} else if g, ok := byName[t]; ok && err == nil {
			res = g
		} else if err != nil {
			res.ErrorCode, res.ErrorMessage = linkAnswer(err)
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

// namedTopics is a topic request that names its topics (start,
// truncate): the request-level checks, then each topic's, then the
// service with the permitted ones; audited per topic (the request as a
// whole when refused before).
type namedTopics struct {
	action    string // audit action per topic: "start mirror topic"
	refusal   string // what the mirror permission's refusal names
	invalid   string // an INVALID_REQUEST message, "" when the request is well formed
	link      string // audited with a refusal of the whole request
	topics    []string
	mayCreate bool
	// keep is the keep topic of a request that may truncate (nil: it
	// does not): checked per topic (keepTopicRefusal).
	keep  *string
	call  func(allowed []string) ([]wireext.MirrorTopicResult, error)
	attrs func(t *wireext.MirrorTopicResult) []any
}

func (s *Server) runNamedTopics(r *Request, n namedTopics) (int16, string, []wireext.MirrorTopicResult) {
	err := s.topicsRefusal(r, n.refusal)
	if err == nil && n.invalid != "" {
		err = kafkaErr(kerr.InvalidRequest, n.invalid)
	}
	if err != nil {
		code, msg := linkAnswer(err)
		s.auditRecord(r, n.action+"s", auditLinkType, n.link, code, "topics", n.topics)
		return code, msg, nil
	}
	sp := s.splitMirrorTopics(r, n.topics, n.mayCreate, n.keep)
	var got []wireext.MirrorTopicResult
	if len(sp.allowed) > 0 {
		got, err = n.call(sp.allowed)
	}
	res := sp.results(got, err)
	for i := range res {
		s.auditRecord(r, n.action, "TOPIC", res[i].Topic, res[i].ErrorCode, n.attrs(&res[i])...)
	}
	return 0, "", res
}

func handleStartMirrorTopics(ctx context.Context, s *Server, r *Request) (Reply, error) {
	req, err := decodeLink[wireext.StartMirrorTopicsRequest](r)
	if err != nil {
		return nil, err
	}
	n := namedTopics{action: "start mirror topic", refusal: "starting mirror topics of cluster link " + req.Link, link: req.Link,
		topics: req.Topics, mayCreate: true,
		call: func(allowed []string) ([]wireext.MirrorTopicResult, error) {
			sub := *req
			sub.Topics = allowed
			return s.linkSvc().StartMirrorTopics(ctx, r.Principal, sub)
		},
		attrs: func(t *wireext.MirrorTopicResult) []any {
			return []any{"link", req.Link, "truncate_to_common", req.TruncateToCommon, "keep_topic", auditString(req.KeepTopic), "truncated", truncations(t.Partitions)}
		}}
	if req.Link == "" || len(req.Topics) == 0 {
		n.invalid = "StartMirrorTopics needs a link and at least one topic"
	}
	if req.TruncateToCommon {
		n.keep = &req.KeepTopic
	}
	resp := &wireext.StartMirrorTopicsResponse{}
	resp.ErrorCode, resp.ErrorMessage, resp.Topics = s.runNamedTopics(r, n)
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
		resp.ErrorCode, resp.ErrorMessage = linkAnswer(err)
		s.auditRecord(r, action+"s", auditLinkType, req.Link, resp.ErrorCode, "topics", req.Topics)
		return linkReply{resp}, nil
	}
	sp := s.splitMirrorTopics(r, topics, false, nil)
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
		resp.ErrorCode, resp.ErrorMessage = linkAnswer(err)
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
	n := namedTopics{action: "truncate mirror topic", refusal: "truncating mirror topics", topics: req.Topics, keep: &req.KeepTopic,
		call: func(allowed []string) ([]wireext.MirrorTopicResult, error) {
			sub := *req
			sub.Topics = allowed
			return s.linkSvc().TruncateMirrorTopics(ctx, r.Principal, sub)
		},
		attrs: func(t *wireext.MirrorTopicResult) []any {
			return []any{"keep_topic", auditString(req.KeepTopic), "truncated", truncations(t.Partitions)}
		}}
	if len(req.Topics) == 0 {
		n.invalid = "TruncateMirrorTopics needs at least one topic"
	}
	resp := &wireext.TruncateMirrorTopicsResponse{}
	resp.ErrorCode, resp.ErrorMessage, resp.Topics = s.runNamedTopics(r, n)
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

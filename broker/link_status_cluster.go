package broker

// DescribeMirrors on a cluster (docs/cluster.md "Cluster links on a
// cluster", "Status"): the leaders' view, from whichever broker is asked.
//
// A partition's copy runs on the broker that leads the destination
// partition, so its state, lag, rate and source high watermark are known
// there only. The broker that receives DescribeMirrors takes its own link
// manager's statuses, then asks every other live broker that leads some of
// those partitions (in its cluster snapshot) for them: one DescribeMirrors
// per broker with LeaderOnly, concurrently, over the inter-broker
// connections the coordinators use (peerConn: the inter-broker listener's
// TLS/SASL, authenticated as the broker), all within
// mirrorStatusPeerTimeout. Each answered partition replaces the local
// entry; a broker that does not answer (or answers an error) leaves its
// partitions' local entries, State unchanged, with a Reason saying so (and
// one rate-limited log line). Partitions without a leader, led here, or
// led by a broker that is not registered keep the local entry.
//
// A broker asked with LeaderOnly answers the partitions it leads only
// (LinkLeads) and never asks further. The brokers' principal passes with
// CLUSTER_ACTION on CLUSTER (an ACL or super.users; allow.everyone.if.no.
// acl.found does not grant it) or DESCRIBE as any client; with
// CLUSTER_ACTION the topic rows are not filtered by the asking broker's
// topic permissions — the broker that was asked by the client filters the
// merged answer by the client's.

import (
	"context"
	"fmt"
	"log/slog"
	"sort"
	"strconv"
	"sync"
	"time"

	"github.com/verbatim-kafka/verbatim/client"
	"github.com/verbatim-kafka/verbatim/clustermeta"
	"github.com/verbatim-kafka/verbatim/wireext"
)

// mirrorStatusPeerTimeout bounds the leaders' answers to one
// DescribeMirrors (a variable for the tests).
var mirrorStatusPeerTimeout = 5 * time.Second

// ledStatuses are the statuses of the partitions this broker leads (a
// copy: the service's answer is not changed).
func (s *Server) ledStatuses(st []wireext.MirrorPartitionStatus) []wireext.MirrorPartitionStatus {
	var out []wireext.MirrorPartitionStatus
	for _, p := range st {
		if s.LinkLeads(p.Topic, p.Partition) {
			out = append(out, p)
		}
	}
	return out
}

// leadersStatuses replaces, in a copy of local, the entries of partitions
// other live brokers lead with those brokers' own (see above).
func (s *Server) leadersStatuses(ctx context.Context, req wireext.DescribeMirrorsRequest, local []wireext.MirrorPartitionStatus) []wireext.MirrorPartitionStatus {
	snap := s.clusterSnapshot()
	if snap == nil || len(local) == 0 {
		return local
	}
	byLeader := map[int32][]int{} // leader -> indexes into local
	for i, p := range local {
		ps, ok := snap.Partition(p.Topic, p.Partition)
		if !ok || ps.Leader == clustermeta.NoLeader || ps.Leader == s.cfg.NodeID {
			continue
		}
		if _, live := snap.Brokers[ps.Leader]; !live {
			continue
		}
		byLeader[ps.Leader] = append(byLeader[ps.Leader], i)
	}
	if len(byLeader) == 0 {
		return local
	}
	out := append([]wireext.MirrorPartitionStatus(nil), local...)
	ctx, cancel := context.WithTimeout(ctx, mirrorStatusPeerTimeout)
	defer cancel()
	type answer struct {
		node int32
		st   []wireext.MirrorPartitionStatus
		err  error
	}
	answers := make(chan answer, len(byLeader))
	var wg sync.WaitGroup
	for node, idx := range byLeader {
		ask := wireext.DescribeMirrorsRequest{Link: req.Link, Topics: topicsOf(local, idx), LeaderOnly: true}
		wg.Add(1)
		go func() {
			defer wg.Done()
			st, err := s.askMirrorStatus(ctx, node, ask)
			answers <- answer{node, st, err}
		}()
	}
	wg.Wait()
	close(answers)
	for a := range answers {
		idx := byLeader[a.node]
		if a.err != nil {
			s.faults.Log(s.log, slog.LevelWarn, "mirror status\x00"+strconv.Itoa(int(a.node)),
				"mirror status: a partition leader did not answer; its partitions are answered from this broker's view",
				"leader", a.node, "partitions", len(idx), "err", a.err.Error())
			for _, i := range idx {
				p := &out[i]
				reason := fmt.Sprintf("leader broker %d did not answer (%v): this is broker %d's view", a.node, a.err, s.cfg.NodeID)
				if p.Reason != "" {
					reason += "; " + p.Reason
				}
				p.Reason = reason
			}
			continue
		}
		type tp struct {
			topic string
			part  int32
		}
		got := make(map[tp]*wireext.MirrorPartitionStatus, len(a.st))
		for j := range a.st {
			got[tp{a.st[j].Topic, a.st[j].Partition}] = &a.st[j]
		}
		for _, i := range idx {
			// A partition the leader did not report (its leadership moved
			// meanwhile) keeps the local entry.
			if g := got[tp{out[i].Topic, out[i].Partition}]; g != nil {
				out[i] = *g
			}
		}
	}
	return out
}

// topicsOf are the sorted distinct topics of local's entries idx.
func topicsOf(local []wireext.MirrorPartitionStatus, idx []int) []string {
	seen := map[string]bool{}
	var out []string
	for _, i := range idx {
		if t := local[i].Topic; !seen[t] {
			seen[t] = true
			out = append(out, t)
		}
	}
	sort.Strings(out)
	return out
}

// askMirrorStatus sends req to broker node over the inter-broker
// connection and returns its partitions; an error answer is an error.
func (s *Server) askMirrorStatus(ctx context.Context, node int32, req wireext.DescribeMirrorsRequest) ([]wireext.MirrorPartitionStatus, error) {
	conn, err := s.peerConn(ctx, node)
	if err != nil {
		return nil, err
	}
	body, err := conn.RequestRaw(ctx, &client.RawRequest{APIKey: wireext.APIKeyDescribeMirrors, Flexible: true, Body: req.AppendTo(nil)})
	if err != nil {
		s.dropPeer(node, conn)
		return nil, fmt.Errorf("broker %d: %w", node, err)
	}
	var resp wireext.DescribeMirrorsResponse
	if err := resp.ReadFrom(body); err != nil {
		return nil, fmt.Errorf("broker %d: %w", node, err)
	}
	if resp.ErrorCode != 0 {
		return nil, fmt.Errorf("broker %d answered %s: %s", node, codeName(resp.ErrorCode), resp.ErrorMessage)
	}
	return resp.Partitions, nil
}

// leadersTopicStates are, by link, its topics' states summarised from
// the leaders' view of every mirror partition (the local link manager
// knows only the copies this broker runs): one DescribeMirrors of the
// local manager and one ask of each other leader for all the links; nil
// when the local manager cannot answer.
func (s *Server) leadersTopicStates(ctx context.Context) map[string]map[string]string {
	req := wireext.DescribeMirrorsRequest{}
	local, err := s.linkSvc().DescribeMirrors(ctx, req)
	if err != nil {
		return nil
	}
	byLink := map[string][]wireext.MirrorPartitionStatus{}
	for _, st := range s.leadersStatuses(ctx, req, local) {
		byLink[st.Link] = append(byLink[st.Link], st)
	}
	out := make(map[string]map[string]string, len(byLink))
	for l, sts := range byLink {
		out[l] = wireext.TopicStates(sts)
	}
	return out
}

// withTopicStates is a copy of a link description's topics with the
// states in states where it has one; the skipped topics (no partition
// status) are kept as the service answered them.
func withTopicStates(topics []wireext.LinkTopic, states map[string]string) []wireext.LinkTopic {
	out := make([]wireext.LinkTopic, 0, len(topics))
	for _, t := range topics {
		if st, ok := states[t.Topic]; ok {
			t.State = st
		}
		out = append(out, t)
	}
	return out
}

package broker

import (
	"context"
	"fmt"
	"net"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/verbatim-kafka/verbatim/authz"
	"github.com/verbatim-kafka/verbatim/clustermeta"
	"github.com/verbatim-kafka/verbatim/wireext"
)

// viewLinks is a recLinks whose DescribeMirrors also records LeaderOnly:
// each broker's link manager with its own view of every partition.
type viewLinks struct{ *recLinks }

func (f viewLinks) DescribeMirrors(_ context.Context, r wireext.DescribeMirrorsRequest) ([]wireext.MirrorPartitionStatus, error) {
	return f.statuses, f.record("describe mirrors %s %v leader-only=%v", r.Link, r.Topics, r.LeaderOnly)
}

// mirrorStatus is one status row of the tests.
func mirrorStatus(topic, link, state, reason string, hw, lag int64) wireext.MirrorPartitionStatus {
	return wireext.MirrorPartitionStatus{Topic: topic, Link: link, State: state, Reason: reason, SourceHighWatermark: hw,
		LogEndOffset: hw - lag, Lag: lag, LastMirroredOffset: -1, LastMirroredEpoch: -1, DivergenceOffset: -1}
}

// statusCluster is two brokers, each with its own view: push mirror "m"
// led by broker 2, link "east"'s topic "n" led by broker 1, and "u" led
// by a registered broker 3 that answers nothing (its port is closed).
func statusCluster(t *testing.T) (*replCluster, map[int32]viewLinks) {
	t.Helper()
	c := newReplCluster(t, 2, nil)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	ep := clustermeta.Endpoint{Listener: "PLAINTEXT", SecurityProtocol: "PLAINTEXT", Host: "127.0.0.1", Port: int32(port)}
	if _, err := c.store.Register(ctxT(t), clustermeta.BrokerInfo{NodeID: 3, Endpoints: []clustermeta.Endpoint{ep}}, 60); err != nil {
		t.Fatal(err)
	}
	c.createTopic("m", []int32{2, 1}, nil)
	c.createTopic("n", []int32{1, 2}, nil)
	c.createTopic("u", []int32{3}, nil)
	views := map[int32]viewLinks{
		1: {&recLinks{statuses: []wireext.MirrorPartitionStatus{
			mirrorStatus("m", "", wireext.StateMirroring, "", -1, 0),
			mirrorStatus("n", "east", wireext.StateMirroring, "", 50, 1),
			mirrorStatus("u", "east", wireext.StatePaused, "paused by the operator", -1, 0),
		}}},
		2: {&recLinks{statuses: []wireext.MirrorPartitionStatus{
			mirrorStatus("m", "", wireext.StateMirroring, "", 15, 5),
			mirrorStatus("n", "east", wireext.StatePreparing, "", -1, 0),
			mirrorStatus("u", "east", wireext.StatePaused, "paused by the operator", -1, 0),
		}}},
	}
	for id, v := range views {
		c.nodes[id].srv().SetLinkService(v)
	}
	return c, views
}

// TestMirrorStatusLeadersView: DescribeMirrors through broker 1 answers
// broker 2's entry for the partition broker 2 leads (push mirrors too),
// its own for the one it leads, and keeps its own entry, with the reason,
// for the one whose leader does not answer; broker 2 was asked with
// LeaderOnly for that partition's topic only and did not ask further.
func TestMirrorStatusLeadersView(t *testing.T) {
	c, views := statusCluster(t)
	b1 := c.nodes[1].b
	resp := linkCall[wireext.DescribeMirrorsResponse](t, b1, "", wireext.APIKeyDescribeMirrors, &wireext.DescribeMirrorsRequest{})
	if resp.ErrorCode != 0 || len(resp.Partitions) != 3 {
		t.Fatalf("answer %d %q, %d partitions: %+v", resp.ErrorCode, resp.ErrorMessage, len(resp.Partitions), resp.Partitions)
	}
	if got, want := resp.Partitions[0], views[2].statuses[0]; !reflect.DeepEqual(got, want) {
		t.Fatalf("m-0 (led by broker 2) answered %+v, want broker 2's %+v", got, want)
	}
	if got, want := resp.Partitions[1], views[1].statuses[1]; !reflect.DeepEqual(got, want) {
		t.Fatalf("n-0 (led by broker 1) answered %+v, want broker 1's %+v", got, want)
	}
	u := resp.Partitions[2]
	if u.State != wireext.StatePaused || !strings.HasPrefix(u.Reason, "leader broker 3 did not answer") ||
		!strings.HasSuffix(u.Reason, "; paused by the operator") {
		t.Fatalf("u-0 (leader broker 3 unreachable) answered %+v", u)
	}
	if got, want := views[2].took(), []string{"describe mirrors  [m] leader-only=true"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("broker 2 was asked %q, want %q", got, want)
	}
	if got, want := views[1].took(), []string{"describe mirrors  [] leader-only=false"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("broker 1's manager was asked %q, want %q", got, want)
	}
	// The service's own answer was not changed by the merge.
	if views[1].statuses[0].SourceHighWatermark != -1 || views[1].statuses[2].Reason != "paused by the operator" {
		t.Fatalf("broker 1's service statuses changed: %+v", views[1].statuses)
	}

	// A link's request names the link to the leaders.
	resp = linkCall[wireext.DescribeMirrorsResponse](t, b1, "", wireext.APIKeyDescribeMirrors, &wireext.DescribeMirrorsRequest{Link: "east", Topics: []string{"m", "n"}})
	if resp.ErrorCode != 0 || len(resp.Partitions) != 3 || resp.Partitions[0].SourceHighWatermark != 15 {
		t.Fatalf("link request answered %d %q %+v", resp.ErrorCode, resp.ErrorMessage, resp.Partitions)
	}
	if got, want := views[2].took(), []string{"describe mirrors east [m] leader-only=true"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("broker 2 was asked %q, want %q", got, want)
	}
}

// TestMirrorStatusLeaderOnly: asked with LeaderOnly, a broker answers the
// partitions it leads from its own manager and asks no other broker.
func TestMirrorStatusLeaderOnly(t *testing.T) {
	c, views := statusCluster(t)
	resp := linkCall[wireext.DescribeMirrorsResponse](t, c.nodes[2].b, "", wireext.APIKeyDescribeMirrors, &wireext.DescribeMirrorsRequest{LeaderOnly: true})
	if resp.ErrorCode != 0 || !reflect.DeepEqual(resp.Partitions, views[2].statuses[:1]) {
		t.Fatalf("LeaderOnly answered %d %q %+v, want broker 2's m-0 only", resp.ErrorCode, resp.ErrorMessage, resp.Partitions)
	}
	if got := views[1].took(); len(got) != 0 {
		t.Fatalf("a LeaderOnly request asked broker 1: %q", got)
	}
	if got, want := views[2].took(), []string{"describe mirrors  [] leader-only=true"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("broker 2's manager was asked %q, want %q", got, want)
	}
}

// TestMirrorStatusLeaderChange: after leadership of m moves to broker 1,
// broker 1 answers m-0 from its own view and asks nobody.
func TestMirrorStatusLeaderChange(t *testing.T) {
	c, views := statusCluster(t)
	c.elect("m", 1, []int32{1, 2})
	resp := linkCall[wireext.DescribeMirrorsResponse](t, c.nodes[1].b, "", wireext.APIKeyDescribeMirrors, &wireext.DescribeMirrorsRequest{Topics: []string{"m"}})
	if resp.ErrorCode != 0 || len(resp.Partitions) == 0 || !reflect.DeepEqual(resp.Partitions[0], views[1].statuses[0]) {
		t.Fatalf("after the election answered %d %q %+v", resp.ErrorCode, resp.ErrorMessage, resp.Partitions)
	}
	if got := views[2].took(); len(got) != 0 {
		t.Fatalf("broker 2 was asked %q after losing m's leadership", got)
	}
}

// TestMirrorMetricsLedOnly: on a cluster a broker's mirror metrics hold
// the partitions it leads only, so every partition is counted once.
func TestMirrorMetricsLedOnly(t *testing.T) {
	c, _ := statusCluster(t)
	for id, wantLag := range map[int32]float64{1: 1, 2: 5} {
		s := c.nodes[id].srv()
		s.RegisterMirrorMetrics(func() []wireext.MirrorPartitionStatus {
			return []wireext.MirrorPartitionStatus{
				mirrorStatus("m", "l", wireext.StateMirroring, "", 15, 5),
				mirrorStatus("n", "l", wireext.StateMirroring, "", 50, 1),
				mirrorStatus("u", "l", wireext.StateMirroring, "", 50, 9),
			}
		})
		mfs, err := s.metrics.Gatherer().Gather()
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]string{}
		for _, mf := range mfs {
			for _, m := range mf.GetMetric() {
				if n := mf.GetName(); strings.HasPrefix(n, "kafka_server_mirrorpartitionmetrics_lag") || strings.HasPrefix(n, "kafka_server_link_") {
					got[n] += fmt.Sprintf("%v;", m.GetGauge().GetValue())
				}
			}
		}
		if got["kafka_server_mirrorpartitionmetrics_lag"] != fmt.Sprintf("%v;", wantLag) || got["kafka_server_link_clusterlinkfetchermanager_maxlag"] != fmt.Sprintf("%v;", wantLag) {
			t.Fatalf("broker %d exports %v, want one partition with lag %v", id, got, wantLag)
		}
	}
}

// TestMirrorStatusLeaderOnlyACLs: LeaderOnly passes with CLUSTER_ACTION
// (the brokers' permission, which allow.everyone.if.no.acl.found does not
// grant) and then answers every row it leads; without it the request is
// authorized and filtered as any DescribeMirrors.
func TestMirrorStatusLeaderOnlyACLs(t *testing.T) {
	b := startBroker(t, t.TempDir(), withACLs(func(c *Config) { c.AllowEveryoneIfNoACLFound = true }))
	links := &recLinks{statuses: []wireext.MirrorPartitionStatus{{Topic: "a", State: wireext.StateMirroring}, {Topic: "b", State: wireext.StatePaused}}}
	b.srv.SetLinkService(links)
	createTopic(t, b, "a", 1, nil)
	createTopic(t, b, "b", 1, nil)
	grant(t, b, mallory, authz.PermDeny, "TOPIC:b:DESCRIBE")
	topics := func(leaderOnly bool, wantCode int16) []string {
		t.Helper()
		resp := linkCall[wireext.DescribeMirrorsResponse](t, b, malloryIP, wireext.APIKeyDescribeMirrors, &wireext.DescribeMirrorsRequest{LeaderOnly: leaderOnly})
		if resp.ErrorCode != wantCode {
			t.Fatalf("leader-only=%v: %v %s, want %v", leaderOnly, kerr.ErrorForCode(resp.ErrorCode), resp.ErrorMessage, kerr.ErrorForCode(wantCode))
		}
		var out []string
		for _, p := range resp.Partitions {
			out = append(out, p.Topic)
		}
		return out
	}
	if got := topics(true, 0); !reflect.DeepEqual(got, []string{"a"}) {
		t.Fatalf("LeaderOnly without CLUSTER_ACTION answered %q, want the DESCRIBE-filtered [a]", got)
	}
	grant(t, b, mallory, authz.PermAllow, "CLUSTER:kafka-cluster:CLUSTER_ACTION")
	if got := topics(true, 0); !reflect.DeepEqual(got, []string{"a", "b"}) {
		t.Fatalf("LeaderOnly with CLUSTER_ACTION answered %q, want [a b]", got)
	}
	// CLUSTER_ACTION is not DESCRIBE (and with an ACL on CLUSTER,
	// allow.everyone no longer grants that): a client's request is
	// refused.
	if got := topics(false, kerr.ClusterAuthorizationFailed.Code); got != nil {
		t.Fatalf("a refused request answered %q", got)
	}
}

// TestMirrorStatusSilentLeader: a leader that takes the connection and
// never answers holds the answer no longer than the bound; its partition
// keeps the local row with the reason.
func TestMirrorStatusSilentLeader(t *testing.T) {
	defer func(d time.Duration) { mirrorStatusPeerTimeout = d }(mirrorStatusPeerTimeout)
	mirrorStatusPeerTimeout = 200 * time.Millisecond
	c := newReplCluster(t, 1, nil)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			nc, err := ln.Accept()
			if err != nil {
				return
			}
			defer nc.Close() // read nothing, answer nothing
		}
	}()
	port := ln.Addr().(*net.TCPAddr).Port
	ep := clustermeta.Endpoint{Listener: "PLAINTEXT", SecurityProtocol: "PLAINTEXT", Host: "127.0.0.1", Port: int32(port)}
	if _, err := c.store.Register(ctxT(t), clustermeta.BrokerInfo{NodeID: 2, Endpoints: []clustermeta.Endpoint{ep}}, 60); err != nil {
		t.Fatal(err)
	}
	c.createTopic("m", []int32{2}, nil)
	c.nodes[1].srv().SetLinkService(viewLinks{&recLinks{statuses: []wireext.MirrorPartitionStatus{mirrorStatus("m", "", wireext.StateMirroring, "", -1, 0)}}})
	resp := linkCall[wireext.DescribeMirrorsResponse](t, c.nodes[1].b, "", wireext.APIKeyDescribeMirrors, &wireext.DescribeMirrorsRequest{})
	if resp.ErrorCode != 0 || len(resp.Partitions) != 1 || resp.Partitions[0].State != wireext.StateMirroring ||
		!strings.HasPrefix(resp.Partitions[0].Reason, "leader broker 2 did not answer") || !strings.Contains(resp.Partitions[0].Reason, "deadline") {
		t.Fatalf("with a silent leader answered %d %q %+v", resp.ErrorCode, resp.ErrorMessage, resp.Partitions)
	}
}

// TestLinkDescribeLeadersView: a link's topics as DescribeMirrorLinks
// shows them through a broker that leads none of them are summarised
// from the leaders' statuses (broker 2's own copy of n is PREPARING: it
// runs none; broker 1, n's leader, says MIRRORING); a skipped topic stays
// as the service answered it.
func TestLinkDescribeLeadersView(t *testing.T) {
	c, views := statusCluster(t)
	views[2].links = []wireext.LinkDescription{{Config: wireext.LinkConfig{Name: "east"}, State: "ACTIVE", Topics: []wireext.LinkTopic{
		{Topic: "n", State: wireext.StatePreparing},
		{Topic: "plain", State: wireext.StateSkipped, Reason: "an existing ordinary topic"},
	}}}
	resp := linkCall[wireext.DescribeMirrorLinksResponse](t, c.nodes[2].b, "", wireext.APIKeyDescribeMirrorLinks, &wireext.DescribeMirrorLinksRequest{Names: []string{"east"}})
	if resp.ErrorCode != 0 || len(resp.Links) != 1 {
		t.Fatalf("answer %d %q %+v", resp.ErrorCode, resp.ErrorMessage, resp.Links)
	}
	got := resp.Links[0].Topics
	want := []wireext.LinkTopic{{Topic: "n", State: wireext.StateMirroring}, {Topic: "plain", State: wireext.StateSkipped, Reason: "an existing ordinary topic"}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("topics %+v, want %+v", got, want)
	}
	if views[2].links[0].Topics[0].State != wireext.StatePreparing {
		t.Fatal("the service's own answer was changed")
	}
}

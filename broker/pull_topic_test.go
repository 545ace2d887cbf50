package broker

import (
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/verbatim-kafka/verbatim/mirror"
)

// A pull-mode topic (mirror.mode=pull, mirror.link) is a mirror topic for
// clients and for the stop, and refuses the pushers' wire mirror writes:
// its cluster link owns it.
func TestPullTopicRules(t *testing.T) {
	b := startBroker(t, t.TempDir(), nil)
	adm := b.admin()
	ctx := ctxT(t)
	// mirror.link goes with mirror.mode=pull, and pull with a link.
	for _, cfgs := range []map[string]*string{
		{"mirror.mode": sp("pull")},
		{"mirror.mode": sp("push"), "mirror.link": sp("l1")},
		{"mirror.link": sp("l1")},
		{"mirror.mode": sp("pull"), "mirror.link": sp("")},
	} {
		if resp, err := adm.CreateTopic(ctx, 1, 1, cfgs, "bad"); err == nil && resp.Err == nil {
			t.Fatalf("created a topic with configs %v", cfgs)
		} else if resp.Err != nil && !strings.Contains(resp.Err.Error(), "INVALID_CONFIG") {
			t.Fatalf("configs %v: %v", cfgs, resp.Err)
		}
	}
	createTopic(t, b, "p", 1, map[string]*string{"mirror.mode": sp("pull"), "mirror.link": sp("l1"), "mirror.source.cluster.id": sp("src")})

	// An ordinary producer is refused, naming the link.
	err := b.client(kgo.DefaultProduceTopic("p"), kgo.RequiredAcks(kgo.AllISRAcks())).ProduceSync(ctx, &kgo.Record{Value: []byte("x")}).FirstErr()
	if err == nil || !strings.Contains(err.Error(), "POLICY_VIOLATION") {
		t.Fatalf("ordinary produce to a pull topic: %v", err)
	}
	// A wire mirror produce is refused, naming the link.
	pr := rawRequest[*kmsg.ProduceResponse](t, b, mirrorProduce(11, "p", 0, data(0, 1, 1).encode(t), 0, -1)).Topics[0].Partitions[0]
	if pr.ErrorCode != kerr.PolicyViolation.Code || !strings.Contains(strPtr(pr.ErrorMessage), "cluster link l1") {
		t.Fatalf("wire mirror produce to a pull topic: %v %q", kerr.ErrorForCode(pr.ErrorCode), strPtr(pr.ErrorMessage))
	}
	// A writer registration and a mirror log-start forward are refused.
	for _, epoch := range []int32{-1, 0} {
		req := registration("p", writerID{1}, 0)
		if epoch >= 0 {
			req = mirror.DeleteRecordsRequest(mirror.Writer{Epoch: epoch, ID: writerID{1}}, map[string][]int32{"p": {0}}, 0)
		}
		rp := rawRequest[*kmsg.DeleteRecordsResponse](t, b, req).Topics[0].Partitions[0]
		if rp.ErrorCode != kerr.PolicyViolation.Code {
			t.Fatalf("mirror DeleteRecords (writer epoch %d) to a pull topic: %v", epoch, kerr.ErrorForCode(rp.ErrorCode))
		}
	}
	// Clients' DeleteRecords are refused as on any mirror topic.
	drq := kmsg.NewPtrDeleteRecordsRequest()
	drt := kmsg.NewDeleteRecordsRequestTopic()
	drt.Topic = "p"
	drp := kmsg.NewDeleteRecordsRequestTopicPartition()
	drt.Partitions = append(drt.Partitions, drp)
	drq.Topics = append(drq.Topics, drt)
	if rp := rawRequest[*kmsg.DeleteRecordsResponse](t, b, drq).Topics[0].Partitions[0]; rp.ErrorCode != kerr.PolicyViolation.Code {
		t.Fatalf("client DeleteRecords on a pull topic: %v", kerr.ErrorForCode(rp.ErrorCode))
	}
	// mirror.link is read-only like mirror.mode.
	if err, msg := incrementalAlter(t, b, "p", false, iacSet("mirror.link", "l2")); err == nil {
		t.Fatal("mirror.link was changed")
	} else if !strings.Contains(msg, "mirror.link") {
		t.Fatalf("changing mirror.link: %v %s", err, msg)
	}
	if err, msg := incrementalAlter(t, b, "p", false, iacDelete("mirror.link")); err == nil {
		t.Fatalf("mirror.link was deleted alone: %s", msg)
	}
	// The stop works on pull topics and removes mirror.link too.
	if err, msg := incrementalAlter(t, b, "p", false, iacDelete("mirror.mode")); err != nil {
		t.Fatalf("mirror stop of a pull topic: %v %s", err, msg)
	}
	ov := b.srv.Topic("p").Config().Overrides()
	for _, k := range []string{"mirror.mode", "mirror.link", "mirror.source.cluster.id"} {
		if _, ok := ov[k]; ok {
			t.Fatalf("after the stop the topic still has %s: %v", k, ov)
		}
	}
	if err := b.client(kgo.DefaultProduceTopic("p")).ProduceSync(ctx, &kgo.Record{Value: []byte("x")}).FirstErr(); err != nil {
		t.Fatalf("produce after the stop: %v", err)
	}
}

package link

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/verbatim-kafka/verbatim/internal/testkit"
	"github.com/verbatim-kafka/verbatim/wireext"
)

// A link mirrors a compressed topic and a transactional one (a commit
// and an abort) exactly; pause stops its appends and resume continues
// without gap or duplicate; a restart of broker and manager resumes, a
// paused topic staying paused; mirror stop moves the partitions to
// STOPPED and the topic becomes writable; an existing ordinary topic and
// an internal one that match are skipped; delete is refused while
// partitions mirror, and forced leaves them FAILED "link deleted".
func TestLinkLifecycle(t *testing.T) {
	src := testkit.StartSource(t, kfake.SeedTopics(2, "zstd"), kfake.SeedTopics(1, "txn", "plain", "__inner"))
	sa := src.ListenAddrs()[0]
	d := testkit.StartDest(t, t.TempDir())
	ctx := context.Background()
	adm := testkit.Client(t, d.Addr)
	if _, err := kadmCreate(ctx, adm, "plain"); err != nil {
		t.Fatal(err)
	}
	zc := testkit.Client(t, sa, kgo.ProducerBatchCompression(kgo.ZstdCompression()), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	for p := int32(0); p < 2; p++ {
		produce(t, zc, "zstd", p, 200, "first")
	}
	tc := testkit.Client(t, sa, kgo.TransactionalID("tx"), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	for _, commit := range []bool{true, false, true} {
		if err := tc.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		produce(t, tc, "txn", 0, 5, "txn")
		if err := tc.EndTransaction(testkit.Ctx(t), kgo.TransactionEndTry(commit)); err != nil {
			t.Fatal(err)
		}
	}

	m := openManager(t, d)
	cfg := wireext.LinkConfig{Name: "l1", SourceBootstrap: sa, Topics: "zstd|txn|plain|__.*"}
	if err := m.CreateLink(ctx, "User:admin", wireext.LinkConfig{Name: "bad/name", SourceBootstrap: sa}, false); !errors.Is(err, kerr.InvalidRequest) {
		t.Fatalf("bad link name: %v", err)
	}
	if err := m.CreateLink(ctx, "User:admin", wireext.LinkConfig{Name: "l0", SourceBootstrap: sa, Topics: "("}, false); !errors.Is(err, kerr.InvalidConfig) {
		t.Fatalf("bad pattern: %v", err)
	}
	if err := m.CreateLink(ctx, "User:admin", cfg, false); err != nil {
		t.Fatal(err)
	}
	if err := m.CreateLink(ctx, "User:admin", cfg, false); !errors.Is(err, kerr.InvalidRequest) {
		t.Fatalf("second create: %v", err)
	}
	all := []string{"zstd/0", "zstd/1", "txn/0"}
	for p, st := range waitState(t, m, "l1", wireext.StateMirroring, all...) {
		if st.LastMirroredOffset != st.LogEndOffset-1 || st.LastMirroredEpoch < 0 || st.LagMs != 0 || st.Link != "l1" || st.DivergenceOffset != -1 {
			t.Fatalf("%s mirroring: %+v", p, st)
		}
	}
	for _, tp := range []struct {
		t string
		p int32
	}{{"zstd", 0}, {"zstd", 1}, {"txn", 0}} {
		sameLog(t, sa, d.Addr, tp.t, tp.p)
	}
	// Everything fetched was appended: the fetch buffer holds nothing.
	m.mu.Lock()
	r := m.links["l1"]
	m.mu.Unlock()
	if n := r.fetch.budget.inUse(); n != 0 {
		t.Fatalf("caught up, the link's fetch buffer still counts %d bytes", n)
	}
	descs, err := m.DescribeLinks(ctx, nil)
	if err != nil || len(descs) != 1 {
		t.Fatalf("describe links: %v %+v", err, descs)
	}
	got := map[string]wireext.LinkTopic{}
	for _, lt := range descs[0].Topics {
		got[lt.Topic] = lt
	}
	if got["plain"].State != wireext.StateSkipped || !strings.Contains(got["plain"].Reason, "ordinary") ||
		got["__inner"].State != wireext.StateSkipped || !strings.Contains(got["__inner"].Reason, "internal") ||
		got["zstd"].State != wireext.StateMirroring || descs[0].State != linkActive || descs[0].SourceClusterID == "" {
		t.Fatalf("link description %+v", descs[0])
	}
	if info, _ := d.Srv.LinkTopic("zstd"); info.MirrorMode != "pull" || info.MirrorLink != "l1" {
		t.Fatalf("destination topic %+v", info)
	}

	// Pause: no appends; resume continues exactly.
	if res, err := m.PauseMirrorTopics(ctx, "User:admin", wireext.PauseMirrorTopicsRequest{Link: "l1", Topics: []string{"zstd"}, Pause: true}); err != nil || res[0].ErrorCode != 0 {
		t.Fatalf("pause: %v %+v", err, res)
	}
	paused := waitState(t, m, "l1", wireext.StatePaused, "zstd/0", "zstd/1")
	produce(t, zc, "zstd", 0, 50, "while-paused")
	waitRounds(t, m, "l1", 3)
	if st := statuses(t, m, "l1")["zstd/0"]; st.State != wireext.StatePaused || st.LogEndOffset != paused["zstd/0"].LogEndOffset ||
		st.Lag != 50 || st.SourceHighWatermark != st.LogEndOffset+50 || st.LagMs <= 0 {
		t.Fatalf("paused partition: %+v, was %+v", st, paused["zstd/0"])
	}
	if _, err := m.PauseMirrorTopics(ctx, "User:admin", wireext.PauseMirrorTopicsRequest{Link: "l1", Topics: []string{"zstd"}}); err != nil {
		t.Fatal(err)
	}
	waitState(t, m, "l1", wireext.StateMirroring, all...)
	sameLog(t, sa, d.Addr, "zstd", 0)

	// Restart with txn paused: it stays paused, the rest resumes.
	if _, err := m.PauseMirrorTopics(ctx, "User:admin", wireext.PauseMirrorTopicsRequest{Topics: []string{"txn"}, Pause: true}); err != nil {
		t.Fatal(err)
	}
	produce(t, zc, "zstd", 1, 100, "before-restart")
	m, d = restart(t, m, d)
	produce(t, zc, "zstd", 1, 100, "after-restart")
	waitState(t, m, "l1", wireext.StateMirroring, "zstd/0", "zstd/1")
	waitState(t, m, "l1", wireext.StatePaused, "txn/0")
	sameLog(t, sa, d.Addr, "zstd", 1)
	if _, err := m.PauseMirrorTopics(ctx, "User:admin", wireext.PauseMirrorTopicsRequest{Link: "l1"}); err != nil {
		t.Fatal(err)
	}
	waitState(t, m, "l1", wireext.StateMirroring, all...)
	sameLog(t, sa, d.Addr, "txn", 0)

	// Delete is refused while partitions mirror.
	if err := m.DeleteLink(ctx, "User:admin", "l1", false); !errors.Is(err, kerr.InvalidRequest) {
		t.Fatalf("delete of a mirroring link: %v", err)
	}
	// mirror stop (the broker's): STOPPED, writable.
	stopTopic(t, d.Addr, "zstd")
	waitState(t, m, "l1", wireext.StateStopped, "zstd/0", "zstd/1")
	if err := testkit.Client(t, d.Addr, kgo.DefaultProduceTopic("zstd")).ProduceSync(testkit.Ctx(t), &kgo.Record{Value: []byte("local")}).FirstErr(); err != nil {
		t.Fatalf("produce after the stop: %v", err)
	}
	waitRounds(t, m, "l1", 2)
	if st := statuses(t, m, "l1")["zstd/0"]; st.State != wireext.StateStopped {
		t.Fatalf("a stopped topic came back: %+v", st)
	}
	// Force: the rest FAILED "link deleted".
	if err := m.DeleteLink(ctx, "User:admin", "l1", true); err != nil {
		t.Fatal(err)
	}
	sts, err := m.DescribeMirrors(ctx, wireext.DescribeMirrorsRequest{Topics: []string{"txn"}})
	if err != nil || len(sts) != 1 || sts[0].State != wireext.StateFailed || sts[0].Reason != reasonLinkDeleted {
		t.Fatalf("after a forced delete: %v %+v", err, sts)
	}
	if ds, _ := m.DescribeLinks(ctx, []string{"l1"}); len(ds) != 1 || ds[0].ErrorCode != kerr.ResourceNotFound.Code {
		t.Fatalf("describe of a deleted link: %+v", ds)
	}
	// Deleted for good: a restart does not bring it back.
	m, _ = restart(t, m, d)
	if ds, _ := m.DescribeLinks(ctx, nil); len(ds) != 0 {
		t.Fatalf("links after restart: %+v", ds)
	}
}

func kadmCreate(ctx context.Context, cl *kgo.Client, topic string) (*kmsg.CreateTopicsResponse, error) {
	req := kmsg.NewPtrCreateTopicsRequest()
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = topic, 1, 1
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, cl)
	if err == nil {
		err = kerr.ErrorForCode(resp.Topics[0].ErrorCode)
	}
	return resp, err
}

// stopTopic runs the mirror stop: an IncrementalAlterConfigs DELETE of
// mirror.mode.
func stopTopic(t *testing.T, addr, topic string) {
	t.Helper()
	req := kmsg.NewPtrIncrementalAlterConfigsRequest()
	rr := kmsg.NewIncrementalAlterConfigsRequestResource()
	rr.ResourceType, rr.ResourceName = kmsg.ConfigResourceTypeTopic, topic
	c := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
	c.Name, c.Op = "mirror.mode", kmsg.IncrementalAlterConfigOpDelete
	rr.Configs = append(rr.Configs, c)
	req.Resources = append(req.Resources, rr)
	resp, err := req.RequestWith(testkit.Ctx(t), testkit.Client(t, addr))
	if err == nil {
		err = kerr.ErrorForCode(resp.Resources[0].ErrorCode)
	}
	if err != nil {
		t.Fatalf("mirror stop of %s: %v", topic, err)
	}
}

// Topics named by StartMirrorTopics are mirrored whatever the patterns;
// new source partitions become destination partitions; an ordinary
// destination topic is refused without TruncateToCommon, which answers
// "not available" until failback exists.
func TestLinkStartTopicsAndPartitions(t *testing.T) {
	src := testkit.StartSource(t, kfake.SeedTopics(1, "a", "b"))
	sa := src.ListenAddrs()[0]
	d := testkit.StartDest(t, t.TempDir())
	ctx := context.Background()
	if _, err := kadmCreate(ctx, testkit.Client(t, d.Addr), "b"); err != nil {
		t.Fatal(err)
	}
	cl := testkit.Client(t, sa, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	produce(t, cl, "a", 0, 20, "a")
	m := openManager(t, d)
	if err := m.CreateLink(ctx, "User:admin", wireext.LinkConfig{Name: "l2", SourceBootstrap: "nohost"}, false); !errors.Is(err, kerr.InvalidConfig) {
		t.Fatalf("a bootstrap address without a port: %v", err)
	}
	// A bootstrap list whose first address does not answer.
	if err := m.CreateLink(ctx, "User:admin", wireext.LinkConfig{Name: "l2", SourceBootstrap: "127.0.0.1:1, " + sa}, false); err != nil {
		t.Fatal(err)
	}
	res, err := m.StartMirrorTopics(ctx, "User:admin", wireext.StartMirrorTopicsRequest{Link: "l2", Topics: []string{"a", "b", "missing", "__x"}})
	if err != nil {
		t.Fatal(err)
	}
	want := []int16{0, kerr.TopicAlreadyExists.Code, kerr.UnknownTopicOrPartition.Code, kerr.InvalidTopicException.Code}
	for i, r := range res {
		if r.ErrorCode != want[i] {
			t.Fatalf("start %s: %d %s, want code %d", r.Topic, r.ErrorCode, r.ErrorMessage, want[i])
		}
	}
	// truncate-to-common is link-repair's (repair_manager_test.go); an
	// internal topic is refused there too.
	if res, err := m.StartMirrorTopics(ctx, "User:admin", wireext.StartMirrorTopicsRequest{Link: "l2", Topics: []string{"__x"}, TruncateToCommon: true}); err != nil || res[0].ErrorCode != kerr.InvalidRequest.Code {
		t.Fatalf("truncate-to-common of an internal topic: %v %+v", err, res)
	}
	waitState(t, m, "l2", wireext.StateMirroring, "a/0")
	// A partition added on the source is added and mirrored.
	req := kmsg.NewPtrCreatePartitionsRequest()
	rt := kmsg.NewCreatePartitionsRequestTopic()
	rt.Topic, rt.Count = "a", 2
	req.Topics = append(req.Topics, rt)
	if _, err := req.RequestWith(testkit.Ctx(t), testkit.Client(t, sa)); err != nil {
		t.Fatal(err)
	}
	produce(t, testkit.Client(t, sa, kgo.RecordPartitioner(kgo.ManualPartitioner())), "a", 1, 10, "new")
	waitState(t, m, "l2", wireext.StateMirroring, "a/0", "a/1")
	sameLog(t, sa, d.Addr, "a", 1)
}

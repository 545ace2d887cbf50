package link

import (
	"context"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"

	"github.com/verbatim-kafka/verbatim/internal/testkit"
	"github.com/verbatim-kafka/verbatim/wireext"
)

// A source that no longer holds what was mirrored (here the source topic
// deleted and re-created shorter) puts the partition in FAILED by
// divergence with the offset where the logs part; the failure survives a
// restart and a resume (only truncation or a stop clears it). A source
// that goes away puts the link UNAVAILABLE and, after the retry bound,
// the partitions in FAILED "source unreachable".
func TestLinkFailures(t *testing.T) {
	// A source without topic ids (Metadata below v10, Kafka 2.7): there
	// the re-created topic cannot be told by its id (continuous sync
	// fails it as "source topic re-created" where ids exist, sync.go), so
	// only the copy's divergence check sees that the log changed.
	src := testkit.StartSource(t, kfake.SeedTopics(1, "t", "u"), kfake.MaxVersions(kversion.V2_7_0()))
	sa := src.ListenAddrs()[0]
	d := testkit.StartDest(t, t.TempDir())
	ctx := context.Background()
	cl := testkit.Client(t, sa, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	produce(t, cl, "t", 0, 50, "before")
	produce(t, cl, "u", 0, 5, "u")
	m := openManagerRetry(t, d, time.Second)
	if err := m.CreateLink(ctx, "User:admin", wireext.LinkConfig{Name: "f", SourceBootstrap: sa, Topics: "t|u"}, false); err != nil {
		t.Fatal(err)
	}
	waitState(t, m, "f", wireext.StateMirroring, "t/0", "u/0")

	adm := testkit.Client(t, sa)
	del := kmsg.NewPtrDeleteTopicsRequest()
	del.TopicNames = []string{"t"}
	dt := kmsg.NewDeleteTopicsRequestTopic()
	dt.Topic = kmsg.StringPtr("t")
	del.Topics = append(del.Topics, dt)
	if _, err := del.RequestWith(testkit.Ctx(t), adm); err != nil {
		t.Fatal(err)
	}
	if _, err := kadmCreate(ctx, adm, "t"); err != nil {
		t.Fatal(err)
	}
	produce(t, testkit.Client(t, sa, kgo.RecordPartitioner(kgo.ManualPartitioner())), "t", 0, 10, "after")
	t1 := time.Now()
	st := waitState(t, m, "f", wireext.StateFailed, "t/0")["t/0"]
	t.Logf("divergence detected after %v", time.Since(t1))
	if !strings.HasPrefix(st.Reason, "divergence") || st.DivergenceOffset != 10 {
		t.Fatalf("diverged partition: %+v", st)
	}
	if v := counterValue(d.Srv.MirrorTopicMetrics("t").MirrorDivergences); v != 1 {
		t.Fatalf("verbatim_mirror_divergences_total{topic=t} = %v, want 1", v)
	}
	if v := counterValue(d.Srv.MirrorTopicMetrics("u").ReplicationBytesIn); v < 61 {
		t.Fatalf("replicationbytesin{topic=u} = %v, want at least the mirrored batch's bytes", v)
	}
	m, d = restart(t, m, d)
	if _, err := m.PauseMirrorTopics(ctx, "User:admin", wireext.PauseMirrorTopicsRequest{Link: "f", Topics: []string{"t"}}); err != nil {
		t.Fatal(err)
	}
	waitRounds(t, m, "f", 2)
	if st := statuses(t, m, "f")["t/0"]; st.State != wireext.StateFailed || st.DivergenceOffset != 10 {
		t.Fatalf("divergence after restart and resume: %+v", st)
	}
	waitState(t, m, "f", wireext.StateMirroring, "u/0")

	t0 := time.Now()
	src.Close()
	defer func() { t.Logf("unreachable detected after %v", time.Since(t0)) }()
	st = waitState(t, m, "f", wireext.StateFailed, "u/0")["u/0"]
	if !strings.HasPrefix(st.Reason, "source unreachable") {
		t.Fatalf("partition of a vanished source: %+v", st)
	}
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		ds, _ := m.DescribeLinks(ctx, []string{"f"})
		if ds[0].State == linkUnavailable && ds[0].Reason != "" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("link of a vanished source: %+v", ds[0])
		}
	}
}

// counterValue reads a Prometheus counter.
func counterValue(c prometheus.Counter) float64 {
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		return -1
	}
	return m.GetCounter().GetValue()
}

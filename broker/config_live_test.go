package broker

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestTopicConfigChangeAppliesToLiveLogs: segment.ms and retention.ms set
// with IncrementalAlterConfigs take effect on the running broker, as in
// Kafka: the next append rolls a new segment and the next retention pass
// deletes the expired ones, without a restart.
func TestTopicConfigChangeAppliesToLiveLogs(t *testing.T) {
	b := startBroker(t, t.TempDir(), nil)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cl := b.client(kgo.RecordPartitioner(kgo.ManualPartitioner()))
	adm := kadm.NewClient(cl)
	if _, err := adm.CreateTopic(ctx, 1, 1, nil, "live"); err != nil {
		t.Fatal(err)
	}
	base := time.Now().Add(-time.Hour).Truncate(time.Millisecond)
	produce := func(i int) {
		t.Helper()
		r := &kgo.Record{Topic: "live", Value: []byte("v"), Timestamp: base.Add(time.Duration(i) * time.Minute)}
		if err := cl.ProduceSync(ctx, r).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	segments := func() int {
		t.Helper()
		l, err := partitionLog(b.srv.cluster.topic("live").Partitions()[0])
		if err != nil {
			t.Fatal(err)
		}
		return l.NumSegments()
	}
	produce(0)
	produce(1)
	if n := segments(); n != 1 {
		t.Fatalf("%d segments with the default segment.ms, want 1", n)
	}
	alter := func(k, v string) {
		t.Helper()
		rs, err := adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Op: kadm.SetConfig, Name: k, Value: &v}}, "live")
		if err == nil {
			_, err = rs.On("live", nil)
		}
		if err != nil {
			t.Fatalf("set %s=%s: %v", k, v, err)
		}
	}
	alter("segment.ms", "1000")
	produce(2) // a minute after the segment's first batch: rolls
	produce(3)
	if n := segments(); n < 3 {
		t.Fatalf("%d segments after segment.ms=1000 and two appends a minute apart, want a roll at each", n)
	}
	b.srv.applyRetention(time.Now().UnixMilli())
	if n := segments(); n < 3 {
		t.Fatalf("retention with the default retention.ms deleted segments: %d left", n)
	}
	alter("retention.ms", "60000")
	b.srv.applyRetention(time.Now().UnixMilli())
	offs, err := adm.ListStartOffsets(ctx, "live")
	if err != nil {
		t.Fatal(err)
	}
	o, _ := offs.Lookup("live", 0)
	if o.Offset < 3 {
		t.Fatalf("log start %d after retention.ms=60000 on hour-old records, want at least 3 (only the active segment kept)", o.Offset)
	}
}

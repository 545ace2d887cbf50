package mirror

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/verbatim-kafka/verbatim/internal/testkit"
)

// TestPushGroups copies committed offsets of matching groups with their
// leader epoch and metadata, clamped into the destination's range, and
// skips groups that have members on the destination.
func TestPushGroups(t *testing.T) {
	src := testkit.StartSource(t, kfake.SeedTopics(2, "t"))
	sa := src.ListenAddrs()[0]
	dst := testkit.StartDest(t, t.TempDir())
	pc := testkit.Client(t, sa, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	produceBatches(t, pc, "t", 5, 4) // partition 0: offsets 0-19
	if err := pc.ProduceSync(testkit.Ctx(t), &kgo.Record{Topic: "t", Partition: 1, Value: []byte("a")}, &kgo.Record{Topic: "t", Partition: 1, Value: []byte("b")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	sadm := kadmClient(t, sa)
	commit := func(adm *kadm.Client, group string, offs ...kadm.Offset) {
		t.Helper()
		os := kadm.Offsets{}
		for _, o := range offs {
			os.Add(o)
		}
		r, err := adm.CommitOffsets(testkit.Ctx(t), group, os)
		if err == nil {
			err = r.Error()
		}
		if err != nil {
			t.Fatalf("commit %s: %v", group, err)
		}
	}
	commit(sadm, "app-1", kadm.Offset{Topic: "t", Partition: 0, At: 7, LeaderEpoch: 0, Metadata: "m0"}, kadm.Offset{Topic: "t", Partition: 1, At: 500, LeaderEpoch: 0, Metadata: "beyond"})
	commit(sadm, "app-busy", kadm.Offset{Topic: "t", Partition: 0, At: 3, LeaderEpoch: 0})
	commit(sadm, "other", kadm.Offset{Topic: "t", Partition: 0, At: 2, LeaderEpoch: 0})

	// "app-busy" has a live member on the destination once the topic
	// exists there.
	if _, err := Push(testkit.Ctx(t), Options{Source: sa, Dest: dst.Addr, Topics: []string{"t"}, CreateTopics: true}); err != nil {
		t.Fatal(err)
	}
	busy := testkit.Client(t, dst.Addr, kgo.ConsumerGroup("app-busy"), kgo.ConsumeTopics("t"), kgo.SessionTimeout(30*time.Second))
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		busy.PollRecords(context.Background(), 1) // joins
		ds, err := kadmClient(t, dst.Addr).DescribeGroups(testkit.Ctx(t), "app-busy")
		if err == nil && len(ds["app-busy"].Members) > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("consumer did not join app-busy on the destination: %v", err)
		}
	}
	re, err := CompileGroups("app-.*")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Push(testkit.Ctx(t), Options{Source: sa, Dest: dst.Addr, Topics: []string{"t"}, Groups: re}); err != nil {
		t.Fatalf("push --groups: %v", err)
	}
	dadm := kadmClient(t, dst.Addr)
	got, err := dadm.FetchOffsets(testkit.Ctx(t), "app-1")
	if err != nil {
		t.Fatal(err)
	}
	p0, _ := got.Lookup("t", 0)
	p1, _ := got.Lookup("t", 1)
	if p0.At != 7 || p0.LeaderEpoch != 0 || p0.Metadata != "m0" {
		t.Fatalf("app-1 t/0 on the destination: %+v", p0.Offset)
	}
	if p1.At != 2 || p1.Metadata != "beyond" { // clamped to the log end
		t.Fatalf("app-1 t/1 on the destination: %+v, want offset clamped to 2", p1.Offset)
	}
	if busyOffs, err := dadm.FetchOffsets(testkit.Ctx(t), "app-busy"); err != nil {
		t.Fatal(err)
	} else if o, ok := busyOffs.Lookup("t", 0); ok && o.At == 3 {
		t.Fatalf("offsets copied into a group with active members: %+v", o)
	}
	if others, err := dadm.FetchOffsets(testkit.Ctx(t), "other"); err == nil {
		if o, ok := others.Lookup("t", 0); ok && o.At >= 0 {
			t.Fatalf("non-matching group copied: %+v", o)
		}
	}
}

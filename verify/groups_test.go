package verify

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/verbatim-kafka/verbatim/internal/testkit"
	"github.com/verbatim-kafka/verbatim/mirror"
)

func TestVerifyGroups(t *testing.T) {
	src := testkit.StartSource(t, kfake.SeedTopics(1, "t"))
	sa := src.ListenAddrs()[0]
	dst := startDest(t)
	produce(t, testkit.Client(t, sa, kgo.DefaultProduceTopic("t")), &kgo.Record{Value: []byte("a")}, &kgo.Record{Value: []byte("b")}, &kgo.Record{Value: []byte("c")})
	commit := func(addr, group string, at int64, md string) {
		t.Helper()
		os := kadm.Offsets{}
		os.Add(kadm.Offset{Topic: "t", Partition: 0, At: at, LeaderEpoch: 0, Metadata: md})
		r, err := kadm.NewClient(testkit.Client(t, addr)).CommitOffsets(testkit.Ctx(t), group, os)
		if err == nil {
			err = r.Error()
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	commit(sa, "g1", 2, "meta")
	re, _ := mirror.CompileGroups("g.*")
	if _, err := mirror.Push(testkit.Ctx(t), mirror.Options{Source: sa, Dest: dst, Topics: []string{"t"}, CreateTopics: true, Groups: re}); err != nil {
		t.Fatal(err)
	}
	rep, err := Run(testkit.Ctx(t), Options{Source: sa, Dest: dst, Topics: []string{"t"}, Groups: re})
	if err != nil {
		t.Fatal(err)
	}
	if !rep.Exact || len(rep.Groups) != 1 || rep.Groups[0].Status != Identical || rep.Groups[0].DestOffset != 2 {
		t.Fatalf("after push --groups: exact %v groups %+v", rep.Exact, rep.Groups)
	}
	// A different commit on the destination is a mismatch naming the field.
	commit(dst, "g1", 2, "changed")
	rep, err = Run(testkit.Ctx(t), Options{Source: sa, Dest: dst, Topics: []string{"t"}, Groups: re})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Exact || rep.ExitCode() != 1 || rep.Groups[0].Status != Mismatch || rep.Groups[0].Field != "metadata" {
		t.Fatalf("after a different commit: exact %v groups %+v", rep.Exact, rep.Groups)
	}
	commit(dst, "g1", 1, "meta")
	rep, _ = Run(testkit.Ctx(t), Options{Source: sa, Dest: dst, Topics: []string{"t"}, Groups: re})
	if rep.Exact || rep.Groups[0].Field != "offset" || rep.Groups[0].DestOffset != 1 {
		t.Fatalf("after a rewound commit: %+v", rep.Groups)
	}
}

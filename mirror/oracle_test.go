package mirror

import (
	"regexp"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/verbatim-kafka/verbatim/client"
	"github.com/verbatim-kafka/verbatim/internal/testkit"
	"github.com/verbatim-kafka/verbatim/verify"
)

// TestVerifyCatchesWrongGroupClamp runs a push whose group-offset clamp is
// wrong (off by one at the log end: a commit at the destination's log end
// is copied one lower, so a re-pointed consumer would read the last record
// again) and then verify, in process. Verify must report the group's
// offset as a mismatch.
//
// The verifier used to take its expectation from the pusher's own code:
// it called ExpectedGroupOffsets, which applies the very clamp the pusher
// copies with, so with this bug it expected the wrong offset and found it
// on the destination — "identical", exit 0. The test shows that: the
// pusher's own ExpectedGroupOffsets agrees with the broken commit. Verify
// now clamps on its own from the offsets both clusters answer, and so
// sees the difference.
func TestVerifyCatchesWrongGroupClamp(t *testing.T) {
	_, sa, dst := startPushPair(t)
	produceBatches(t, testkit.Client(t, sa), "t", 5, 2) // offsets 0-9, log end 10
	os := kadm.Offsets{}
	os.Add(kadm.Offset{Topic: "t", Partition: 0, At: 10, LeaderEpoch: 0, Metadata: "caught up"})
	if r, err := kadmClient(t, sa).CommitOffsets(testkit.Ctx(t), "app", os); err != nil || r.Error() != nil {
		t.Fatalf("commit on the source: %v %v", err, r.Error())
	}

	clampOffset = func(offset, logStart, logEnd int64) int64 { return max(logStart, min(offset, logEnd-1)) }
	t.Cleanup(func() { clampOffset = Clamp })
	groups := regexp.MustCompile("^(?:app)$")
	if _, err := Push(testkit.Ctx(t), Options{Source: sa, Dest: dst.Addr, Topics: []string{"t"}, CreateTopics: true, Groups: groups}); err != nil {
		t.Fatalf("push: %v (exit %d)", err, ExitCode(err))
	}

	// What the old verifier compared against: the pusher's expectation,
	// which carries the same bug as the commit.
	scl, err := client.NewCluster(sa, client.Options{ClientID: "test"})
	if err != nil {
		t.Fatal(err)
	}
	defer scl.Close()
	dcl, err := client.NewCluster(dst.Addr, client.Options{ClientID: "test"})
	if err != nil {
		t.Fatal(err)
	}
	defer dcl.Close()
	so, err := client.FetchGroupOffsets(testkit.Ctx(t), scl, "app", []string{"t"})
	if err != nil {
		t.Fatal(err)
	}
	shared, err := ExpectedGroupOffsets(testkit.Ctx(t), dcl, so)
	if err != nil {
		t.Fatal(err)
	}
	do, err := client.FetchGroupOffsets(testkit.Ctx(t), dcl, "app", []string{"t"})
	if err != nil {
		t.Fatal(err)
	}
	if len(shared) != 1 || len(do) != 1 || shared[0].Offset != 9 || do[0].Offset != 9 {
		t.Fatalf("the doctored pusher should commit 9 and expect 9: expected %+v, committed %+v", shared, do)
	}

	rep, err := verify.Run(testkit.Ctx(t), verify.Options{Source: sa, Dest: dst.Addr, Topics: []string{"t"}, Groups: groups})
	if err != nil {
		t.Fatalf("verify could not run: %v", err)
	}
	if rep.Exact || rep.ExitCode() != ExitRefused || len(rep.Groups) != 1 {
		t.Fatalf("verify passed a wrong group commit: exact %v, exit %d, groups %+v", rep.Exact, rep.ExitCode(), rep.Groups)
	}
	g := rep.Groups[0]
	if g.Group != "app" || g.Topic != "t" || g.Partition != 0 || g.Status != verify.Mismatch || g.Field != "offset" ||
		g.SourceOffset != 10 || g.Expected != 10 || g.DestOffset != 9 {
		t.Fatalf("group report %+v, want app t/0 offset mismatch: expected 10, destination 9", g)
	}
	// The data itself is exact: only the group offset is wrong.
	for _, p := range rep.Partitions {
		if p.Status != verify.Identical {
			t.Fatalf("partition %+v", p)
		}
	}
}

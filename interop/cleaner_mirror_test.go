package interop

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/verbatim-kafka/verbatim/internal/testkit"
)

// logBytes is the size of a partition directory's segment files.
func logBytes(t testing.TB, dir string) int64 {
	t.Helper()
	var n int64
	for _, f := range segmentFiles(t, dir, ".log") {
		if st, err := os.Stat(f); err == nil {
			n += st.Size()
		}
	}
	return n
}

// TestCleanerMirrorFollowBounded: `mirror push --follow --groups` copies a
// compacted Kafka topic (10 keys rewritten over and over, ~5.5 MB written)
// into Verbatim, which cleans the mirror with its own cleaner. Kafka's
// broker default min compaction lag (20 s, not a topic config, so not
// copied) keeps the source behind the destination. After every phase of
// writes the destination stays bounded (at most its active segment and a
// little more than one rolled segment per phase, where the source keeps
// everything it has not yet cleaned), and verify, with the pusher caught
// up, exits 0: compacted-equivalent once the destination cleaned what the
// source still holds. A group consumer that read part of the topic on
// Kafka and committed continues on Verbatim from the copied commit
// (auto.offset.reset none) and ends with the source's latest value of
// every key.
func TestCleanerMirrorFollowBounded(t *testing.T) {
	k := StartKafka(t, KafkaOptions{Props: map[string]string{"log.cleaner.backoff.ms": "100", "log.cleaner.min.compaction.lag.ms": "20000"}})
	bin := BuildVerbatim(t)
	v := StartVerbatim(t, bin, VerbatimOptions{Args: []string{"--log-cleaner-backoff-ms", "100"}})
	const topic, group, keys, perPhase, phases = "cfollow", "cfollow-group", 10, 1200, 5
	k.CreateTopic(t, topic, 1, 1, map[string]string{"cleanup.policy": "compact", "segment.bytes": "1048576", "min.cleanable.dirty.ratio": "0.01"})
	src := k.Bootstrap()
	cl := k.Client(t, kgo.DefaultProduceTopic(topic), kgo.ProducerBatchCompression(kgo.NoCompression()), kgo.ProducerBatchMaxBytes(64<<10))
	follower := StartProc(t, "pusher-follow", filepath.Join(t.TempDir(), "push.log"), t.TempDir(), nil,
		bin, "mirror", "push", "--source", src, "--dest", v.Addr, "--topics", topic, "--create-topics", "--follow",
		"--groups", group, "--log-format", "json")
	vDir := filepath.Join(v.DataDir, topic+"-0")
	written, n := int64(0), 0
	statuses := map[string]int{}
	var committed int64 = -1
	for phase := 0; phase < phases; phase++ {
		var rs []*kgo.Record
		for i := 0; i < perPhase; i++ {
			r := &kgo.Record{Key: []byte(fmt.Sprintf("key-%d", n%keys)), Value: cleanerValue("f", n/keys, n%keys)}
			written += int64(len(r.Key) + len(r.Value))
			rs = append(rs, r)
			n++
		}
		produceSync(t, cl, rs...)
		waitSameEnds(t, follower, src, v.Addr, topic)
		size := logBytes(t, vDir)
		if bound := int64(1<<20 + (phase+1)*(1<<20)/2 + 1<<20); phase > 1 && size > bound {
			t.Fatalf("phase %d: the mirror holds %d bytes (%d written), over %d", phase, size, written, bound)
		}
		vj := runVerify(t, bin, src, v.Addr, topic, 0)
		statuses[vj.Partitions[0].Status]++
		t.Logf("phase %d: %d record bytes written, mirror %d bytes, verify %s", phase, written, size, vj.Partitions[0].Status)
		if phase == 1 {
			committed = consumeAndCommit(t, src, topic, group)
		}
	}
	// The mirror settles at its live data: the active segment plus the
	// cleaned ten keys.
	deadline := time.Now().Add(30 * time.Second)
	for logBytes(t, vDir) > 1<<20+256<<10 {
		if time.Now().After(deadline) {
			t.Fatalf("the mirror still holds %d bytes (%d written)", logBytes(t, vDir), written)
		}
		time.Sleep(200 * time.Millisecond)
	}
	if statuses["compacted-equivalent"] == 0 {
		t.Fatalf("verify never said compacted-equivalent: %v", statuses)
	}
	follower.Signal(syscall.SIGTERM)
	if !follower.Wait(30*time.Second) || follower.ExitCode() != 0 {
		t.Fatalf("the following pusher after SIGTERM: exit %d\n%s", follower.ExitCode(), follower.LogTail(20))
	}
	// The follower copies group commits on its 30 s metadata refresh; a
	// last one-shot push copies them now.
	runPush(t, bin, src, v.Addr, 0, "--topics", topic, "--groups", group)
	want := latestCommitted(t, src, topic)
	got := continueGroup(t, v.Addr, topic, group, committed)
	if len(got) != keys {
		t.Fatalf("the re-pointed consumer read %d keys, want %d", len(got), keys)
	}
	for key, val := range want {
		if got[key] != val {
			t.Fatalf("key %s: the re-pointed consumer ends with %.20q..., the source holds %.20q...", key, got[key], val)
		}
	}
	t.Logf("verify statuses %v; mirror %d bytes, source %d bytes, for %d written; the consumer continued from %d", statuses,
		logBytes(t, vDir), logBytes(t, filepath.Join(k.Nodes[0].DataDir, topic+"-0")), written, committed)
}

// consumeAndCommit reads topic on addr in group up to its current end and
// commits; it returns the committed offset.
func consumeAndCommit(t *testing.T, addr, topic, group string) int64 {
	t.Helper()
	end := endOffsets(t, addr, topic)[0]
	cl := testkit.Client(t, addr, kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic), kgo.DisableAutoCommit(),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	pollTo(t, cl, addr, end, func(*kgo.Record) {})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := cl.CommitUncommittedOffsets(ctx); err != nil {
		t.Fatal(err)
	}
	cl.Close()
	return end
}

// continueGroup consumes topic on addr in group from its committed offset
// (no reset allowed) to the end and returns the latest value per key.
func continueGroup(t *testing.T, addr, topic, group string, from int64) map[string]string {
	t.Helper()
	end := endOffsets(t, addr, topic)[0]
	cl := testkit.Client(t, addr, kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic), kgo.DisableAutoCommit(),
		kgo.ConsumeResetOffset(kgo.NoResetOffset()))
	got := map[string]string{}
	first := true
	pollTo(t, cl, addr, end, func(r *kgo.Record) {
		if first && r.Offset < from {
			t.Errorf("the re-pointed consumer started at %d, before the commit %d", r.Offset, from)
		}
		first = false
		got[string(r.Key)] = string(r.Value)
	})
	return got
}

// readToEnd reads partition 0 of topic on addr from its start up to the
// log end it has now, calling fn with every record; opts add to the
// consumer's options (an isolation level).
func readToEnd(t *testing.T, addr, topic string, fn func(*kgo.Record), opts ...kgo.Opt) {
	t.Helper()
	end := endOffset(t, kadm.NewClient(testkit.Client(t, addr)), topic)
	cl := testkit.Client(t, addr, append(opts, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {0: kgo.NewOffset().AtStart()}}))...)
	pollTo(t, cl, addr, end, fn)
}

// pollTo polls cl until it returned the record at end-1, calling fn with
// every record.
func pollTo(t *testing.T, cl *kgo.Client, addr string, end int64, fn func(*kgo.Record)) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for seen := int64(-1); seen < end-1; {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("consumer on %s: timed out at %d of %d", addr, seen, end)
		}
		if errs := fs.Errors(); len(errs) > 0 {
			t.Fatalf("consumer on %s: %v", addr, errs)
		}
		fs.EachRecord(func(r *kgo.Record) {
			seen = r.Offset
			fn(r)
		})
	}
}

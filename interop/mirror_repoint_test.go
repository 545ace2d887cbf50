package interop

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/verbatim-kafka/verbatim/internal/testkit"
)

// recordLine is how the re-pointing test prints a record, in Go and in
// testdata/mirror_repoint_confluent.py alike: partition, offset, leader
// epoch and the value in hex.
func recordLine(p int32, offset int64, epoch int32, value []byte) string {
	return fmt.Sprintf("%d\t%d\t%d\t%x", p, offset, epoch, value)
}

// readPartitions reads every record of topic's partitions [0, len(ends))
// up to ends[p] from addr with kgo (read_uncommitted) and returns them as
// recordLines per partition.
func readPartitions(t *testing.T, addr, topic string, ends []int64) [][]string {
	t.Helper()
	starts := map[int32]kgo.Offset{}
	for p := range ends {
		starts[int32(p)] = kgo.NewOffset().AtStart()
	}
	cl := testkit.Client(t, addr, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: starts}))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	out := make([][]string, len(ends))
	done := func() bool {
		for p, e := range ends {
			if n := len(out[p]); e > 0 && (n == 0 || !strings.HasPrefix(out[p][n-1], fmt.Sprintf("%d\t%d\t", p, e-1))) {
				return false
			}
		}
		return true
	}
	for !done() {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("reading %s on %s: timed out", topic, addr)
		}
		if errs := fs.Errors(); len(errs) > 0 {
			t.Fatalf("reading %s on %s: %v", topic, addr, errs)
		}
		fs.EachRecord(func(r *kgo.Record) {
			if r.Offset < ends[r.Partition] {
				out[r.Partition] = append(out[r.Partition], recordLine(r.Partition, r.Offset, r.LeaderEpoch, r.Value))
			}
		})
	}
	return out
}

// runConfluentRepoint runs testdata/mirror_repoint_confluent.py and
// returns its stdout lines and its stderr (librdkafka's log).
func runConfluentRepoint(t *testing.T, mode, bootstrap, topic, group string, limits []int64) ([]string, string) {
	t.Helper()
	script, err := os.ReadFile(filepath.Join("testdata", "mirror_repoint_confluent.py"))
	if err != nil {
		t.Fatal(err)
	}
	var l []string
	for p, o := range limits {
		l = append(l, fmt.Sprintf("%d:%d", p, o))
	}
	res, err := RunPython(t, Cmd{Timeout: 2 * time.Minute}, string(script), mode, bootstrap, topic, group, strings.Join(l, ","))
	if err != nil {
		t.Fatalf("confluent-kafka consumer (%s): %v", mode, err)
	}
	return res.Lines(), res.Stderr
}

// librdkafkaResetOrTruncation matches librdkafka log lines that report an
// offset reset or a detected log truncation.
var librdkafkaResetOrTruncation = regexp.MustCompile(`(?i)truncat|offset reset|resetting offset|auto\.offset\.reset`)

// testRepointConfluent: a confluent-kafka group reads part of topic on the
// Kafka source (partitions' records span two leader epochs) and commits;
// `mirror push --groups` copies the commits; the same group on Verbatim,
// with auto.offset.reset=error, continues with exactly the remaining
// records, after librdkafka validated the committed positions with
// OffsetForLeaderEpoch against Verbatim.
func testRepointConfluent(t *testing.T, bin string, k *Kafka, dst, topic string, stopAt, ends []int64) {
	src := k.Bootstrap()
	const group = "repoint-confluent"
	all := readPartitions(t, src, topic, ends)
	for p := range ends {
		if first, last := all[p][0], all[p][len(all[p])-1]; strings.Split(first, "\t")[2] == strings.Split(last, "\t")[2] {
			t.Fatalf("partition %d: records span one leader epoch only (%q ... %q); the test needs two", p, first, last)
		}
	}

	// On the source: read up to stopAt and commit.
	lines, _ := runConfluentRepoint(t, "source", src, topic, group, stopAt)
	got := make([][]string, len(ends))
	for _, l := range lines {
		var p int32
		if _, err := fmt.Sscanf(l, "%d\t", &p); err != nil || p < 0 || int(p) >= len(ends) {
			t.Fatalf("source consumer printed %q", l)
		}
		got[p] = append(got[p], l)
	}
	for p := range ends {
		if want := all[p][:stopAt[p]]; !slices.Equal(got[p], want) {
			t.Fatalf("source consumer, partition %d: %s", p, diffLines(got[p], want))
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	committed, err := k.Admin(t).FetchOffsets(ctx, group)
	if err != nil {
		t.Fatal(err)
	}
	var wantCommitted []string
	for p := range ends {
		o, ok := committed.Lookup(topic, int32(p))
		lastEpoch := strings.Split(all[p][stopAt[p]-1], "\t")[2]
		if !ok || o.At != stopAt[p] || fmt.Sprint(o.LeaderEpoch) != lastEpoch {
			t.Fatalf("source group commit for partition %d: %+v, want offset %d epoch %s", p, o.Offset, stopAt[p], lastEpoch)
		}
		wantCommitted = append(wantCommitted, fmt.Sprintf("COMMITTED\t%d\t%d\t%d", p, o.At, o.LeaderEpoch))
	}

	runPush(t, bin, src, dst, 0, "--topics", topic, "--create-topics", "--groups", group)

	// On Verbatim: the same group continues.
	lines, log := runConfluentRepoint(t, "dest", dst, topic, group, ends)
	if len(lines) < len(ends) || !slices.Equal(lines[:len(ends)], wantCommitted) {
		t.Fatalf("librdkafka's committed offsets on Verbatim: %q, want %q", lines[:min(len(lines), len(ends))], wantCommitted)
	}
	got = make([][]string, len(ends))
	for _, l := range lines[len(ends):] {
		var p int32
		if _, err := fmt.Sscanf(l, "%d\t", &p); err != nil || p < 0 || int(p) >= len(ends) {
			t.Fatalf("destination consumer printed %q", l)
		}
		got[p] = append(got[p], l)
	}
	for p := range ends {
		if want := all[p][stopAt[p]:]; !slices.Equal(got[p], want) {
			t.Fatalf("the group on Verbatim, partition %d: %s", p, diffLines(got[p], want))
		}
	}
	for _, l := range strings.Split(log, "\n") {
		if librdkafkaResetOrTruncation.MatchString(l) {
			t.Errorf("librdkafka logged a reset or truncation on Verbatim: %s", l)
		}
	}
	// librdkafka asked Verbatim for the end of each committed epoch and
	// got the source's answer: the first offset of the next epoch, or the
	// log end.
	for p := range ends {
		epoch := strings.Split(all[p][stopAt[p]-1], "\t")[2]
		end := ends[p]
		for _, l := range all[p][stopAt[p]:] {
			if f := strings.Split(l, "\t"); f[2] != epoch {
				end, _ = strconv.ParseInt(f[1], 10, 64)
				break
			}
		}
		want := fmt.Sprintf("%s [%d]: offset and epoch validation succeeded: broker end offset %d (offset leader epoch %s)", topic, p, end, epoch)
		if !strings.Contains(log, want) {
			validation := append(linesWithPrefix(log, "RDKAFKA VALIDATE"), linesWithPrefix(log, "RDKAFKA OFFSETVALID")...)
			t.Errorf("librdkafka did not log %q; its validation lines:\n%s", want, strings.Join(validation, "\n"))
		}
	}
}

// diffLines describes the first difference between got and want.
func diffLines(got, want []string) string {
	for i := 0; i < len(got) && i < len(want); i++ {
		if got[i] != want[i] {
			return fmt.Sprintf("record %d is %q, want %q", i, got[i], want[i])
		}
	}
	if len(got) != len(want) {
		return fmt.Sprintf("%d records, want %d (first missing or extra: %q)", len(got), len(want), append(got[min(len(got), len(want)):], want[min(len(got), len(want)):]...)[0])
	}
	return "equal"
}

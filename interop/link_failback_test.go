package interop

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/verbatim-kafka/verbatim/internal/testkit"
)

// javaRecord is one record a Java tool produced or consumed.
type javaRecord struct {
	Partition int32
	Offset    int64
	Value     string
}

// javaProduce writes n records valued "<prefix>.<i>" to topic with
// VerifiableProducer (acks=all) and returns the acknowledged ones.
func javaProduce(t *testing.T, addr, topic string, n, prefix int) []javaRecord {
	t.Helper()
	res := JavaTool(t, "kafka-verifiable-producer", "--bootstrap-server", addr, "--topic", topic,
		"--max-messages", strconv.Itoa(n), "--value-prefix", strconv.Itoa(prefix), "--repeating-keys", "16", "--acks", "-1")
	var out []javaRecord
	for _, line := range res.Lines() {
		var ev struct {
			Name      string `json:"name"`
			Value     string `json:"value"`
			Partition int32  `json:"partition"`
			Offset    int64  `json:"offset"`
		}
		if json.Unmarshal([]byte(line), &ev) == nil && ev.Name == "producer_send_success" {
			out = append(out, javaRecord{ev.Partition, ev.Offset, ev.Value})
		}
	}
	if len(out) != n {
		t.Fatalf("VerifiableProducer on %s: %d of %d acknowledged\n%s", addr, len(out), n, tail(res.Stdout+res.Stderr, 20))
	}
	return out
}

// javaConsume reads n records with the console consumer: in group (with
// reset as auto.offset.reset) when group is set, else partition from
// offset (assign mode, nothing committed).
func javaConsume(t *testing.T, addr, topic, group, reset string, partition int32, from int64, n int) []javaRecord {
	t.Helper()
	args := []string{"--bootstrap-server", addr, "--topic", topic, "--max-messages", strconv.Itoa(n), "--timeout-ms", "30000",
		"--property", "print.partition=true", "--property", "print.offset=true"}
	if group != "" {
		args = append(args, "--group", group, "--consumer-property", "auto.offset.reset="+reset)
	} else {
		args = append(args, "--partition", strconv.Itoa(int(partition)), "--offset", strconv.FormatInt(from, 10))
	}
	res, _ := RunJavaTool(t, Cmd{Timeout: 90 * time.Second}, "kafka-console-consumer", args...)
	var out []javaRecord
	for _, line := range res.Lines() {
		f := strings.Split(line, "\t")
		if len(f) < 3 || !strings.HasPrefix(f[0], "Partition:") || !strings.HasPrefix(f[1], "Offset:") {
			continue
		}
		p, err1 := strconv.Atoi(strings.TrimPrefix(f[0], "Partition:"))
		o, err2 := strconv.ParseInt(strings.TrimPrefix(f[1], "Offset:"), 10, 64)
		if err1 == nil && err2 == nil {
			out = append(out, javaRecord{int32(p), o, f[len(f)-1]})
		}
	}
	if len(out) != n {
		t.Fatalf("console consumer on %s (group %q, partition %d from %d): %d of %d records\n%s", addr, group, partition, from, len(out), n, tail(res.Stdout+res.Stderr, 30))
	}
	return out
}

// groupOffsets is the committed offsets of group for topic on addr.
func groupOffsets(t *testing.T, addr, group, topic string) map[int32]int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	offs, err := kadm.NewClient(testkit.Client(t, addr)).FetchOffsets(ctx, group)
	out := map[int32]int64{}
	if err != nil {
		return out
	}
	offs.Each(func(o kadm.OffsetResponse) {
		if o.Topic == topic && o.Err == nil {
			out[o.Partition] = o.At
		}
	})
	return out
}

// waitFailbackCaughtUp waits until the mirror dest holds src's log end of topic
// and group's committed offsets equal src's.
func waitFailbackCaughtUp(t *testing.T, bin, src, dest, topic, group string) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		se, de := endOffsets(t, src, topic), endOffsets(t, dest, topic)
		sg, dg := groupOffsets(t, src, group, topic), groupOffsets(t, dest, group, topic)
		if fmt.Sprint(se) == fmt.Sprint(de) && fmt.Sprint(sg) == fmt.Sprint(dg) && len(sg) > 0 {
			return
		}
		if time.Now().After(deadline) {
			st, _ := json.Marshal(repairStatus(t, bin, dest, topic))
			t.Fatalf("%s never caught up with %s: ends %v / %v, group %s %v / %v\n%s", dest, src, de, se, group, dg, sg, st)
		}
		time.Sleep(300 * time.Millisecond)
	}
}

// linkFailbackRecords is the number of records each producer step writes
// (VERBATIM_LINK_FAILBACK_RECORDS for a longer run; make test-link-repair).
func linkFailbackRecords(t *testing.T) int {
	if s := os.Getenv("VERBATIM_LINK_FAILBACK_RECORDS"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 2 {
			t.Fatalf("VERBATIM_LINK_FAILBACK_RECORDS=%q", s)
		}
		return n
	}
	return 60
}

// TestLinkFailback: V1 -> V2 -> V1 with Java producers writing on each
// side between steps. V2 mirrors V1 through a link and fails over (mirror
// stop); V1, the old primary, still takes a few writes (its tail, lost to
// the new primary); V1 fails back (`mirror create --truncate-to-common`
// on a link from V2: the tail is cut and kept in `<topic>.truncated`, V2's
// later writes mirrored, then mirror stop); V2 follows V1 again the same
// way. A Java consumer group and a standalone (assign) consumer re-pointed
// at every step read each record exactly once; both sides verify exact.
func TestLinkFailback(t *testing.T) {
	const topic, group = "orders", "billing"
	n := linkFailbackRecords(t)
	bin := BuildVerbatim(t)
	v1 := StartVerbatim(t, bin, VerbatimOptions{})
	v2 := StartVerbatim(t, bin, VerbatimOptions{})
	createTopicOn(t, kadm.NewClient(testkit.Client(t, v1.Addr)), topic, 2, nil)

	groupGot, assignGot := map[string]int{}, map[string]int{}
	assignNext := int64(0)
	// consume re-points both consumers at addr and reads batch there.
	consume := func(addr string, batch []javaRecord, reset string) {
		for _, r := range javaConsume(t, addr, topic, group, reset, -1, 0, len(batch)) {
			groupGot[r.Value]++
		}
		n0 := 0
		for _, r := range batch {
			if r.Partition == 0 {
				n0++
			}
		}
		if n0 == 0 {
			return
		}
		rs := javaConsume(t, addr, topic, "", "", 0, assignNext, n0)
		for _, r := range rs {
			assignGot[r.Value]++
		}
		assignNext = rs[len(rs)-1].Offset + 1
	}

	// V1 is the primary.
	b1 := javaProduce(t, v1.Addr, topic, n, 1)
	consume(v1.Addr, b1, "earliest")
	// V2 mirrors it, with the group's offsets, and takes over.
	cli(t, bin, 0, "link", "create", "fwd", "--dest", v2.Addr, "--source", v1.Addr, "--topics", topic, "--groups", group, "--sync-interval", "1s")
	waitFailbackCaughtUp(t, bin, v1.Addr, v2.Addr, topic, group)
	cli(t, bin, 0, "mirror", "stop", "--dest", v2.Addr, "--topics", topic)
	// The old primary still takes writes nobody reads: its tail.
	cut := javaProduce(t, v1.Addr, topic, n/4+1, 9)
	b2 := javaProduce(t, v2.Addr, topic, n, 2)
	consume(v2.Addr, b2, "none")

	// Failback: V1 becomes a mirror of V2, then the primary again.
	cli(t, bin, 0, "link", "create", "back", "--dest", v1.Addr, "--source", v2.Addr, "--groups", group, "--sync-interval", "1s")
	res := cli(t, bin, 0, "mirror", "create", "--dest", v1.Addr, "--link", "back", "--topics", topic, "--truncate-to-common", "--json")
	if !strings.Contains(res.Stdout, topic+".truncated") {
		t.Fatalf("mirror create --truncate-to-common does not name the keep topic:\n%s", res.Stdout)
	}
	waitFailbackCaughtUp(t, bin, v2.Addr, v1.Addr, topic, group)
	cli(t, bin, 0, "mirror", "stop", "--dest", v1.Addr, "--topics", topic)
	b3 := javaProduce(t, v1.Addr, topic, n, 3)
	consume(v1.Addr, b3, "none")

	// V2 follows V1 again: nothing to cut there.
	res = cli(t, bin, 0, "mirror", "create", "--dest", v2.Addr, "--link", "fwd", "--topics", topic, "--truncate-to-common", "--json")
	if strings.Contains(res.Stdout, topic+".truncated") {
		t.Fatalf("V2 held nothing V1 lacks, yet something was cut:\n%s", res.Stdout)
	}
	waitFailbackCaughtUp(t, bin, v1.Addr, v2.Addr, topic, group)
	runVerify(t, bin, v1.Addr, v2.Addr, topic, 0)
	runVerify(t, bin, v2.Addr, v1.Addr, topic, 0)

	// Exactly once, for both consumers, across the three clusters' turns.
	for _, b := range [][]javaRecord{b1, b2, b3} {
		for _, r := range b {
			if groupGot[r.Value] != 1 {
				t.Errorf("group consumer read %s/%d %s %d times", topic, r.Partition, r.Value, groupGot[r.Value])
			}
			if r.Partition == 0 && assignGot[r.Value] != 1 {
				t.Errorf("assign consumer read %s/0 %s %d times", topic, r.Value, assignGot[r.Value])
			}
			delete(groupGot, r.Value)
			delete(assignGot, r.Value)
		}
	}
	if len(groupGot) > 0 || len(assignGot) > 0 {
		t.Errorf("records read that no step produced (the cut tail?): group %v, assign %v", groupGot, assignGot)
	}
	// V1's cut tail, at its offsets, readable in the keep topic.
	byPart := map[int32][]javaRecord{}
	for _, r := range cut {
		byPart[r.Partition] = append(byPart[r.Partition], r)
	}
	for p, want := range byPart {
		got := javaConsume(t, v1.Addr, topic+".truncated", "", "", p, want[0].Offset, len(want))
		for i := range want {
			if got[i] != want[i] {
				t.Fatalf("keep topic %s.truncated/%d record %d: %+v, want %+v", topic, p, i, got[i], want[i])
			}
		}
	}
}

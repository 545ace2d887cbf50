package interop

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/verbatim-kafka/verbatim/internal/testkit"
	"github.com/verbatim-kafka/verbatim/kbatch"
)

// mirrorStatusJSON is the contract's `verbatim mirror status --json`
// document.
type mirrorStatusJSON struct {
	Partitions []struct {
		Topic               string `json:"topic"`
		Partition           *int32 `json:"partition"`
		Link                string `json:"link"`
		State               string `json:"state"`
		Reason              string `json:"reason"`
		SourceHighWatermark *int64 `json:"source_high_watermark"`
		LogEndOffset        *int64 `json:"log_end_offset"`
		Lag                 *int64 `json:"lag"`
		LagMs               *int64 `json:"lag_ms"`
		LastMirroredOffset  *int64 `json:"last_mirrored_offset"`
		LastMirroredEpoch   *int32 `json:"last_mirrored_epoch"`
	} `json:"partitions"`
}

// mirrorStatus runs `mirror status --json` (args select the link or
// topics) and checks the contract's fields are there.
func mirrorStatus(t *testing.T, bin, dst string, args ...string) mirrorStatusJSON {
	t.Helper()
	argv := append([]string{bin, "mirror", "status", "--dest", dst, "--json"}, args...)
	res, _ := RunTool(t, Cmd{Timeout: 30 * time.Second}, argv...)
	if res.ExitCode != 0 {
		t.Fatalf("mirror status %v: exit %d\n%s%s", args, res.ExitCode, res.Stdout, res.Stderr)
	}
	var st mirrorStatusJSON
	if err := json.Unmarshal([]byte(res.Stdout), &st); err != nil {
		t.Fatalf("mirror status --json: %v\n%s", err, res.Stdout)
	}
	for _, p := range st.Partitions {
		if p.Partition == nil || p.State == "" || p.SourceHighWatermark == nil || p.LogEndOffset == nil || p.Lag == nil || p.LagMs == nil || p.LastMirroredOffset == nil || p.LastMirroredEpoch == nil {
			t.Fatalf("mirror status --json: a partition entry lacks contract fields:\n%s", res.Stdout)
		}
	}
	return st
}

// linkCLI runs a link or mirror lifecycle command and wants exit 0.
func linkCLI(t *testing.T, bin string, args ...string) *Result {
	t.Helper()
	res, _ := RunTool(t, Cmd{Timeout: time.Minute}, append([]string{bin}, args...)...)
	if res.ExitCode != 0 {
		t.Fatalf("verbatim %v: exit %d\n%s%s", args, res.ExitCode, res.Stdout, res.Stderr)
	}
	return res
}

// waitMirrored waits until every partition of topics shows state with
// no lag and a log end at the source's high watermark, and returns the
// last status.
func waitMirrored(t *testing.T, bin, dst, link string, state string, timeout time.Duration, topics ...string) mirrorStatusJSON {
	t.Helper()
	var st mirrorStatusJSON
	deadline := time.Now().Add(timeout)
	for {
		st = mirrorStatus(t, bin, dst, "--link", link)
		seen := map[string]int{}
		done := true
		for _, p := range st.Partitions {
			seen[p.Topic]++
			if p.Link != link {
				t.Fatalf("%s/%d: link %q, want %q", p.Topic, *p.Partition, p.Link, link)
			}
			if p.State == "FAILED" {
				t.Fatalf("%s/%d FAILED: %s", p.Topic, *p.Partition, p.Reason)
			}
			if p.State != state || *p.Lag != 0 || *p.LogEndOffset != *p.SourceHighWatermark || *p.SourceHighWatermark < 0 {
				done = false
			}
		}
		for _, tp := range topics {
			done = done && seen[tp] > 0
		}
		if done {
			return st
		}
		if time.Now().After(deadline) {
			t.Fatalf("link %s: not all of %v %s without lag within %v: %+v", link, topics, state, timeout, st.Partitions)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// verifyExact runs verify on each topic and wants exit 0 with every
// partition in one of statuses (identical when none given).
func verifyExact(t *testing.T, bin, src, dst string, topics []string, statuses ...string) {
	t.Helper()
	if len(statuses) == 0 {
		statuses = []string{"identical"}
	}
	for _, topic := range topics {
		v := runVerify(t, bin, src, dst, topic, 0)
		for _, p := range v.Partitions {
			ok := false
			for _, s := range statuses {
				ok = ok || p.Status == s
			}
			if !*v.Exact || !ok || p.FirstMismatch != nil {
				t.Fatalf("%s/%d: status %s, want one of %v: %+v", topic, *p.Partition, p.Status, statuses, v)
			}
		}
	}
}

// TestLinkFromKafka proves through a cluster link what TestMirrorFromKafka
// proves through `mirror push`: every codec, transactions (an abort and
// one left open), LogAppendTime, leader epochs from restarts, a compacted
// topic after Kafka's cleaner ran and DeleteRecords, copied exactly from a
// real Kafka 4.4 node by the destination broker itself; then a kill -9 of
// the destination mid-copy, a source restart mid-copy, pause and resume,
// and `mirror stop --link` failing every partition over.
func TestLinkFromKafka(t *testing.T) {
	bin := BuildVerbatim(t)
	k := StartKafka(t, KafkaOptions{})
	src := k.Bootstrap()
	v := StartVerbatim(t, bin, VerbatimOptions{Args: []string{"--flush", "always"}})
	dst := v.Addr
	outer := t // brokers restarted in a subtest live until the whole test ends
	cl := k.Client(t, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	prepareMirrorSources(t, k, cl)
	// A transaction left open on the source: mirrored open, aborted by
	// the stop at the end.
	open := k.Client(t, kgo.TransactionalID("link-left-open"), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err := open.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	produceSync(t, open, &kgo.Record{Topic: "txn", Partition: 0, Value: []byte("left open")})

	topics := []string{"codecs", "txn", "logappend", "epochs", "compacted", "deleted"}
	linkCLI(t, bin, "link", "create", "k1", "--dest", dst, "--source", src, "--topics", "codecs|txn|logappend|epochs|compacted|deleted", "--sync-interval", "1s")
	waitMirrored(t, bin, dst, "k1", "MIRRORING", 2*time.Minute, topics...)
	verifyExact(t, bin, src, dst, topics)
	desc := linkCLI(t, bin, "link", "describe", "k1", "--dest", dst).Stdout
	for _, tp := range topics {
		if !strings.Contains(desc, tp) {
			t.Fatalf("link describe does not list %s:\n%s", tp, desc)
		}
	}

	t.Run("follow-and-pause", func(t *testing.T) {
		produceSync(t, cl, keyed("codecs", 30, "live")...)
		waitMirrored(t, bin, dst, "k1", "MIRRORING", time.Minute, "codecs")
		linkCLI(t, bin, "mirror", "pause", "--dest", dst, "--topics", "codecs")
		paused := mirrorStatus(t, bin, dst, "--topics", "codecs")
		if len(paused.Partitions) != 1 || paused.Partitions[0].State != "PAUSED" {
			t.Fatalf("after pause: %+v", paused.Partitions)
		}
		end := *paused.Partitions[0].LogEndOffset
		produceSync(t, cl, keyed("codecs", 30, "while-paused")...)
		time.Sleep(2 * time.Second) // two sync intervals: nothing may be appended
		if e := destEnd(t, dst, "codecs"); e != end {
			t.Fatalf("a paused partition moved from %d to %d", end, e)
		}
		linkCLI(t, bin, "mirror", "resume", "--dest", dst, "--topics", "codecs")
		waitMirrored(t, bin, dst, "k1", "MIRRORING", time.Minute, "codecs")
		verifyExact(t, bin, src, dst, []string{"codecs"})
	})

	t.Run("kill-serve-mid-copy", func(t *testing.T) {
		k.CreateTopic(t, "linkbig", 1, 1, nil)
		produceSync(t, k.Client(t, kgo.ProducerBatchMaxBytes(2048)), keyed("linkbig", 20000, "big")...)
		linkCLI(t, bin, "mirror", "create", "--dest", dst, "--link", "k1", "--topics", "linkbig")
		for deadline := time.Now().Add(time.Minute); destEnd(t, dst, "linkbig") <= 0; time.Sleep(10 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatal("the link copied nothing of linkbig within a minute")
			}
		}
		v.Proc.Signal(syscall.SIGKILL)
		v.Proc.Wait(10 * time.Second)
		v = StartVerbatim(outer, bin, VerbatimOptions{DataDir: v.DataDir, Args: []string{"--flush", "always"}})
		dst = v.Addr
		t.Logf("serve killed mid-copy; restarted with linkbig at %d", destEnd(t, dst, "linkbig"))
		waitMirrored(t, bin, dst, "k1", "MIRRORING", 2*time.Minute, append(topics, "linkbig")...)
		// The destination's own cleaner may have run on "compacted" since:
		// both sides cleaned one history (BRIEF: still exact).
		verifyExact(t, bin, src, dst, []string{"codecs", "txn", "logappend", "epochs", "deleted", "linkbig"})
		verifyExact(t, bin, src, dst, []string{"compacted"}, "identical", "compacted-equivalent", "source-compacted-since")
	})

	t.Run("source-restart-mid-copy", func(t *testing.T) {
		produceSync(t, k.Client(t, kgo.ProducerBatchMaxBytes(2048)), keyed("linkbig", 20000, "more")...)
		k.Nodes[0].Kill()
		k.Nodes[0].Restart(t)
		produceSync(t, cl, keyed("linkbig", 100, "after-restart")...)
		waitMirrored(t, bin, dst, "k1", "MIRRORING", 2*time.Minute, "linkbig")
		verifyExact(t, bin, src, dst, []string{"linkbig", "epochs"})
	})

	t.Run("stop-link", func(t *testing.T) {
		res := linkCLI(t, bin, "mirror", "stop", "--dest", dst, "--link", "k1")
		t.Logf("mirror stop --link: %s", strings.TrimSpace(res.Stdout))
		st := mirrorStatus(t, bin, dst, "--link", "k1")
		for _, p := range st.Partitions {
			if p.State != "STOPPED" {
				t.Fatalf("%s/%d after stop: %s (%s)", p.Topic, *p.Partition, p.State, p.Reason)
			}
		}
		// The former mirror is writable, and the open transaction was
		// aborted: a read_committed consumer reaches the end.
		w := testkit.Client(t, dst, kgo.RecordPartitioner(kgo.ManualPartitioner()))
		produceSync(t, w, &kgo.Record{Topic: "txn", Partition: 0, Value: []byte(fmt.Sprintf("local after stop %d", time.Now().UnixNano()))})
	})
}

// TestLinkFrom3NodeKafka copies, through a link, a replicated topic whose
// leaders move on a 3-node Kafka source while the link follows it: the
// leader is killed (a new leader and epoch), writes continue, the node
// returns and a preferred election moves leadership back (another epoch).
// The link moves its fetches to each new leader; verify is exact.
func TestLinkFrom3NodeKafka(t *testing.T) {
	bin := BuildVerbatim(t)
	k := StartKafkaCluster(t, 3, KafkaOptions{HeapMB: 320})
	src := k.Bootstrap()
	v := StartVerbatim(t, bin, VerbatimOptions{})
	dst := v.Addr
	k.CreateTopic(t, "moves", 2, 3, map[string]string{"min.insync.replicas": "1"})
	cl := k.Client(t, kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.RequiredAcks(kgo.AllISRAcks()))
	write := func(tag string) {
		for p := int32(0); p < 2; p++ {
			rs := keyed("moves", 200, tag)
			for _, r := range rs {
				r.Partition = p
			}
			produceSync(t, cl, rs...)
		}
	}
	write("first")
	linkCLI(t, bin, "link", "create", "k3", "--dest", dst, "--source", src, "--topics", "moves", "--sync-interval", "1s")
	waitMirrored(t, bin, dst, "k3", "MIRRORING", 2*time.Minute, "moves")

	leader := func(p int32) int {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		md, err := k.Admin(t).Metadata(ctx, "moves")
		if err != nil {
			t.Fatal(err)
		}
		return int(md.Topics["moves"].Partitions[p].Leader)
	}
	old := leader(0)
	var node *KafkaNode
	for _, n := range k.Nodes {
		if n.ID == old {
			node = n
		}
	}
	if node == nil {
		t.Fatalf("no node with id %d", old)
	}
	node.Kill()
	write("after-kill")
	waitMirrored(t, bin, dst, "k3", "MIRRORING", 2*time.Minute, "moves")
	node.Restart(t)
	write("after-return")
	JavaTool(t, "kafka-leader-election", "--bootstrap-server", src, "--election-type", "PREFERRED", "--all-topic-partitions")
	write("after-election")
	waitMirrored(t, bin, dst, "k3", "MIRRORING", 2*time.Minute, "moves")
	verifyExact(t, bin, src, dst, []string{"moves"})
	epochs := map[int32]bool{}
	eachBatch(t, dst, "moves", func(b []byte) { epochs[kbatch.LeaderEpoch(b)] = true })
	if len(epochs) < 2 {
		t.Fatalf("partition 0 holds batches of %d leader epochs, want the moves to show (>= 2)", len(epochs))
	}
}

// TestLinkScale1000 mirrors 1,000 partitions (4 topics of 250) through one
// link: every partition reaches MIRRORING, the destination holds at most 4
// connections to the source broker, verify is exact, and `mirror stop
// --link` fails every partition over.
func TestLinkScale1000(t *testing.T) {
	bin := BuildVerbatim(t)
	k := StartKafka(t, KafkaOptions{})
	src := k.Bootstrap()
	v := StartVerbatim(t, bin, VerbatimOptions{})
	dst := v.Addr
	topics := []string{"scale-a", "scale-b", "scale-c", "scale-d"}
	cl := k.Client(t, kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerLinger(5*time.Millisecond))
	for _, tp := range topics {
		k.CreateTopic(t, tp, 250, 1, nil)
		var rs []*kgo.Record
		for p := int32(0); p < 250; p++ {
			for i := 0; i < 3; i++ {
				rs = append(rs, &kgo.Record{Topic: tp, Partition: p, Key: []byte(fmt.Sprintf("k%d", i)), Value: []byte(fmt.Sprintf("%s-%d-%d", tp, p, i))})
			}
		}
		produceSync(t, cl, rs...)
	}
	start := time.Now()
	linkCLI(t, bin, "link", "create", "scale", "--dest", dst, "--source", src, "--topics", "scale-.*", "--sync-interval", "2s")
	st := waitMirrored(t, bin, dst, "scale", "MIRRORING", 3*time.Minute, topics...)
	if len(st.Partitions) != 1000 {
		t.Fatalf("mirror status lists %d partitions, want 1000", len(st.Partitions))
	}
	t.Logf("1000 partitions MIRRORING without lag %v after link create", time.Since(start).Round(time.Millisecond))
	_, port := splitHostPort(t, src)
	if n := tcpConnsTo(t, v.Proc.PID(), port); n > 4 || n < 1 {
		t.Fatalf("the destination holds %d connections to the source broker (port %d), want 1..4", n, port)
	} else {
		t.Logf("connections from the destination to the source broker: %d", n)
	}
	verifyExact(t, bin, src, dst, topics)
	linkCLI(t, bin, "mirror", "stop", "--dest", dst, "--link", "scale")
	for _, p := range mirrorStatus(t, bin, dst, "--link", "scale").Partitions {
		if p.State != "STOPPED" {
			t.Fatalf("%s/%d after mirror stop --link: %s", p.Topic, *p.Partition, p.State)
		}
	}
}

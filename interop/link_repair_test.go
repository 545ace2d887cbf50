package interop

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/verbatim-kafka/verbatim/internal/testkit"
)

// The cluster link's divergence repair and failback, against real peers
// (docs/mirroring.md "Divergence and failback"): the CLI contract of
// `verbatim link create`, `mirror status --json`, `mirror truncate
// --to-divergence`, `mirror create --truncate-to-common`, `mirror stop`
// and `verify`.

// repairStatusJSON is `verbatim mirror status --json`.
type repairStatusJSON struct {
	Partitions []struct {
		Topic              string `json:"topic"`
		Partition          int32  `json:"partition"`
		Link               string `json:"link"`
		State              string `json:"state"`
		Reason             string `json:"reason"`
		LogEndOffset       int64  `json:"log_end_offset"`
		Lag                int64  `json:"lag"`
		LastMirroredOffset int64  `json:"last_mirrored_offset"`
		LastMirroredEpoch  int32  `json:"last_mirrored_epoch"`
		DivergenceOffset   int64  `json:"divergence_offset"`
	} `json:"partitions"`
}

// cli runs `verbatim args...` and fails the test unless it exits want.
func cli(t *testing.T, bin string, want int, args ...string) *Result {
	t.Helper()
	res, _ := RunTool(t, Cmd{Timeout: 2 * time.Minute}, append([]string{bin}, args...)...)
	if res.ExitCode != want {
		t.Fatalf("verbatim %s: exit %d, want %d\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), res.ExitCode, want, res.Stdout, res.Stderr)
	}
	return res
}

func repairStatus(t *testing.T, bin, dest, topic string) repairStatusJSON {
	t.Helper()
	res := cli(t, bin, 0, "mirror", "status", "--dest", dest, "--topics", topic, "--json")
	var st repairStatusJSON
	if err := json.Unmarshal([]byte(res.Stdout), &st); err != nil {
		t.Fatalf("mirror status --json: %v\n%s", err, res.Stdout)
	}
	return st
}

// waitStatus polls mirror status until every partition of topic satisfies
// ok, or fails after timeout with the last status.
func waitStatus(t *testing.T, bin, dest, topic string, timeout time.Duration, what string, ok func(state string, logEnd int64) bool) repairStatusJSON {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		st := repairStatus(t, bin, dest, topic)
		all := len(st.Partitions) > 0
		for _, p := range st.Partitions {
			all = all && p.Topic == topic && ok(p.State, p.LogEndOffset)
		}
		if all {
			return st
		}
		if time.Now().After(deadline) {
			b, _ := json.Marshal(st)
			t.Fatalf("%s/%s: %s not reached within %v: %s", dest, topic, what, timeout, b)
		}
		time.Sleep(300 * time.Millisecond)
	}
}

// produceValues writes values to topic/partition with acks=all and
// returns their offsets.
func produceValues(t *testing.T, cl *kgo.Client, topic string, partition int32, values ...string) []int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	rs := make([]*kgo.Record, len(values))
	for i, v := range values {
		rs[i] = &kgo.Record{Topic: topic, Partition: partition, Value: []byte(v)}
	}
	if err := cl.ProduceSync(ctx, rs...).FirstErr(); err != nil {
		t.Fatalf("produce to %s/%d: %v", topic, partition, err)
	}
	offs := make([]int64, len(rs))
	for i, r := range rs {
		offs[i] = r.Offset
	}
	return offs
}

func valuesN(prefix string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%s-%03d", prefix, i)
	}
	return out
}

// readAll reads partition 0 of topic on addr from its earliest offset up
// to its log end, as offset -> value.
func readAll(t *testing.T, addr, topic string) map[int64]string {
	t.Helper()
	out := map[int64]string{}
	readToEnd(t, addr, topic, func(r *kgo.Record) { out[r.Offset] = string(r.Value) })
	return out
}

// TestLinkDivergenceRepair: an unclean leader election on the 3-node
// Kafka source truncates records the link already mirrored; the
// partition goes FAILED with the divergence point; `mirror truncate
// --to-divergence` cuts the mirror there, keeps the cut records in
// `<topic>.truncated` and resumes, and `verify` is exact against the new
// leader.
func TestLinkDivergenceRepair(t *testing.T) {
	const topic = "diverge"
	bin := BuildVerbatim(t)
	k := StartKafkaCluster(t, 3, KafkaOptions{HeapMB: 320})
	n1, n2 := k.Nodes[0], k.Nodes[1]
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	// One partition on nodes 1 and 2 (leader 1), unclean election allowed.
	req := kmsg.NewPtrCreateTopicsRequest()
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = topic, -1, -1
	ra := kmsg.NewCreateTopicsRequestTopicReplicaAssignment()
	ra.Partition, ra.Replicas = 0, []int32{int32(n1.ID), int32(n2.ID)}
	rt.ReplicaAssignment = append(rt.ReplicaAssignment, ra)
	for name, v := range map[string]string{"unclean.leader.election.enable": "true", "min.insync.replicas": "1"} {
		c := kmsg.NewCreateTopicsRequestTopicConfig()
		c.Name, c.Value = name, kmsg.StringPtr(v)
		rt.Configs = append(rt.Configs, c)
	}
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, k.Client(t))
	if err != nil || resp.Topics[0].ErrorCode != 0 {
		t.Fatalf("create %s: %v %+v", topic, err, resp)
	}
	prod := k.Client(t, kgo.RequiredAcks(kgo.AllISRAcks()), kgo.DisableIdempotentWrite(), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	produceValues(t, prod, topic, 0, valuesN("before", 100)...)

	v := StartVerbatim(t, bin, VerbatimOptions{})
	// The seed is node 3, which stays up while 1 and 2 go and come.
	cli(t, bin, 0, "link", "create", "src", "--dest", v.Addr, "--source", k.Nodes[2].Addr, "--topics", topic, "--sync-interval", "1s")
	waitStatus(t, bin, v.Addr, topic, 60*time.Second, "MIRRORING at 100", func(s string, end int64) bool { return s == "MIRRORING" && end == 100 })

	// Node 2 leaves the ISR; node 1 alone takes 50 more, mirrored.
	n2.Stop()
	waitISR(t, k, topic, []int32{int32(n1.ID)})
	lost := valuesN("lost", 50)
	produceValues(t, prod, topic, 0, lost...)
	waitStatus(t, bin, v.Addr, topic, 60*time.Second, "150 mirrored", func(_ string, end int64) bool { return end == 150 })

	// Node 1 goes; node 2 comes back without those 50 and is elected
	// uncleanly; it takes 30 new records at 100..129.
	n1.Stop()
	n2.start(t)
	adm := kadm.NewClient(testkit.Client(t, n2.Addr))
	for {
		res, err := adm.ElectLeaders(ctx, kadm.ElectLiveReplica, kadm.TopicsSet{topic: {0: {}}})
		if err == nil {
			if r, ok := res[topic][0]; ok && (r.Err == nil || strings.Contains(r.Err.Error(), "ELECTION_NOT_NEEDED")) {
				break
			}
		}
		if ctx.Err() != nil {
			t.Fatalf("unclean election of node %d: %v %v", n2.ID, err, res)
		}
		time.Sleep(500 * time.Millisecond)
	}
	prod2 := testkit.Client(t, n2.Addr, kgo.RequiredAcks(kgo.AllISRAcks()), kgo.DisableIdempotentWrite(), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	after := valuesN("after", 30)
	if offs := produceValues(t, prod2, topic, 0, after...); offs[0] != 100 {
		t.Fatalf("the new leader wrote at %d, want 100 (it should lack node 1's last 50)", offs[0])
	}

	st := waitStatus(t, bin, v.Addr, topic, 90*time.Second, "FAILED by divergence", func(s string, _ int64) bool { return s == "FAILED" })
	p := st.Partitions[0]
	if !strings.Contains(p.Reason, "diverge") || p.DivergenceOffset != 100 || p.LogEndOffset != 150 {
		t.Fatalf("FAILED partition: reason %q, divergence offset %d, log end %d; want divergence at 100 with 150 mirrored", p.Reason, p.DivergenceOffset, p.LogEndOffset)
	}
	// A resume does not paper over it.
	cli(t, bin, 0, "mirror", "resume", "--dest", v.Addr, "--topics", topic)
	time.Sleep(2 * time.Second)
	if st := repairStatus(t, bin, v.Addr, topic); st.Partitions[0].State != "FAILED" || st.Partitions[0].LogEndOffset != 150 {
		t.Fatalf("after resume: %+v", st.Partitions[0])
	}

	out := cli(t, bin, 0, "mirror", "truncate", "--dest", v.Addr, "--topics", topic, "--to-divergence", "--json")
	if !strings.Contains(out.Stdout, `"truncated_to": 100`) && !strings.Contains(out.Stdout, `"truncated_to":100`) {
		t.Fatalf("mirror truncate --json does not say truncated_to 100:\n%s", out.Stdout)
	}
	waitStatus(t, bin, v.Addr, topic, 60*time.Second, "MIRRORING at 130", func(s string, end int64) bool { return s == "MIRRORING" && end == 130 })
	runVerify(t, bin, n2.Addr, v.Addr, topic, 0)

	// The cut records, at their original offsets, in the keep topic.
	kept := readAll(t, v.Addr, topic+".truncated")
	if len(kept) != len(lost) {
		t.Fatalf("keep topic holds %d records, want %d: %v", len(kept), len(lost), kept)
	}
	for i, val := range lost {
		if kept[int64(100+i)] != val {
			t.Fatalf("keep topic at %d: %q, want %q", 100+i, kept[int64(100+i)], val)
		}
	}
	// Kafka's DumpLogSegments reads the keep topic's segment, which
	// starts at the cut.
	seg := filepath.Join(v.DataDir, topic+".truncated-0", "00000000000000000100.log")
	dump := JavaTool(t, "kafka-dump-log", "--files", seg, "--print-data-log").Stdout
	for _, want := range []string{"baseOffset: 100", "payload: " + lost[0], "payload: " + lost[len(lost)-1]} {
		if !strings.Contains(dump, want) {
			t.Fatalf("DumpLogSegments of %s lacks %q:\n%s", seg, want, tail(dump, 20))
		}
	}
	got := readAll(t, v.Addr, topic)
	for i, val := range after {
		if got[int64(100+i)] != val {
			t.Fatalf("mirror at %d: %q, want %q", 100+i, got[int64(100+i)], val)
		}
	}
	// Truncating a partition that is not FAILED by divergence is refused.
	res := cli(t, bin, 1, "mirror", "truncate", "--dest", v.Addr, "--topics", topic, "--to-divergence")
	if !strings.Contains(res.Stdout+res.Stderr, "INVALID_REQUEST") {
		t.Fatalf("a second truncate: %s%s", res.Stdout, res.Stderr)
	}
}

// waitISR waits until topic/0's ISR is want.
func waitISR(t *testing.T, k *Kafka, topic string, want []int32) {
	t.Helper()
	adm := k.Admin(t)
	deadline := time.Now().Add(60 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		md, err := adm.Metadata(ctx, topic)
		cancel()
		if err == nil {
			if p, ok := md.Topics[topic].Partitions[0]; ok && fmt.Sprint(p.ISR) == fmt.Sprint(want) {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("ISR of %s/0 never became %v (%v)", topic, want, err)
		}
		time.Sleep(300 * time.Millisecond)
	}
}

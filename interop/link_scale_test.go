//go:build scale

package interop

// `make scale` (not `make test`): a link over 10,000 partitions of a real
// Kafka 4.4 node, with what it costs measured and written as one JSON line
// to $SCALE_OUT (default benchmarks/tmp/scale.jsonl).

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// procStat reads a process's CPU seconds (user + system), RSS bytes and
// open files from /proc.
func procStat(t *testing.T, pid int) (cpu float64, rss int64, files int) {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		t.Fatal(err)
	}
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+2:]))
	ut, _ := strconv.ParseFloat(f[11], 64)
	st, _ := strconv.ParseFloat(f[12], 64)
	cpu = (ut + st) / 100 // USER_HZ
	s, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(s), "\n") {
		if strings.HasPrefix(l, "VmRSS:") {
			kb, _ := strconv.ParseInt(strings.Fields(l)[1], 10, 64)
			rss = kb << 10
		}
	}
	fds, _ := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	return cpu, rss, len(fds)
}

// TestLinkScale10000 mirrors 10,000 partitions (8 topics of 1,250) through
// one link and reports: time to all MIRRORING, connections to the source,
// the destination's idle CPU over 30 s with every partition mirrored and
// idle, its RSS and open files, verify, and the time `mirror stop --link`
// takes to fail every partition over.
func TestLinkScale10000(t *testing.T) {
	const topics, per = 8, 1250
	bin := BuildVerbatim(t)
	k := StartKafka(t, KafkaOptions{HeapMB: 1024, StartTimeout: 5 * time.Minute})
	src := k.Bootstrap()
	v := StartVerbatim(t, bin, VerbatimOptions{StartTimeout: 2 * time.Minute})
	dst := v.Addr
	var names []string
	cl := k.Client(t, kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerLinger(10*time.Millisecond), kgo.MaxBufferedRecords(1<<20))
	for i := 0; i < topics; i++ {
		name := fmt.Sprintf("big-%d", i)
		names = append(names, name)
		k.CreateTopic(t, name, per, 1, nil)
		var rs []*kgo.Record
		for p := int32(0); p < per; p++ {
			for j := 0; j < 4; j++ {
				rs = append(rs, &kgo.Record{Topic: name, Partition: p, Value: []byte(fmt.Sprintf("%s-%d-%d", name, p, j))})
			}
		}
		produceSync(t, cl, rs...)
	}
	start := time.Now()
	linkCLI(t, bin, "link", "create", "scale", "--dest", dst, "--source", src, "--topics", "big-.*", "--sync-interval", "5s")
	st := waitMirrored(t, bin, dst, "scale", "MIRRORING", 20*time.Minute, names...)
	catchUp := time.Since(start)
	if len(st.Partitions) != topics*per {
		t.Fatalf("%d partitions in mirror status, want %d", len(st.Partitions), topics*per)
	}
	_, port := splitHostPort(t, src)
	conns := tcpConnsTo(t, v.Proc.PID(), port)
	cpu0, _, _ := procStat(t, v.Proc.PID())
	time.Sleep(30 * time.Second)
	cpu1, rss, files := procStat(t, v.Proc.PID())
	idle := (cpu1 - cpu0) / 30
	t.Logf("caught up in %v; %d connections to the source; idle %.3f cores; RSS %d MiB; %d open files", catchUp, conns, idle, rss>>20, files)
	verifyStart := time.Now()
	verifyExact(t, bin, src, dst, names)
	verifyTook := time.Since(verifyStart)
	t.Logf("verify exact in %v", verifyTook)
	stopStart := time.Now()
	if res, _ := RunTool(t, Cmd{Timeout: 15 * time.Minute}, bin, "mirror", "stop", "--dest", dst, "--link", "scale"); res.ExitCode != 0 {
		t.Fatalf("mirror stop --link: exit %d\n%s", res.ExitCode, tail(res.Stderr, 20))
	}
	stopTook := time.Since(stopStart)
	t.Logf("mirror stop --link in %v", stopTook)
	for _, p := range mirrorStatus(t, bin, dst, "--link", "scale").Partitions {
		if p.State != "STOPPED" {
			t.Fatalf("%s/%d after stop: %s", p.Topic, *p.Partition, p.State)
		}
	}
	res := map[string]any{"test": "link-scale", "partitions": topics * per, "catch_up_s": catchUp.Seconds(),
		"source_connections": conns, "idle_cpu_cores": idle, "rss_bytes": rss, "open_files": files,
		"verify_s": verifyTook.Seconds(), "stop_s": stopTook.Seconds(), "at": time.Now().UTC().Format(time.RFC3339)}
	line, _ := json.Marshal(res)
	t.Logf("%s", line)
	out := os.Getenv("SCALE_OUT")
	if out == "" {
		root, _ := RepoRoot()
		out = filepath.Join(root, "benchmarks", "tmp", "scale.jsonl")
	}
	_ = os.MkdirAll(filepath.Dir(out), 0o755)
	f, err := os.OpenFile(out, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	fmt.Fprintf(f, "%s\n", line)
	if conns > 4 {
		t.Errorf("%d connections to the source broker, want <= 4", conns)
	}
}

package interop

import (
	"archive/zip"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"
)

// fatalTB captures Fatalf instead of failing the real test, so helpers'
// failure paths can be asserted.
type fatalTB struct {
	testing.TB
	msg string
}

func (f *fatalTB) Helper() {}
func (f *fatalTB) Fatalf(format string, args ...any) {
	f.msg = fmt.Sprintf(format, args...)
	runtime.Goexit()
}
func (f *fatalTB) Fatal(args ...any) { f.Fatalf("%s", fmt.Sprint(args...)) }

// captureFatal runs fn with a fatalTB and returns the Fatalf message ("" if
// fn returned normally).
func captureFatal(t *testing.T, fn func(tb testing.TB)) string {
	t.Helper()
	f := &fatalTB{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		fn(f)
	}()
	<-done
	return f.msg
}

func TestMissingPeerIsAFailureNotASkip(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	t.Setenv("JAVA_HOME", "")
	msg := captureFatal(t, func(tb testing.TB) { RunKcat(tb, Cmd{}, "-V") })
	if !strings.Contains(msg, "kcat") || !strings.Contains(msg, "make peers") {
		t.Fatalf("missing kcat: got %q, want a failure naming kcat and `make peers`", msg)
	}
	msg = captureFatal(t, func(tb testing.TB) { JavaTool(tb, "kafka-topics", "--version") })
	if !strings.Contains(msg, "java") || !strings.Contains(msg, "make peers") {
		t.Fatalf("missing java: got %q, want a failure naming java and `make peers`", msg)
	}
	msg = captureFatal(t, func(tb testing.TB) { StartKafka(tb, KafkaOptions{}) })
	if !strings.Contains(msg, "make peers") {
		t.Fatalf("StartKafka without java: got %q", msg)
	}
}

func writeJar(t *testing.T, path string, entries ...string) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	zw := zip.NewWriter(f)
	for _, e := range entries {
		w, err := zw.Create(e)
		if err != nil {
			t.Fatal(err)
		}
		w.Write([]byte{0xca, 0xfe, 0xba, 0xbe})
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	f.Close()
}

func TestClassResolution(t *testing.T) {
	lib := t.TempDir()
	writeJar(t, filepath.Join(lib, "kafka_2.13-9.9.jar"),
		"kafka/Kafka.class", "kafka/tools/StorageTool.class", "kafka/tools/DumpLogSegments.class",
		"kafka/admin/ConfigCommand.class", "kafka/tools/StorageTool$Inner.class", "META-INF/X.class")
	writeJar(t, filepath.Join(lib, "kafka-tools-9.9.jar"),
		"org/apache/kafka/tools/DumpLogSegments.class", "org/apache/kafka/tools/consumer/ConsoleConsumer.class",
		"org/apache/kafka/tools/TopicCommand.class", "org/apache/kafka/tools/reassign/ReassignPartitionsCommand.class")
	// Not a Kafka jar: never indexed, so it cannot shadow a tool.
	writeJar(t, filepath.Join(lib, "other-1.jar"), "org/apache/kafka/tools/Evil.class", "a/TopicCommand.class")

	idx, err := indexJars(lib)
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]string{
		"kafka-topics":              "org.apache.kafka.tools.TopicCommand",
		"kafka-topics.sh":           "org.apache.kafka.tools.TopicCommand",
		"TopicCommand":              "org.apache.kafka.tools.TopicCommand",
		"kafka-console-consumer":    "org.apache.kafka.tools.consumer.ConsoleConsumer",
		"kafka-reassign-partitions": "org.apache.kafka.tools.reassign.ReassignPartitionsCommand",
		"kafka-storage":             "kafka.tools.StorageTool",
		"kafka-configs":             "kafka.admin.ConfigCommand",
		"kafka.Kafka":               "kafka.Kafka",
		"Kafka":                     "kafka.Kafka",
		// Both homes present: the Java tools package wins.
		"DumpLogSegments":                     "org.apache.kafka.tools.DumpLogSegments",
		"kafka.tools.DumpLogSegments":         "kafka.tools.DumpLogSegments",
		"kafka-dump-log":                      "org.apache.kafka.tools.DumpLogSegments",
		"org.apache.kafka.tools.TopicCommand": "org.apache.kafka.tools.TopicCommand",
	} {
		got, err := idx.resolve(name)
		if err != nil || got != want {
			t.Errorf("resolve(%q) = %q, %v; want %q", name, got, err, want)
		}
	}
	for _, name := range []string{"Evil", "StorageTool$Inner", "X", "kafka-verifiable-producer", "org.apache.kafka.tools.Nope"} {
		if got, err := idx.resolve(name); err == nil {
			t.Errorf("resolve(%q) = %q, want an error", name, got)
		}
	}
	if _, err := indexJars(t.TempDir()); err == nil {
		t.Errorf("indexJars on an empty dir: want an error")
	}
}

func TestKafkaPropertiesHarnessOwnsIdentity(t *testing.T) {
	node := &KafkaNode{ID: 2, Addr: "127.0.0.1:1001", ControllerAddr: "127.0.0.1:1002", DataDir: "/d"}
	props := node.properties(3, "1@a:1,2@b:2,3@c:3", map[string]string{
		"node.id":                             "9",
		"listeners":                           "PLAINTEXT://0.0.0.0:9092",
		"controller.quorum.bootstrap.servers": "x:1",
		"log.cleaner.backoff.ms":              "100",
		"message.max.bytes":                   "2000000",
	})
	kv := map[string]string{}
	for _, l := range strings.Split(props, "\n") {
		if k, v, ok := strings.Cut(l, "="); ok && !strings.HasPrefix(l, "#") {
			if _, dup := kv[k]; dup {
				t.Fatalf("duplicate key %s", k)
			}
			kv[k] = v
		}
	}
	for k, want := range map[string]string{
		"node.id":                          "2",
		"listeners":                        "PLAINTEXT://127.0.0.1:1001,CONTROLLER://127.0.0.1:1002",
		"advertised.listeners":             "PLAINTEXT://127.0.0.1:1001",
		"controller.quorum.voters":         "1@a:1,2@b:2,3@c:3",
		"log.dirs":                         "/d",
		"process.roles":                    "broker,controller",
		"log.cleaner.backoff.ms":           "100",
		"message.max.bytes":                "2000000",
		"offsets.topic.replication.factor": "3",
		"transaction.state.log.min.isr":    "2",
	} {
		if kv[k] != want {
			t.Errorf("%s = %q, want %q", k, kv[k], want)
		}
	}
	if v, ok := kv["controller.quorum.bootstrap.servers"]; ok {
		t.Errorf("dynamic quorum key kept (%q) next to static voters", v)
	}
	single := (&KafkaNode{ID: 1, Addr: "a:1", ControllerAddr: "a:2"}).properties(1, "1@a:2", nil)
	if !strings.Contains(single, "\noffsets.topic.replication.factor=1\n") {
		t.Errorf("single node must use RF 1 for internal topics:\n%s", single)
	}
}

func TestRandomClusterID(t *testing.T) {
	seen := map[string]bool{}
	for i := 0; i < 200; i++ {
		id := randomClusterID(t)
		if len(id) != 22 || id[0] == '-' || strings.ContainsAny(id, "+/=") || seen[id] {
			t.Fatalf("bad or repeated cluster id %q", id)
		}
		seen[id] = true
	}
}

func TestFreePortsDistinctAndBindable(t *testing.T) {
	ports := FreePorts(t, 40)
	seen := map[int]bool{}
	for _, p := range ports {
		if seen[p] {
			t.Fatalf("port %d handed out twice", p)
		}
		seen[p] = true
		ln, err := net.Listen("tcp", Addr(p))
		if err != nil {
			t.Fatalf("port %d not bindable: %v", p, err)
		}
		ln.Close()
	}
	for _, p := range FreePorts(t, 40) {
		if seen[p] {
			t.Fatalf("port %d handed out again in a later call", p)
		}
	}
}

func TestRunToolCapturesStdinExitAndTimeout(t *testing.T) {
	res, err := RunTool(t, Cmd{Stdin: strings.NewReader("a\nb\n")}, "sh", "-c", "cat; echo err >&2")
	if err != nil || res.ExitCode != 0 || res.Stdout != "a\nb\n" || res.Stderr != "err\n" {
		t.Fatalf("cat: %+v, %v", res, err)
	}
	if got := res.Lines(); len(got) != 2 || got[1] != "b" {
		t.Fatalf("Lines() = %q", got)
	}
	res, err = RunTool(t, Cmd{}, "sh", "-c", "echo out; exit 3")
	if err == nil || res.ExitCode != 3 || !strings.Contains(err.Error(), "out") {
		t.Fatalf("exit 3: %+v, %v", res, err)
	}
	res, err = RunTool(t, Cmd{Timeout: 300 * time.Millisecond}, "sleep", "30")
	if err == nil || !strings.Contains(err.Error(), "timed out") || res.ExitCode != -1 {
		t.Fatalf("sleep with timeout: %+v, %v", res, err)
	}
}

func TestProcStopEscalatesToKill(t *testing.T) {
	dir := t.TempDir()
	p := StartProc(t, "polite", filepath.Join(dir, "polite.log"), dir, nil, "sh", "-c", "echo started; exec sleep 30")
	if err := p.Alive(); err != nil {
		t.Fatal(err)
	}
	if !p.Stop(20 * time.Second) {
		t.Fatalf("sleep ignored SIGTERM?")
	}
	if p.Alive() == nil {
		t.Fatalf("still alive after Stop")
	}
	// A process that ignores SIGTERM is killed after the grace period.
	stubborn := StartProc(t, "stubborn", filepath.Join(dir, "stubborn.log"), dir, nil, "sh", "-c", "trap '' TERM; echo ready; exec sleep 30")
	if err := WaitForLog(stubborn, "ready", 10*time.Second); err != nil {
		t.Fatal(err)
	}
	if stubborn.Stop(200 * time.Millisecond) {
		t.Fatalf("Stop reported a clean exit for a process that ignores SIGTERM")
	}
	if code := stubborn.ExitCode(); code != -1 {
		t.Fatalf("exit code %d, want -1 (killed)", code)
	}
	if ws := stubborn.cmd.ProcessState.Sys().(syscall.WaitStatus); !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
		t.Fatalf("wait status %v, want killed by SIGKILL", ws)
	}
	if !strings.Contains(stubborn.LogTail(5), "ready") {
		t.Fatalf("log tail %q lacks the output", stubborn.LogTail(5))
	}
}

func TestRepoRootHasGoMod(t *testing.T) {
	root, err := RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(root, "go.mod"))
	if err != nil || !strings.Contains(string(b), "module github.com/verbatim-kafka/verbatim") {
		t.Fatalf("go.mod at %s: %v", root, err)
	}
}

// TestToolNamesResolveInKafkaJars checks every bin-script alias against the
// installed Kafka 4.4 jars, so a class that moved in a new release shows up
// here rather than in the middle of a larger test.
func TestToolNamesResolveInKafkaJars(t *testing.T) {
	want := map[string]string{
		"kafka-storage":          "kafka.tools.StorageTool",
		"kafka-server":           "kafka.Kafka",
		"kafka-topics":           "org.apache.kafka.tools.TopicCommand",
		"kafka-configs":          "org.apache.kafka.tools.ConfigCommand",
		"kafka-console-producer": "org.apache.kafka.tools.ConsoleProducer",
		"kafka-console-consumer": "org.apache.kafka.tools.consumer.ConsoleConsumer",
		"kafka-dump-log":         "org.apache.kafka.tools.DumpLogSegments",
	}
	for alias := range toolAliases {
		fq := JavaClass(t, alias)
		if w, ok := want[alias]; ok && fq != w {
			t.Errorf("%s resolves to %s, want %s", alias, fq, w)
		}
		t.Logf("%-27s %s", alias, fq)
	}
}

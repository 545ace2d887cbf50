package interop

import (
	"archive/zip"
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// DefaultToolTimeout bounds one run of a peer tool (Java tool, kcat,
// Python) when Cmd.Timeout is zero.
const DefaultToolTimeout = 2 * time.Minute

// Cmd tunes one run of a peer tool. The zero value is usable.
type Cmd struct {
	// Stdin is fed to the tool's standard input; nil means no input
	// (standard input is closed at once).
	Stdin io.Reader
	// Timeout kills the tool (SIGKILL) when it runs longer. Zero means
	// DefaultToolTimeout.
	Timeout time.Duration
	// Env is added to the inherited environment.
	Env []string
	// Dir is the working directory; empty means a fresh t.TempDir().
	Dir string
	// JVMOpts replaces the default JVM options of Java tools (small heap,
	// C1 only, quiet logging). Ignored for other tools.
	JVMOpts []string
}

// Result is what a finished tool run produced.
type Result struct {
	Args     []string
	Stdout   string
	Stderr   string
	ExitCode int // -1 when killed (timeout) or not started
	Elapsed  time.Duration
}

func (r *Result) describe() string {
	return fmt.Sprintf("%s\nexit %d after %v\n--- stdout (tail) ---\n%s\n--- stderr (tail) ---\n%s",
		strings.Join(r.Args, " "), r.ExitCode, r.Elapsed.Round(time.Millisecond),
		tail(r.Stdout, 40), tail(r.Stderr, 40))
}

// Lines splits Stdout into lines without the trailing empty one.
func (r *Result) Lines() []string {
	s := strings.TrimRight(r.Stdout, "\n")
	if s == "" {
		return nil
	}
	return strings.Split(s, "\n")
}

// runTool runs argv and returns its result; the error is non-nil when the
// tool could not start, timed out or exited non-zero.
func runTool(t testing.TB, c Cmd, argv []string) (*Result, error) {
	t.Helper()
	timeout := c.Timeout
	if timeout <= 0 {
		timeout = DefaultToolTimeout
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Stdin = c.Stdin
	var stdout, stderr bytes.Buffer
	cmd.Stdout = &stdout
	cmd.Stderr = &stderr
	cmd.Env = append(os.Environ(), c.Env...)
	cmd.Dir = c.Dir
	if cmd.Dir == "" {
		cmd.Dir = t.TempDir()
	}
	// Kill the tool if the test binary dies first.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	cmd.WaitDelay = 5 * time.Second
	start := time.Now()
	err := cmd.Run()
	res := &Result{
		Args:     argv,
		Stdout:   stdout.String(),
		Stderr:   stderr.String(),
		ExitCode: -1,
		Elapsed:  time.Since(start),
	}
	if cmd.ProcessState != nil {
		res.ExitCode = cmd.ProcessState.ExitCode()
	}
	if ctx.Err() == context.DeadlineExceeded {
		return res, fmt.Errorf("timed out after %v: %s", timeout, res.describe())
	}
	if err != nil {
		return res, fmt.Errorf("%v: %s", err, res.describe())
	}
	return res, nil
}

// RunTool runs any program (argv[0] looked up in PATH or given as a path)
// with the same timeout and capture rules as the peer tools.
func RunTool(t testing.TB, c Cmd, argv ...string) (*Result, error) {
	t.Helper()
	if len(argv) == 0 {
		t.Fatalf("interop: RunTool: empty argv")
	}
	return runTool(t, c, argv)
}

// ---- Java tools from the Kafka jars ----------------------------------------

// toolAliases maps the names of the Kafka distribution's bin/ scripts to the
// simple class names they run, so tests can say either.
var toolAliases = map[string]string{
	"kafka-storage":             "StorageTool",
	"kafka-topics":              "TopicCommand",
	"kafka-configs":             "ConfigCommand",
	"kafka-acls":                "AclCommand",
	"kafka-console-producer":    "ConsoleProducer",
	"kafka-console-consumer":    "ConsoleConsumer",
	"kafka-producer-perf-test":  "ProducerPerformance",
	"kafka-consumer-perf-test":  "ConsumerPerformance",
	"kafka-verifiable-producer": "VerifiableProducer",
	"kafka-verifiable-consumer": "VerifiableConsumer",
	"kafka-dump-log":            "DumpLogSegments",
	"kafka-get-offsets":         "GetOffsetShell",
	"kafka-consumer-groups":     "ConsumerGroupCommand",
	"kafka-transactions":        "TransactionsCommand",
	"kafka-leader-election":     "LeaderElectionCommand",
	"kafka-reassign-partitions": "ReassignPartitionsCommand",
	"kafka-metadata-quorum":     "MetadataQuorumCommand",
	"kafka-features":            "FeatureCommand",
	"kafka-delete-records":      "DeleteRecordsCommand",
	"kafka-broker-api-versions": "BrokerApiVersionsCommand",
	"kafka-e2e-latency":         "EndToEndLatency",
	"kafka-server":              "Kafka",
}

// classIndex maps a simple class name to the fully qualified names found in
// the Kafka jars.
type classIndex struct {
	lib     string
	classes map[string][]string
}

var (
	classIdxOnce sync.Once
	classIdx     *classIndex
	classIdxErr  error
)

// KafkaLibDir is where install.sh copies the Kafka classpath.
func KafkaLibDir() (string, error) {
	p, err := PeersDir()
	if err != nil {
		return "", err
	}
	return filepath.Join(p, "kafka", "lib"), nil
}

func loadClassIndex() (*classIndex, error) {
	classIdxOnce.Do(func() {
		lib, err := KafkaLibDir()
		if err != nil {
			classIdxErr = err
			return
		}
		classIdx, classIdxErr = indexJars(lib)
	})
	return classIdx, classIdxErr
}

// indexJars lists the top-level classes of every kafka*.jar in lib.
func indexJars(lib string) (*classIndex, error) {
	jars, _ := filepath.Glob(filepath.Join(lib, "kafka*.jar"))
	if len(jars) == 0 {
		return nil, fmt.Errorf("no Kafka jars in %s", lib)
	}
	idx := &classIndex{lib: lib, classes: map[string][]string{}}
	for _, jar := range jars {
		zr, err := zip.OpenReader(jar)
		if err != nil {
			return nil, fmt.Errorf("open %s: %w", jar, err)
		}
		for _, f := range zr.File {
			name, ok := strings.CutSuffix(f.Name, ".class")
			if !ok || strings.Contains(name, "$") || strings.HasPrefix(name, "META-INF/") {
				continue
			}
			fq := strings.ReplaceAll(name, "/", ".")
			simple := fq[strings.LastIndexByte(fq, '.')+1:]
			idx.classes[simple] = append(idx.classes[simple], fq)
		}
		zr.Close()
	}
	return idx, nil
}

// packageRank orders candidate packages for a simple class name: the tools
// package first (where most tools live in 4.x), then the older Scala homes.
func packageRank(fq string) int {
	switch {
	case strings.HasPrefix(fq, "org.apache.kafka.tools."):
		return 0
	case strings.HasPrefix(fq, "kafka.tools."):
		return 1
	case strings.HasPrefix(fq, "kafka.admin."):
		return 2
	case strings.HasPrefix(fq, "kafka.") && strings.Count(fq, ".") == 1:
		return 3
	}
	return 4
}

// resolveClass turns a tool name (bin script name, simple class name or a
// fully qualified class name) into a fully qualified class name found in the
// jars.
func (idx *classIndex) resolve(name string) (string, error) {
	if alias, ok := toolAliases[strings.TrimSuffix(name, ".sh")]; ok {
		name = alias
	}
	if strings.Contains(name, ".") {
		simple := name[strings.LastIndexByte(name, '.')+1:]
		for _, fq := range idx.classes[simple] {
			if fq == name {
				return fq, nil
			}
		}
		return "", fmt.Errorf("class %s not found in the Kafka jars under %s", name, idx.lib)
	}
	cands := append([]string(nil), idx.classes[name]...)
	if len(cands) == 0 {
		return "", fmt.Errorf("no class named %s in the Kafka jars under %s", name, idx.lib)
	}
	sort.Slice(cands, func(i, j int) bool {
		ri, rj := packageRank(cands[i]), packageRank(cands[j])
		if ri != rj {
			return ri < rj
		}
		if len(cands[i]) != len(cands[j]) {
			return len(cands[i]) < len(cands[j])
		}
		return cands[i] < cands[j]
	})
	return cands[0], nil
}

// JavaClass resolves a Kafka tool name to its main class by scanning the
// Kafka jars (cached for the process). name may be a bin script name
// ("kafka-topics"), a simple class name ("TopicCommand") or a fully
// qualified class name. Fails the test when the jars are missing or the
// class is not there.
func JavaClass(t testing.TB, name string) string {
	t.Helper()
	javaBinary(t) // a missing JDK is reported before missing jars
	idx, err := loadClassIndex()
	if err != nil {
		missingPeer(t, "Apache Kafka jars", err)
	}
	fq, err := idx.resolve(name)
	if err != nil {
		t.Fatalf("interop: %v", err)
	}
	return fq
}

func javaBinary(t testing.TB) string {
	t.Helper()
	if home := os.Getenv("JAVA_HOME"); home != "" {
		p := filepath.Join(home, "bin", "java")
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	p, err := exec.LookPath("java")
	if err != nil {
		missingPeer(t, "java (JDK 17+)", err)
	}
	return p
}

// defaultToolJVMOpts keeps short-lived tool JVMs cheap on a small machine.
var defaultToolJVMOpts = []string{
	"-Xms64m", "-Xmx256m",
	"-XX:+UseSerialGC",
	"-XX:TieredStopAtLevel=1",
	"-Djava.awt.headless=true",
	"-Dorg.slf4j.simpleLogger.defaultLogLevel=warn",
	"-Dlog4j2.level=warn",
}

func javaArgv(t testing.TB, c Cmd, name string, args []string) []string {
	t.Helper()
	class := JavaClass(t, name)
	idx, _ := loadClassIndex()
	opts := c.JVMOpts
	if opts == nil {
		opts = defaultToolJVMOpts
	}
	argv := []string{javaBinary(t)}
	argv = append(argv, opts...)
	argv = append(argv, "-cp", filepath.Join(idx.lib, "*"), class)
	return append(argv, args...)
}

// RunJavaTool runs a Kafka Java tool (see JavaClass for name) with args and
// returns its output; the error is non-nil on timeout or a non-zero exit.
// A missing JDK or missing jars fail the test.
func RunJavaTool(t testing.TB, c Cmd, name string, args ...string) (*Result, error) {
	t.Helper()
	return runTool(t, c, javaArgv(t, c, name, args))
}

// JavaTool runs a Kafka Java tool like RunJavaTool and fails the test when
// it does not exit 0 in time.
func JavaTool(t testing.TB, name string, args ...string) *Result {
	t.Helper()
	res, err := RunJavaTool(t, Cmd{}, name, args...)
	if err != nil {
		t.Fatalf("interop: java tool %s: %v", name, err)
	}
	return res
}

// tail returns the last n lines of s.
func tail(s string, n int) string {
	s = strings.TrimRight(s, "\n")
	lines := strings.Split(s, "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

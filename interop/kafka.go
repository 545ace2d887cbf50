package interop

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// KafkaOptions tunes the Apache Kafka peer started by StartKafka and
// StartKafkaCluster. The zero value gives a small test-friendly broker.
type KafkaOptions struct {
	// Props are extra or replacing server.properties entries, e.g.
	// {"log.cleaner.backoff.ms": "100"}. They win over the harness defaults
	// except for the listener/quorum/log.dirs keys the harness owns.
	Props map[string]string
	// Overrides are passed as `--override key=value` on kafka.Kafka's
	// command line (they win over server.properties).
	Overrides map[string]string
	// HeapMB is each node's JVM heap (-Xms = -Xmx). Default 384.
	HeapMB int
	// JVMOpts are extra JVM options for the broker processes (appended
	// last, so they win).
	JVMOpts []string
	// FullJIT keeps the JVM's optimising compiler (C2). By default the
	// brokers run with C1 only, which starts faster and costs about 40% less
	// CPU over a short test on a 2-core machine; benchmarks that use Kafka as
	// the performance peer set FullJIT.
	FullJIT bool
	// StartTimeout bounds formatting plus start-up. Default 120s.
	StartTimeout time.Duration
	// StopGrace is how long a node gets after SIGTERM before SIGKILL.
	// Default 30s.
	StopGrace time.Duration
	// ClusterID is the KRaft cluster id (22-char base64url UUID); random
	// when empty.
	ClusterID string
	// LogLevel is the slf4j-simple level of the broker log (default info).
	LogLevel string
}

// KafkaNode is one combined broker+controller process.
type KafkaNode struct {
	ID             int
	Addr           string // PLAINTEXT listener, 127.0.0.1:port
	ControllerAddr string // CONTROLLER listener
	Dir            string // node directory: properties, log, data
	DataDir        string // log.dirs
	PropsPath      string
	LogPath        string

	proc    *Proc
	cluster *Kafka
}

// Kafka is a running Apache Kafka (KRaft) peer of one or more combined
// nodes on loopback.
type Kafka struct {
	ClusterID string
	Nodes     []*KafkaNode

	opts KafkaOptions
}

// StartKafka starts a single combined KRaft node (static quorum) on
// 127.0.0.1 with free ports and a fresh data directory under t.TempDir(),
// waits until it answers, and stops it on cleanup. Missing Java or jars fail
// the test with a pointer to `make peers`.
func StartKafka(t testing.TB, opts KafkaOptions) *Kafka {
	t.Helper()
	return StartKafkaCluster(t, 1, opts)
}

// StartKafkaCluster starts n combined KRaft nodes that form one static
// quorum, waits until every broker is registered, and stops them on cleanup.
func StartKafkaCluster(t testing.TB, n int, opts KafkaOptions) *Kafka {
	t.Helper()
	if n < 1 {
		t.Fatalf("interop: StartKafkaCluster: need at least one node, got %d", n)
	}
	if opts.HeapMB <= 0 {
		opts.HeapMB = 384
	}
	if opts.StartTimeout <= 0 {
		opts.StartTimeout = 120 * time.Second
	}
	if opts.StopGrace <= 0 {
		opts.StopGrace = 30 * time.Second
	}
	if opts.LogLevel == "" {
		opts.LogLevel = "info"
	}
	if opts.ClusterID == "" {
		opts.ClusterID = randomClusterID(t)
	}
	javaBinary(t)
	JavaClass(t, "kafka.Kafka") // fail early when the jars are missing

	// Free ports are found by binding and closing; another process can take
	// one before Kafka binds it. That (and only that) is retried with new
	// ports and fresh directories.
	for attempt := 1; ; attempt++ {
		k, err := startKafkaAttempt(t, n, opts)
		if err == nil {
			return k
		}
		if attempt < 3 && errors.Is(err, errPortTaken) {
			t.Logf("interop: Kafka start attempt %d: %v; retrying on new ports", attempt, err)
			k.Stop()
			continue
		}
		t.Fatalf("interop: Kafka (%d node(s)) did not become ready: %v", n, err)
	}
}

// errPortTaken marks a start-up that failed because a listener port was
// taken between FreePorts and the bind.
var errPortTaken = errors.New("listener port already in use")

func startKafkaAttempt(t testing.TB, n int, opts KafkaOptions) (*Kafka, error) {
	t.Helper()
	k := &Kafka{ClusterID: opts.ClusterID, opts: opts}
	base := t.TempDir()
	ports := FreePorts(t, 2*n)
	var voters []string
	for i := 0; i < n; i++ {
		node := &KafkaNode{
			ID:             i + 1,
			Addr:           Addr(ports[2*i]),
			ControllerAddr: Addr(ports[2*i+1]),
			Dir:            filepath.Join(base, fmt.Sprintf("node%d", i+1)),
			cluster:        k,
		}
		node.DataDir = filepath.Join(node.Dir, "data")
		node.PropsPath = filepath.Join(node.Dir, "server.properties")
		node.LogPath = filepath.Join(node.Dir, "server.log")
		if err := os.MkdirAll(node.Dir, 0o755); err != nil {
			t.Fatalf("interop: %v", err)
		}
		k.Nodes = append(k.Nodes, node)
		voters = append(voters, fmt.Sprintf("%d@%s", node.ID, node.ControllerAddr))
	}
	for _, node := range k.Nodes {
		if err := os.WriteFile(node.PropsPath, []byte(node.properties(n, strings.Join(voters, ","), opts.Props)), 0o644); err != nil {
			t.Fatalf("interop: write %s: %v", node.PropsPath, err)
		}
	}

	keepLogsOnFailure(t, func() []*Proc {
		var ps []*Proc
		for _, node := range k.Nodes {
			if node.proc != nil {
				ps = append(ps, node.proc)
			}
		}
		return ps
	})
	t.Cleanup(k.Stop)

	// Formatting is one short JVM per node; run them side by side.
	errs := make([]error, len(k.Nodes))
	var wg sync.WaitGroup
	for i, node := range k.Nodes {
		argv := javaArgv(t, Cmd{}, "StorageTool", []string{"format", "-t", k.ClusterID, "-c", node.PropsPath})
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = node.format(t, argv)
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatalf("interop: %v", err)
		}
	}
	for _, node := range k.Nodes {
		node.start(t)
	}
	ctx, cancel := context.WithTimeout(context.Background(), opts.StartTimeout)
	defer cancel()
	if err := k.waitReady(ctx); err != nil {
		for _, node := range k.Nodes {
			if b, rerr := os.ReadFile(node.LogPath); rerr == nil && strings.Contains(string(b), "Address already in use") {
				return k, fmt.Errorf("node %d: %w: %v", node.ID, errPortTaken, err)
			}
		}
		return k, err
	}
	return k, nil
}

func randomClusterID(t testing.TB) string {
	for {
		var b [16]byte
		if _, err := rand.Read(b[:]); err != nil {
			t.Fatalf("interop: random cluster id: %v", err)
		}
		id := base64.RawURLEncoding.EncodeToString(b[:])
		// An id starting with '-' would be read as an option by the
		// storage tool's argument parser.
		if id[0] != '-' {
			return id
		}
	}
}

func (node *KafkaNode) properties(n int, voters string, extra map[string]string) string {
	rf := "1"
	minISR := "1"
	if n >= 3 {
		rf, minISR = "3", "2"
	}
	props := map[string]string{
		"offsets.topic.replication.factor":                 rf,
		"offsets.topic.num.partitions":                     "1",
		"transaction.state.log.replication.factor":         rf,
		"transaction.state.log.min.isr":                    minISR,
		"transaction.state.log.num.partitions":             "1",
		"share.coordinator.state.topic.replication.factor": rf,
		"share.coordinator.state.topic.min.isr":            minISR,
		"group.initial.rebalance.delay.ms":                 "0",
		"num.partitions":                                   "1",
		"default.replication.factor":                       "1",
		"auto.create.topics.enable":                        "true",
		"log.cleaner.dedupe.buffer.size":                   "8388608",
		"log.cleaner.backoff.ms":                           "200",
		"num.network.threads":                              "2",
		"num.io.threads":                                   "2",
		"num.recovery.threads.per.data.dir":                "1",
		"background.threads":                               "2",
	}
	for k, v := range extra {
		props[k] = v
	}
	// The harness owns identity, listeners and storage location.
	owned := map[string]string{
		"process.roles":                  "broker,controller",
		"node.id":                        strconv.Itoa(node.ID),
		"controller.quorum.voters":       voters,
		"listeners":                      "PLAINTEXT://" + node.Addr + ",CONTROLLER://" + node.ControllerAddr,
		"advertised.listeners":           "PLAINTEXT://" + node.Addr,
		"controller.listener.names":      "CONTROLLER",
		"inter.broker.listener.name":     "PLAINTEXT",
		"listener.security.protocol.map": "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT",
		"log.dirs":                       node.DataDir,
	}
	// A dynamic-quorum key would conflict with the static voters.
	delete(props, "controller.quorum.bootstrap.servers")
	for k, v := range owned {
		props[k] = v
	}
	keys := make([]string, 0, len(props))
	for k := range props {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	b.WriteString("# written by the Verbatim interop harness\n")
	for _, k := range keys {
		fmt.Fprintf(&b, "%s=%s\n", k, props[k])
	}
	return b.String()
}

func (node *KafkaNode) jvmArgs(heapMB int, logLevel string, extra []string) []string {
	heap := fmt.Sprintf("%dm", heapMB)
	args := []string{
		"-Xms" + heap, "-Xmx" + heap,
		"-XX:+UseG1GC", "-XX:MaxGCPauseMillis=20",
		"-XX:ParallelGCThreads=1", "-XX:ConcGCThreads=1", "-XX:CICompilerCount=2",
		"-Djava.awt.headless=true",
		"-Dorg.slf4j.simpleLogger.defaultLogLevel=" + logLevel,
		"-Dorg.slf4j.simpleLogger.showDateTime=true",
		"-Dlog4j2.level=warn",
	}
	return append(args, extra...)
}

// format runs the storage tool for the node (static quorum: no
// --standalone). It may run on another goroutine, so it returns its error
// instead of failing the test.
func (node *KafkaNode) format(t testing.TB, argv []string) error {
	res, err := runTool(t, Cmd{Dir: node.Dir, Timeout: 90 * time.Second}, argv)
	if err != nil {
		return fmt.Errorf("format Kafka node %d: %w", node.ID, err)
	}
	return os.WriteFile(filepath.Join(node.Dir, "format.log"), []byte(res.Stdout+res.Stderr), 0o644)
}

func (node *KafkaNode) start(t testing.TB) {
	t.Helper()
	o := node.cluster.opts
	lib, _ := KafkaLibDir()
	argv := []string{javaBinary(t)}
	jvm := node.jvmArgs(o.HeapMB, o.LogLevel, nil)
	if !o.FullJIT {
		jvm = append(jvm, "-XX:TieredStopAtLevel=1")
	}
	argv = append(argv, append(jvm, o.JVMOpts...)...)
	argv = append(argv, "-cp", filepath.Join(lib, "*"), JavaClass(t, "kafka.Kafka"), node.PropsPath)
	keys := make([]string, 0, len(o.Overrides))
	for k := range o.Overrides {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		argv = append(argv, "--override", k+"="+o.Overrides[k])
	}
	node.proc = StartProc(t, fmt.Sprintf("kafka-node%d", node.ID), node.LogPath, node.Dir, nil, argv...)
}

// PID is the node's JVM process id (0 when not running).
func (node *KafkaNode) PID() int {
	if node.proc == nil {
		return 0
	}
	return node.proc.PID()
}

// Running reports whether the node's process is alive.
func (node *KafkaNode) Running() bool {
	return node.proc != nil && node.proc.Alive() == nil
}

// Stop stops the node (SIGTERM, then SIGKILL after the grace period) and
// reports whether it exited on SIGTERM.
func (node *KafkaNode) Stop() bool {
	if node.proc == nil {
		return true
	}
	return node.proc.Stop(node.cluster.opts.StopGrace)
}

// Kill SIGKILLs the node (a crash).
func (node *KafkaNode) Kill() {
	if node.proc != nil {
		node.proc.Signal(syscall.SIGKILL)
		<-node.proc.Done()
	}
}

// Restart stops the node if it runs and starts it again on the same ports
// and data, then waits until the whole cluster answers. On a single node
// this bumps partition leader epochs (leader goes away, comes back).
func (node *KafkaNode) Restart(t testing.TB) {
	t.Helper()
	node.Stop()
	node.start(t)
	ctx, cancel := context.WithTimeout(context.Background(), node.cluster.opts.StartTimeout)
	defer cancel()
	if err := node.cluster.waitReady(ctx); err != nil {
		t.Fatalf("interop: Kafka node %d did not come back: %v", node.ID, err)
	}
}

// LogTail returns the last n lines of the node's server log.
func (node *KafkaNode) LogTail(n int) string {
	if node.proc == nil {
		return ""
	}
	return node.proc.LogTail(n)
}

// Bootstrap is the comma-separated list of the nodes' PLAINTEXT addresses.
func (k *Kafka) Bootstrap() string {
	return strings.Join(k.Addrs(), ",")
}

// Addrs lists the nodes' PLAINTEXT addresses.
func (k *Kafka) Addrs() []string {
	addrs := make([]string, len(k.Nodes))
	for i, n := range k.Nodes {
		addrs[i] = n.Addr
	}
	return addrs
}

// Stop stops every node at once (SIGTERM, shared grace, SIGKILL). It is
// registered as a test cleanup and is safe to call more than once.
func (k *Kafka) Stop() {
	var ps []*Proc
	for _, n := range k.Nodes {
		if n.proc != nil {
			ps = append(ps, n.proc)
		}
	}
	StopAll(k.opts.StopGrace, ps...)
}

// Client returns a franz-go client seeded with every node, closed on test
// cleanup.
func (k *Kafka) Client(t testing.TB, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(k.Addrs()...)}, opts...)...)
	if err != nil {
		t.Fatalf("interop: kgo client: %v", err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// Admin returns a kadm client over a fresh franz-go client.
func (k *Kafka) Admin(t testing.TB) *kadm.Client {
	t.Helper()
	return kadm.NewClient(k.Client(t))
}

// CreateTopic creates a topic and fails the test on error.
func (k *Kafka) CreateTopic(t testing.TB, topic string, partitions int32, rf int16, configs map[string]string) {
	t.Helper()
	var cfg map[string]*string
	if len(configs) > 0 {
		cfg = make(map[string]*string, len(configs))
		for key, v := range configs {
			cfg[key] = kadm.StringPtr(v)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	resp, err := k.Admin(t).CreateTopic(ctx, partitions, rf, cfg, topic)
	if err == nil {
		err = resp.Err
	}
	if err != nil {
		t.Fatalf("interop: create topic %s: %v", topic, err)
	}
}

// waitReady polls until every node is running, answers ApiVersions, and
// the cluster metadata lists every broker.
func (k *Kafka) waitReady(ctx context.Context) error {
	alive := func() error {
		for _, n := range k.Nodes {
			if err := n.proc.Alive(); err != nil {
				return fmt.Errorf("%w\n--- %s log tail ---\n%s", err, n.proc.Name, n.proc.LogTail(40))
			}
		}
		return nil
	}
	for _, n := range k.Nodes {
		if err := WaitForPort(ctx, n.Addr, alive); err != nil {
			return err
		}
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(k.Addrs()...), kgo.RequestRetries(0))
	if err != nil {
		return err
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	var last error
	for {
		if err := alive(); err != nil {
			return err
		}
		pctx, pcancel := context.WithTimeout(ctx, 5*time.Second)
		brokers, err := adm.ListBrokers(pctx)
		pcancel()
		switch {
		case err != nil:
			last = err
		case len(brokers) < len(k.Nodes):
			last = fmt.Errorf("%d of %d brokers registered", len(brokers), len(k.Nodes))
		default:
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w (last: %v)", ctx.Err(), last)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

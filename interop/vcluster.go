package interop

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// VCluster is a Verbatim cluster started by scripts/cluster.sh: N brokers
// on loopback, each with its embedded etcd member, under Dir.
type VCluster struct {
	Dir string
	Bin string
	// Nodes are the brokers, node id i+1 at index i.
	Nodes        []VNode
	bs           string
	startTimeout time.Duration
	// etcdBin is the external etcd's binary, empty with embedded members.
	etcdBin string
	// EtcdEndpoints are the external etcd's client URLs (comma-separated),
	// empty with embedded members.
	EtcdEndpoints string
}

// VNode is one broker of a VCluster.
type VNode struct {
	ID      int32
	Addr    string // the PLAINTEXT listener, host:port
	Dir     string // DIR/node-<id>: server.properties, data, etcd, verbatim.log, pid
	LogPath string
}

// VClusterOptions tunes StartVCluster.
type VClusterOptions struct {
	// Props are server.properties lines (name=value) appended to every
	// node's file, winning over the script's; cluster.sh replaces {node},
	// {kafka} and {port:NAME} in them per node (a second listener's port).
	Props []string
	// StartTimeout bounds start and every restart (default 90 s).
	StartTimeout time.Duration
	// EtcdMembers > 0 runs an external etcd cluster of that many members
	// (cluster.sh etcd-start, the binary EtcdBin) and the brokers against
	// it, without embedded members.
	EtcdMembers int
	EtcdBin     string
}

// StartVCluster runs `scripts/cluster.sh start DIR n` with the binary bin
// (BuildVerbatim's) and stops the cluster on cleanup, printing the end of
// every node's log if the test failed.
func StartVCluster(t testing.TB, bin string, n int, opts VClusterOptions) *VCluster {
	t.Helper()
	if opts.StartTimeout <= 0 {
		opts.StartTimeout = 90 * time.Second
	}
	c := &VCluster{Dir: filepath.Join(t.TempDir(), "cluster"), Bin: bin, startTimeout: opts.StartTimeout}
	if opts.EtcdMembers > 0 {
		c.etcdBin = opts.EtcdBin
	}
	env := c.env(opts)
	t.Cleanup(func() {
		if t.Failed() {
			for _, nd := range c.Nodes {
				if b, err := os.ReadFile(nd.LogPath); err == nil {
					t.Logf("node %d log (%s), last lines:\n%s", nd.ID, nd.LogPath, tail(string(b), 40))
				}
			}
		}
		c.stop(t, env)
	})
	props := opts.Props
	if opts.EtcdMembers > 0 {
		res, err := RunTool(t, Cmd{Env: env, Timeout: opts.StartTimeout + 30*time.Second}, c.script(t), "etcd-start", c.Dir, strconv.Itoa(opts.EtcdMembers))
		if err != nil {
			t.Fatalf("interop: cluster.sh etcd-start: %v", err)
		}
		lines := res.Lines()
		if len(lines) == 0 || strings.Count(lines[len(lines)-1], ",") != opts.EtcdMembers-1 {
			t.Fatalf("interop: cluster.sh etcd-start printed no %d client URLs as its last line:\n%s", opts.EtcdMembers, res.describe())
		}
		c.EtcdEndpoints = lines[len(lines)-1]
		props = append([]string{"metadata.etcd.endpoints=" + c.EtcdEndpoints}, props...)
	}
	args := append([]string{c.script(t), "start", c.Dir, strconv.Itoa(n)}, props...)
	res, err := RunTool(t, Cmd{Env: env, Timeout: opts.StartTimeout + 30*time.Second}, args...)
	c.readNodes(t, n)
	if err != nil {
		t.Fatalf("interop: cluster.sh start: %v", err)
	}
	lines := res.Lines()
	if len(lines) == 0 || strings.Count(lines[len(lines)-1], ",") != n-1 {
		t.Fatalf("interop: cluster.sh start printed no bootstrap list of %d brokers as its last line:\n%s", n, res.describe())
	}
	c.bs = lines[len(lines)-1]
	return c
}

func (c *VCluster) env(opts VClusterOptions) []string {
	env := []string{"VERBATIM_BIN=" + c.Bin, fmt.Sprintf("CLUSTER_START_TIMEOUT=%d", int(opts.StartTimeout/time.Second))}
	if c.etcdBin != "" {
		env = append(env, "ETCD_BIN="+c.etcdBin)
	}
	return env
}

func (c *VCluster) script(t testing.TB) string {
	t.Helper()
	root, err := RepoRoot()
	if err != nil {
		t.Fatalf("interop: %v", err)
	}
	return filepath.Join(root, "scripts", "cluster.sh")
}

// readNodes reads the nodes' addresses from their server.properties.
func (c *VCluster) readNodes(t testing.TB, n int) {
	t.Helper()
	c.Nodes = c.Nodes[:0]
	for i := 1; i <= n; i++ {
		d := filepath.Join(c.Dir, fmt.Sprintf("node-%d", i))
		nd := VNode{ID: int32(i), Dir: d, LogPath: filepath.Join(d, "verbatim.log")}
		if b, err := os.ReadFile(filepath.Join(d, "server.properties")); err == nil {
			for _, l := range strings.Split(string(b), "\n") {
				if a, ok := strings.CutPrefix(l, "listeners=PLAINTEXT://"); ok {
					nd.Addr, _, _ = strings.Cut(a, ",") // more listeners may follow
				}
			}
		}
		c.Nodes = append(c.Nodes, nd)
	}
}

// Bootstrap is the bootstrap list cluster.sh printed.
func (c *VCluster) Bootstrap() string { return c.bs }

// Node returns the broker of node id id.
func (c *VCluster) Node(t testing.TB, id int32) VNode {
	t.Helper()
	if id < 1 || int(id) > len(c.Nodes) {
		t.Fatalf("interop: no node %d in a cluster of %d", id, len(c.Nodes))
	}
	return c.Nodes[id-1]
}

// PID is the node's process id as cluster.sh recorded it (0 if none).
func (c *VCluster) PID(t testing.TB, id int32) int {
	b, err := os.ReadFile(filepath.Join(c.Node(t, id).Dir, "pid"))
	if err != nil {
		return 0
	}
	pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	return pid
}

// node runs `cluster.sh CMD DIR ID`, failing the test if it fails.
func (c *VCluster) node(t testing.TB, cmd string, id int32, timeout time.Duration) {
	t.Helper()
	args := []string{c.script(t), cmd, c.Dir, strconv.Itoa(int(id))}
	if _, err := RunTool(t, Cmd{Env: c.env(VClusterOptions{StartTimeout: timeout}), Timeout: timeout + 30*time.Second}, args...); err != nil {
		t.Fatalf("interop: cluster.sh %s %d: %v", cmd, id, err)
	}
}

// Kill SIGKILLs the node (returns once it is gone).
func (c *VCluster) Kill(t testing.TB, id int32) { t.Helper(); c.node(t, "kill", id, 30*time.Second) }

// Restart starts the node again (stopping it first if it runs) and waits
// until it rejoined.
func (c *VCluster) Restart(t testing.TB, id int32) {
	t.Helper()
	c.node(t, "restart", id, c.startTimeout)
}

// KillEtcd SIGKILLs member m (1-based) of the external etcd.
func (c *VCluster) KillEtcd(t testing.TB, m int) {
	t.Helper()
	c.node(t, "etcd-kill", int32(m), 30*time.Second)
}

// RestartEtcd starts member m of the external etcd again from its data
// and waits until it is healthy.
func (c *VCluster) RestartEtcd(t testing.TB, m int) {
	t.Helper()
	c.node(t, "etcd-restart", int32(m), c.startTimeout)
}

// Pause SIGSTOPs the node.
func (c *VCluster) Pause(t testing.TB, id int32) { t.Helper(); c.node(t, "pause", id, 30*time.Second) }

// Resume SIGCONTs the node.
func (c *VCluster) Resume(t testing.TB, id int32) {
	t.Helper()
	c.node(t, "resume", id, 30*time.Second)
}

// Stop stops every broker (controlled shutdown) and then the external
// etcd, if any: cluster.sh stop. The cleanup's stop finds nothing left.
func (c *VCluster) Stop(t testing.TB) {
	t.Helper()
	if _, err := RunTool(t, Cmd{Env: c.env(VClusterOptions{StartTimeout: c.startTimeout}), Timeout: 90 * time.Second}, c.script(t), "stop", c.Dir); err != nil {
		t.Fatalf("interop: cluster.sh stop: %v", err)
	}
}

// stop runs cluster.sh stop, then SIGKILLs any pid still alive (a script
// that could not run must not leave brokers behind).
func (c *VCluster) stop(t testing.TB, env []string) {
	if _, err := os.Stat(c.Dir); err != nil {
		return
	}
	if _, err := RunTool(t, Cmd{Env: env, Timeout: 60 * time.Second}, c.script(t), "stop", c.Dir); err != nil {
		t.Logf("interop: cluster.sh stop: %v", err)
	}
	for _, nd := range c.Nodes {
		pid := c.PID(t, nd.ID)
		if pid <= 0 {
			continue
		}
		// Only our broker: the pid may have been reused since.
		if cmd, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid)); err == nil && bytes.Contains(cmd, []byte(nd.Dir)) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
	// The external etcd's members likewise.
	members, _ := filepath.Glob(filepath.Join(c.Dir, "etcd-*", "pid"))
	for _, f := range members {
		b, _ := os.ReadFile(f)
		pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
		if pid <= 0 {
			continue
		}
		if cmd, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid)); err == nil && bytes.Contains(cmd, []byte(filepath.Dir(f))) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
}

// BuildEtcd compiles the etcd server of the module's etcd dependency (its
// main package, go.etcd.io/etcd/server/v3) into a temporary directory of
// the test and returns the binary's path, for VClusterOptions.EtcdBin.
func BuildEtcd(t testing.TB) string {
	t.Helper()
	return goBuild(t, "go.etcd.io/etcd/server/v3", "etcd")
}

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
	args := append([]string{c.script(t), "start", c.Dir, strconv.Itoa(n)}, opts.Props...)
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
	return []string{"VERBATIM_BIN=" + c.Bin, fmt.Sprintf("CLUSTER_START_TIMEOUT=%d", int(opts.StartTimeout/time.Second))}
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

// Pause SIGSTOPs the node.
func (c *VCluster) Pause(t testing.TB, id int32) { t.Helper(); c.node(t, "pause", id, 30*time.Second) }

// Resume SIGCONTs the node.
func (c *VCluster) Resume(t testing.TB, id int32) {
	t.Helper()
	c.node(t, "resume", id, 30*time.Second)
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
}

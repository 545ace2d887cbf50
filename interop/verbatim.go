package interop

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"
)

// Verbatim is a running `verbatim serve` process started by StartVerbatim.
type Verbatim struct {
	Addr    string
	DataDir string
	Bin     string
	Proc    *Proc
}

// VerbatimOptions tunes StartVerbatim.
type VerbatimOptions struct {
	// DataDir is the broker's data directory; a fresh t.TempDir() when
	// empty.
	DataDir string
	// Args are extra `serve` flags.
	Args []string
	// StartTimeout bounds the wait for the listener. Default 30s.
	StartTimeout time.Duration
}

var buildMu sync.Mutex

// BuildVerbatim compiles ./cmd/verbatim from the repository root into a
// temporary directory of the test and returns the binary's path. The Go
// build cache makes repeated builds cheap, and building from source keeps
// the test honest about the code under test (a stale bin/ cannot pass it).
func BuildVerbatim(t testing.TB) string {
	t.Helper()
	return goBuild(t, "./cmd/verbatim", "verbatim")
}

// goBuild builds the main package pkg, in the repository's module, into
// a temporary directory of the test as name and returns its path.
func goBuild(t testing.TB, pkg, name string) string {
	t.Helper()
	root, err := RepoRoot()
	if err != nil {
		t.Fatalf("interop: %v", err)
	}
	buildMu.Lock()
	defer buildMu.Unlock()
	bin := filepath.Join(t.TempDir(), name)
	goBin := filepath.Join(os.Getenv("GOROOT"), "bin", "go")
	if _, err := os.Stat(goBin); err != nil {
		goBin = "go"
	}
	cmd := exec.Command(goBin, "build", "-o", bin, pkg)
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("interop: go build %s: %v\n%s", pkg, err, out)
	}
	return bin
}

// StartVerbatim runs `verbatim serve --listen 127.0.0.1:<free> --data-dir
// <dir>` with the binary bin, waits until the port accepts connections, and
// stops the process on cleanup (keeping its log on failure). A listener port
// taken by someone else between FreePorts and the bind is retried on a new
// port.
func StartVerbatim(t testing.TB, bin string, opts VerbatimOptions) *Verbatim {
	t.Helper()
	if opts.DataDir == "" {
		opts.DataDir = filepath.Join(t.TempDir(), "data")
	}
	if opts.StartTimeout <= 0 {
		opts.StartTimeout = 30 * time.Second
	}
	for attempt := 1; ; attempt++ {
		v := &Verbatim{Addr: Addr(FreePorts(t, 1)[0]), DataDir: opts.DataDir, Bin: bin}
		logPath := filepath.Join(t.TempDir(), "verbatim.log")
		argv := append([]string{bin, "serve", "--listen", v.Addr, "--data-dir", v.DataDir}, opts.Args...)
		keepLogsOnFailure(t, func() []*Proc { return []*Proc{v.Proc} })
		v.Proc = StartProc(t, "verbatim", logPath, filepath.Dir(logPath), nil, argv...)
		t.Cleanup(func() { v.Proc.Stop(10 * time.Second) })
		ctx, cancel := context.WithTimeout(context.Background(), opts.StartTimeout)
		err := WaitForPort(ctx, v.Addr, v.Proc.Alive)
		cancel()
		if err == nil {
			return v
		}
		logTail := v.Proc.LogTail(40)
		if attempt < 3 && v.Proc.Alive() != nil && strings.Contains(strings.ToLower(logTail), "address already in use") {
			t.Logf("interop: verbatim start attempt %d: %s taken; retrying on a new port", attempt, v.Addr)
			continue
		}
		t.Fatalf("interop: verbatim serve did not start listening: %v\n--- log tail ---\n%s", err, logTail)
	}
}

// ServeConfig runs `verbatim serve --config FILE` with the binary bin, the
// file holding props (server.properties lines) in dir, plus args; it
// waits until every address in addrs accepts connections and stops the
// process on cleanup (keeping its log on failure).
func ServeConfig(t testing.TB, bin, dir string, props []string, addrs []string, args ...string) *Proc {
	t.Helper()
	cfg := filepath.Join(dir, "server.properties")
	if err := os.WriteFile(cfg, []byte(strings.Join(props, "\n")+"\n"), 0o600); err != nil {
		t.Fatalf("interop: %v", err)
	}
	var p *Proc
	keepLogsOnFailure(t, func() []*Proc { return []*Proc{p} })
	p = StartProc(t, "verbatim", filepath.Join(dir, "verbatim.log"), dir, nil,
		append([]string{bin, "serve", "--config", cfg}, args...)...)
	t.Cleanup(func() { p.Stop(10 * time.Second) })
	for _, a := range addrs {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		err := WaitForPort(ctx, a, p.Alive)
		cancel()
		if err != nil {
			t.Fatalf("interop: verbatim serve --config: %s not listening: %v\n%s", a, err, p.LogTail(40))
		}
	}
	return p
}

// FormatSCRAM runs `verbatim format --data-dir data` adding a
// SCRAM-SHA-512 credential for every user (name -> password).
func FormatSCRAM(t testing.TB, bin, data string, users map[string]string) {
	t.Helper()
	args := []string{bin, "format", "--data-dir", data}
	names := make([]string, 0, len(users))
	for u := range users {
		names = append(names, u)
	}
	sort.Strings(names)
	for _, u := range names {
		args = append(args, "--add-scram", "SCRAM-SHA-512=[name="+u+",password="+users[u]+"]")
	}
	if res, err := RunTool(t, Cmd{Timeout: time.Minute}, args...); err != nil {
		t.Fatalf("interop: verbatim format: %v\n%s", err, res.describe())
	}
}

package interop

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
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
	root, err := RepoRoot()
	if err != nil {
		t.Fatalf("interop: %v", err)
	}
	buildMu.Lock()
	defer buildMu.Unlock()
	bin := filepath.Join(t.TempDir(), "verbatim")
	goBin := filepath.Join(os.Getenv("GOROOT"), "bin", "go")
	if _, err := os.Stat(goBin); err != nil {
		goBin = "go"
	}
	cmd := exec.Command(goBin, "build", "-o", bin, "./cmd/verbatim")
	cmd.Dir = root
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("interop: go build ./cmd/verbatim: %v\n%s", err, out)
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

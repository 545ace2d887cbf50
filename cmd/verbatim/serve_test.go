package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/verbatim-kafka/verbatim/internal/testkit/logbuf"
)

// startServe runs serveMain in the background and returns its address and
// a channel with its exit code.
func startServe(t *testing.T, args []string, out *logbuf.Buffer) (string, chan int) {
	t.Helper()
	ready := make(chan net.Addr, 1)
	code := make(chan int, 1)
	go func() { code <- serveMain(args, out, func(a net.Addr) { ready <- a }) }()
	select {
	case a := <-ready:
		return a.String(), code
	case c := <-code:
		t.Fatalf("serve exited with %d before listening:\n%s", c, out.String())
	case <-time.After(20 * time.Second):
		t.Fatalf("serve did not start:\n%s", out.String())
	}
	return "", nil
}

func TestServeAnswersApiVersionsAndStopsOnSIGTERM(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	var out logbuf.Buffer
	addr, code := startServe(t, []string{"--listen", "127.0.0.1:0", "--data-dir", dir, "--log-format", "json"}, &out)

	cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	resp, err := kmsg.NewPtrApiVersionsRequest().RequestWith(ctx, cl)
	cl.Close()
	if err != nil || resp.ErrorCode != 0 || len(resp.ApiKeys) == 0 {
		t.Fatalf("ApiVersions: %v %+v", err, resp)
	}

	// A second broker on the same data dir is refused, naming the holder.
	var out2 logbuf.Buffer
	if c := serveMain([]string{"--listen", "127.0.0.1:0", "--data-dir", dir}, &out2, nil); c != 1 {
		t.Fatalf("second serve exit code %d, want 1:\n%s", c, out2.String())
	}
	if !strings.Contains(out2.String(), "held by pid "+strconv.Itoa(os.Getpid())) {
		t.Fatalf("refusal does not name the holder:\n%s", out2.String())
	}

	// A liveness bound, not a timing assertion (stopServe). Shutdown
	// does not wait for the background compilation of the default WASM
	// policies (seconds on a fresh data dir, much longer under -race): the
	// compile is abandoned.
	stopServe(t, code, &out)
	// JSON logs, one object per line, including the shutdown.
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	for _, l := range lines {
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("log line is not JSON: %q", l)
		}
	}
	if !strings.Contains(out.String(), `"broker stopped"`) {
		t.Fatalf("no shutdown log:\n%s", out.String())
	}
	// The lock is released: the data dir can be served again.
	var out3 logbuf.Buffer
	_, code3 := startServe(t, []string{"--listen", "127.0.0.1:0", "--data-dir", dir}, &out3)
	// In this process an abandoned compile goes on and ends by writing
	// the data dir's module cache: let the restarted broker's finish (a
	// warm cache now) and wait for the first one's, so that the temporary
	// directory is not removed under them.
	waitLog(t, &out3, "default mirror policies")
	_ = syscall.Kill(os.Getpid(), syscall.SIGINT)
	if c := <-code3; c != 0 {
		t.Fatalf("restart exit code %d:\n%s", c, out3.String())
	}
	waitLog(t, &out, "default mirror policies")
}

// waitLog waits (with a liveness bound) until the log holds s.
func waitLog(t *testing.T, log *logbuf.Buffer, s string) {
	t.Helper()
	deadline := time.Now().Add(120 * time.Second)
	for !strings.Contains(log.String(), s) {
		if time.Now().After(deadline) {
			t.Fatalf("no %q in the log:\n%s", s, log.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestServeRefusesUnknownFormat(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "verbatim.format"), []byte("99\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	var out logbuf.Buffer
	if c := serveMain([]string{"--listen", "127.0.0.1:0", "--data-dir", dir}, &out, nil); c != 1 {
		t.Fatalf("exit code %d, want 1", c)
	}
	if !strings.Contains(out.String(), "version 99") {
		t.Fatalf("message does not name the version:\n%s", out.String())
	}
}

func TestServeUsageErrors(t *testing.T) {
	for _, args := range [][]string{
		{"--log-format", "xml"},
		{"--flush", "sometimes"},
		{"--log-level", "loud"},
		{"--advertised-listener", "nohost"},
		{"--node-id", "-3"},
		{"--max-frame-bytes", "10"},
		{"--max-connections-per-ip", "-1"},
		{"--frame-grace", "0s"},
		{"--frame-min-rate", "-5"},
		{"extra"},
		{"--no-such-flag"},
	} {
		var out logbuf.Buffer
		if c := serveMain(append([]string{"--data-dir", t.TempDir()}, args...), &out, nil); c != 2 {
			t.Errorf("%v: exit code %d, want 2:\n%s", args, c, out.String())
		}
	}
}

func TestMemoryLimitFromConfig(t *testing.T) {
	t.Setenv("GOMEMLIMIT", "")
	if got, _ := memoryLimit(-1, 256<<20); got != 352<<20 {
		t.Fatalf("derived limit %d", got)
	}
	if got, _ := memoryLimit(1<<30, 256<<20); got != 1<<30 {
		t.Fatalf("explicit limit %d", got)
	}
	t.Setenv("GOMEMLIMIT", "2GiB")
	if got, src := memoryLimit(-1, 256<<20); got != 0 || src != "GOMEMLIMIT" {
		t.Fatalf("environment limit not respected: %d %s", got, src)
	}
}

// TestMain lets a test run `verbatim serve` as a child process of the test
// binary (VERBATIM_SERVE_CHILD holds its flags, one per line), so a test
// can kill it with SIGKILL like a crash.
func TestMain(m *testing.M) {
	if args := os.Getenv("VERBATIM_SERVE_CHILD"); args != "" {
		os.Exit(serveMain(strings.Split(args, "\n"), os.Stderr, func(a net.Addr) {
			fmt.Println("LISTENING", a.String())
		}))
	}
	os.Exit(m.Run())
}

// startChildServe starts serve in a child process and returns it with its
// address.
func startChildServe(t *testing.T, dataDir string) (*exec.Cmd, string) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "VERBATIM_SERVE_CHILD="+strings.Join([]string{"--listen", "127.0.0.1:0", "--data-dir", dataDir}, "\n"))
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr logbuf.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		if addr, ok := strings.CutPrefix(sc.Text(), "LISTENING "); ok {
			go func() { _, _ = io.Copy(io.Discard, out) }()
			return cmd, addr
		}
	}
	t.Fatalf("child serve did not start:\n%s", stderr.String())
	return nil, ""
}

func TestCrashLeavesNoStaleLockAndKeepsTopics(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	cmd, addr := startChildServe(t, dir)
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	created, err := kadm.NewClient(cl).CreateTopic(ctx, 2, 1, map[string]*string{"retention.ms": kadm.StringPtr("123456")}, "survivor")
	cl.Close()
	if err != nil || created.Err != nil {
		t.Fatalf("create: %v %v", err, created.Err)
	}
	// Crash: no shutdown code runs, the lock file keeps the dead pid.
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()

	_, addr2 := startChildServe(t, dir)
	cl2, err := kgo.NewClient(kgo.SeedBrokers(addr2))
	if err != nil {
		t.Fatal(err)
	}
	defer cl2.Close()
	adm := kadm.NewClient(cl2)
	md, err := adm.Metadata(ctx, "survivor")
	if err != nil || md.Topics["survivor"].Err != nil || md.Topics["survivor"].ID != created.ID || len(md.Topics["survivor"].Partitions) != 2 {
		t.Fatalf("topic after crash: %v %+v", err, md.Topics["survivor"])
	}
	rcs, err := adm.DescribeTopicConfigs(ctx, "survivor")
	if err != nil {
		t.Fatal(err)
	}
	rc, _ := rcs.On("survivor", nil)
	found := false
	for _, c := range rc.Configs {
		if c.Key == "retention.ms" && c.MaybeValue() == "123456" {
			found = true
		}
	}
	if !found {
		t.Fatal("retention.ms override lost in the crash")
	}
}

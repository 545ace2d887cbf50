package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// startServe runs serveMain in the background and returns its address and
// a channel with its exit code.
func startServe(t *testing.T, args []string, out *syncBuffer) (string, chan int) {
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
	var out syncBuffer
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
	var out2 syncBuffer
	if c := serveMain([]string{"--listen", "127.0.0.1:0", "--data-dir", dir}, &out2, nil); c != 1 {
		t.Fatalf("second serve exit code %d, want 1:\n%s", c, out2.String())
	}
	if !strings.Contains(out2.String(), "held by pid "+strconv.Itoa(os.Getpid())) {
		t.Fatalf("refusal does not name the holder:\n%s", out2.String())
	}

	if err := syscall.Kill(os.Getpid(), syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case c := <-code:
		if c != 0 {
			t.Fatalf("exit code %d after SIGTERM:\n%s", c, out.String())
		}
	case <-time.After(20 * time.Second):
		t.Fatal("serve did not stop on SIGTERM")
	}
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
	var out3 syncBuffer
	_, code3 := startServe(t, []string{"--listen", "127.0.0.1:0", "--data-dir", dir}, &out3)
	_ = syscall.Kill(os.Getpid(), syscall.SIGINT)
	if c := <-code3; c != 0 {
		t.Fatalf("restart exit code %d:\n%s", c, out3.String())
	}
}

func TestServeRefusesUnknownFormat(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "verbatim.format"), []byte("99\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	var out syncBuffer
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
		{"extra"},
		{"--no-such-flag"},
	} {
		var out syncBuffer
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

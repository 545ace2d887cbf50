package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// crashHelperEnv makes the test binary act as `verbatim serve` (see
// TestCrashHelperServe), so a test can SIGKILL a real broker process.
const crashHelperEnv = "VERBATIM_CRASH_HELPER_ARGS"

// TestCrashHelperServe is not a test: run by startServeProcess in a child
// process, it serves with the arguments from the environment and prints
// the bound address. In a normal test run it returns at once.
func TestCrashHelperServe(t *testing.T) {
	args := os.Getenv(crashHelperEnv)
	if args == "" {
		return
	}
	os.Exit(serveMain(strings.Split(args, "\x1f"), os.Stderr, func(a net.Addr) {
		fmt.Printf("LISTENING %s\n", a.String())
	}))
}

// startServeProcess starts `verbatim serve` (this test binary in helper
// mode) and returns its address and process.
func startServeProcess(t *testing.T, args ...string) (string, *exec.Cmd) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestCrashHelperServe$")
	cmd.Env = append(os.Environ(), crashHelperEnv+"="+strings.Join(args, "\x1f"))
	cmd.Stderr = io.Discard
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	addr := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if a, ok := strings.CutPrefix(sc.Text(), "LISTENING "); ok {
				addr <- a
			}
		}
		close(addr)
	}()
	select {
	case a, ok := <-addr:
		if !ok {
			t.Fatal("serve process exited before listening")
		}
		return a, cmd
	case <-time.After(30 * time.Second):
		t.Fatal("serve process did not start")
	}
	return "", nil
}

// A broker killed with SIGKILL while acks=-1 produces are in flight
// (--flush always) keeps every acknowledged record at its offset.
func TestCrashKeepsAcknowledgedRecords(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	args := []string{"--listen", "127.0.0.1:0", "--data-dir", dir, "--flush", "always", "--log-level", "error"}
	addr, cmd := startServeProcess(t, args...)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.DefaultProduceTopic("crash"), kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.RecordRetries(0), kgo.ProducerLinger(0))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if r, err := kadm.NewClient(cl).CreateTopic(ctx, 1, 1, nil, "crash"); err != nil || r.Err != nil {
		t.Fatal(err, r.Err)
	}

	var mu sync.Mutex
	acked := map[int64]string{} // offset -> value
	var wg sync.WaitGroup
	for i := 0; i < 5000; i++ {
		v := fmt.Sprintf("rec-%d", i)
		wg.Add(1)
		cl.Produce(ctx, &kgo.Record{Value: []byte(v)}, func(r *kgo.Record, err error) {
			defer wg.Done()
			if err == nil {
				mu.Lock()
				acked[r.Offset] = string(r.Value)
				mu.Unlock()
			}
		})
		if i == 2500 {
			// Kill once some records are acknowledged, with more in flight.
			for {
				mu.Lock()
				n := len(acked)
				mu.Unlock()
				if n > 200 {
					break
				}
				time.Sleep(time.Millisecond)
			}
			if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
		}
	}
	cl.Close()
	wg.Wait()
	_ = cmd.Wait()
	if len(acked) == 0 {
		t.Fatal("nothing was acknowledged before the kill")
	}

	addr, _ = startServeProcess(t, args...)
	cc, err := kgo.NewClient(kgo.SeedBrokers(addr),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{"crash": {0: kgo.NewOffset().AtStart()}}))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	offs, err := kadm.NewClient(cc).ListEndOffsets(ctx, "crash")
	if err != nil {
		t.Fatal(err)
	}
	end, _ := offs.Lookup("crash", 0)
	got := map[int64]string{}
	for int64(len(got)) < end.Offset {
		fs := cc.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("read %d of %d records after restart", len(got), end.Offset)
		}
		fs.EachRecord(func(r *kgo.Record) { got[r.Offset] = string(r.Value) })
	}
	for off, v := range acked {
		if got[off] != v {
			t.Fatalf("acknowledged record %q at offset %d lost or changed (found %q); %d acknowledged, log end %d",
				v, off, got[off], len(acked), end.Offset)
		}
	}
	t.Logf("%d records acknowledged before SIGKILL, %d in the log after restart", len(acked), end.Offset)
}

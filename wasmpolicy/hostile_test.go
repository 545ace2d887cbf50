package wasmpolicy

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/verbatim-kafka/verbatim/kbatch"
)

// policyDir copies the named testdata/wat modules (and, for "goguest",
// the Go guest) into a fresh policy directory.
func policyDir(t *testing.T, names ...string) string {
	t.Helper()
	dir := t.TempDir()
	for _, n := range names {
		var b []byte
		var err error
		if n == "goguest" {
			b = goGuest
		} else if b, err = os.ReadFile(filepath.Join("testdata", "wat", n+".wasm")); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, n+".wasm"), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func TestRefusedAtBind(t *testing.T) {
	cases := map[string]string{
		"noexport":  "lacks export verbatim_judge",
		"wrongabi":  "policy ABI version 2",
		"badsig":    "exports verbatim_judge(i32) -> (i32)",
		"netimport": "wasi_snapshot_preview1.sock_accept, which the policy sandbox does not provide",
		"hugemem":   "over limit of 512 pages",
	}
	var names []string
	for n := range cases {
		names = append(names, n)
	}
	h := newHost(t, Options{PolicyDir: policyDir(t, names...), CacheDir: testCacheDir})
	for n, want := range cases {
		_, err := h.Bind("t", []string{"epoch-monotonic", n}, nil)
		if !errors.Is(err, ErrBadModule) || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: err = %v, want ErrBadModule mentioning %q", n, err, want)
		}
		if err := h.Check([]string{n}); !errors.Is(err, ErrBadModule) {
			t.Errorf("%s: Check err = %v", n, err)
		}
	}
}

// judgeOne binds name for topic and judges set; it returns the verdicts.
func judgeOne(t *testing.T, b *Binding, set []byte) Verdicts {
	t.Helper()
	v, err := b.Judge(context.Background(), mirrorCtx(0, -1), set)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func wantAllRejected(t *testing.T, v Verdicts, n int, reason string) {
	t.Helper()
	if len(v.Rejected) != n {
		t.Fatalf("want %d rejections, got %+v", n, v.Rejected)
	}
	t.Logf("rejected: %s", v.Rejected[0].Reason)
	for _, r := range v.Rejected {
		if r.Code != 44 || !strings.Contains(r.Reason, reason) {
			t.Fatalf("rejection %+v does not mention %q", r, reason)
		}
	}
}

func TestInfiniteLoopHitsDeadlineAndOtherTopicsFlow(t *testing.T) {
	h := newHost(t, Options{PolicyDir: policyDir(t, "loop"), CacheDir: testCacheDir, CallTimeout: 50 * time.Millisecond})
	looping, err := h.Bind("stuck", []string{"loop"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	fine, err := h.Bind("fine", []string{"epoch-monotonic"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	set := slices.Concat(batch(t, 0, 1, nil), batch(t, 1, 1, nil))
	done := make(chan Verdicts)
	go func() { done <- judgeOne(t, looping, set) }()
	// While the looping call runs, the other topic is judged normally.
	if v := judgeOne(t, fine, set); !v.Accepted() {
		t.Fatalf("other topic rejected: %+v", v)
	}
	v := <-done
	wantAllRejected(t, v, 2, "deadline exceeded")
	if !strings.Contains(v.Rejected[0].Reason, "instance replaced") {
		t.Fatalf("reason %q", v.Rejected[0].Reason)
	}
	// The failed instance was dropped, not pooled; the next call gets a
	// new one (and times out again, the module being what it is).
	p := looping.mods[0].pool.Load()
	p.mu.Lock()
	free := len(p.mu.free)
	p.mu.Unlock()
	if free != 0 {
		t.Fatalf("failed instance returned to the pool (%d free)", free)
	}
	wantAllRejected(t, judgeOne(t, looping, set), 2, "deadline exceeded")
}

func TestTrapRejects(t *testing.T) {
	h := newHost(t, Options{PolicyDir: policyDir(t, "trap", "badverdict", "retriable"), CacheDir: testCacheDir})
	set := slices.Concat(batch(t, 0, 1, nil), batch(t, 1, 1, nil), batch(t, 2, 1, nil))
	b, err := h.Bind("t", []string{"trap"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	wantAllRejected(t, judgeOne(t, b, set), 3, "unreachable")
	b, err = h.Bind("t", []string{"badverdict"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	wantAllRejected(t, judgeOne(t, b, set), 3, "verdict list outside memory")
	// A retriable code from a guest becomes POLICY_VIOLATION.
	b, err = h.Bind("t", []string{"retriable"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	v := judgeOne(t, b, set)
	if len(v.Rejected) != 1 || v.Rejected[0].Code != 44 || v.Rejected[0].Reason != "x" {
		t.Fatalf("retriable code kept: %+v", v.Rejected)
	}
}

func TestMemoryBombIsCapped(t *testing.T) {
	const limit = 64 // pages: 4 MiB
	h := newHost(t, Options{PolicyDir: policyDir(t, "membomb"), CacheDir: testCacheDir, MemoryLimitPages: limit})
	b, err := h.Bind("t", []string{"membomb"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if v := judgeOne(t, b, batch(t, 0, 1, nil)); !v.Accepted() {
		t.Fatalf("bomb module (accepts once memory.grow fails) rejected: %+v", v)
	}
	p := b.mods[0].pool.Load()
	p.mu.Lock()
	in := p.mu.free[0]
	p.mu.Unlock()
	if size := in.mem.Size(); size > limit*65536 || size < (limit-64)*65536 {
		t.Fatalf("memory grew to %d bytes, cap %d", size, limit*65536)
	}
}

func TestGoGuestFailures(t *testing.T) {
	dir := policyDir(t, "goguest")
	// A generous deadline, so that the memory bomb meets the cap (not the
	// clock) even on a loaded machine under -race.
	h := newHost(t, Options{PolicyDir: dir, CacheDir: testCacheDir, MemoryLimitPages: 256, CallTimeout: 10 * time.Second})
	b, err := h.Bind("t", []string{"goguest"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	withPID := func(pid int64) []byte {
		return batch(t, 0, 1, func(b *kbatch.Batch) { b.ProducerID, b.ProducerEpoch, b.BaseSequence = pid, 0, 0 })
	}
	if v := judgeOne(t, b, withPID(9)); !v.Accepted() {
		t.Fatalf("first call rejected: %+v", v)
	}
	p := b.mods[0].pool.Load()
	p.mu.Lock()
	t.Logf("Go guest instance memory after a call: %d KiB", p.mu.free[0].mem.Size()>>10)
	p.mu.Unlock()
	wantAllRejected(t, judgeOne(t, b, withPID(1)), 1, "deliberate panic")
	wantAllRejected(t, judgeOne(t, b, withPID(2)), 1, "out of memory")
	if v := judgeOne(t, b, withPID(4)); !v.Accepted() {
		t.Fatalf("printing guest rejected: %+v", v)
	}
	if v := judgeOne(t, b, withPID(9)); !v.Accepted() {
		t.Fatalf("after two replaced instances the guest should accept: %+v", v)
	}
	short := newHost(t, Options{PolicyDir: dir, CacheDir: testCacheDir, CallTimeout: 100 * time.Millisecond})
	b, err = short.Bind("t", []string{"goguest"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	wantAllRejected(t, judgeOne(t, b, withPID(3)), 1, "deadline exceeded")
	if v := judgeOne(t, b, withPID(9)); !v.Accepted() {
		t.Fatalf("after the looping instance was replaced the guest should accept: %+v", v)
	}
}

// TestInstancesNeverShareTopics judges two topics concurrently through the
// same module; the guest rejects any call for a topic other than the first
// its instance saw.
func TestInstancesNeverShareTopics(t *testing.T) {
	h := newHost(t, Options{PolicyDir: policyDir(t, "goguest"), CacheDir: testCacheDir, MaxInstances: 2})
	set := batch(t, 0, 1, nil)
	errs := make(chan error, 8)
	for _, topic := range []string{"a", "b", "c", "d"} {
		b, err := h.Bind(topic, []string{"goguest"}, nil)
		if err != nil {
			t.Fatal(err)
		}
		for w := 0; w < 2; w++ {
			go func() {
				for i := 0; i < 20; i++ {
					v, err := b.Judge(context.Background(), mirrorCtx(0, -1), set)
					if err == nil && !v.Accepted() {
						err = errors.New(v.Rejected[0].Reason)
					}
					if err != nil {
						errs <- err
						return
					}
				}
				errs <- nil
			}()
		}
	}
	for i := 0; i < 8; i++ {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
}

// TestIdleInstancesClosed: instances unused for IdleTimeout are closed
// (a Go guest holds ~4 MiB); the next call creates a new one.
func TestIdleInstancesClosed(t *testing.T) {
	h := newHost(t, Options{CacheDir: testCacheDir, IdleTimeout: 50 * time.Millisecond})
	b, err := h.Bind("t", []string{"epoch-monotonic"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if v := judgeOne(t, b, batch(t, 0, 1, nil)); !v.Accepted() {
		t.Fatalf("%+v", v)
	}
	p := b.mods[0].pool.Load()
	free := func() int {
		p.mu.Lock()
		defer p.mu.Unlock()
		return len(p.mu.free)
	}
	if free() != 1 {
		t.Fatalf("%d free instances after a call, want 1", free())
	}
	deadline := time.Now().Add(20 * time.Second)
	for free() != 0 {
		if time.Now().After(deadline) {
			t.Fatal("idle instance never closed")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if v := judgeOne(t, b, batch(t, 0, 1, nil)); !v.Accepted() || free() != 1 {
		t.Fatalf("call after the sweep: %+v, %d free", v, free())
	}
}

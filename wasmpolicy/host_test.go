package wasmpolicy

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/verbatim-kafka/verbatim/kbatch"
	"github.com/verbatim-kafka/verbatim/kbatch/kbatchtest"
	"github.com/verbatim-kafka/verbatim/policies"
)

func newHost(t testing.TB, opts Options) *Host {
	t.Helper()
	h, err := NewHost(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close() })
	return h
}

// watExampleHost is a host whose policy dir (returned, for callers that add
// modules of their own) holds the hand-written WAT example as
// epoch-monotonic-wat: loaded from a file, it runs with the deadline's
// per-call goroutine, unlike the built-ins.
func watExampleHost(t testing.TB) (*Host, string) {
	t.Helper()
	wat, err := os.ReadFile("../policies/examples/epoch-monotonic-wat/policy.wasm")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "epoch-monotonic-wat.wasm"), wat, 0o644); err != nil {
		t.Fatal(err)
	}
	return newHost(t, Options{PolicyDir: dir, CacheDir: testCacheDir}), dir
}

func batch(t testing.TB, off int64, epoch int32, mod func(*kbatch.Batch)) []byte {
	t.Helper()
	b := kbatch.NewBatch(1000, kbatch.Record{Value: []byte("value")})
	b.BaseOffset, b.LeaderEpoch = off, epoch
	if mod != nil {
		mod(&b)
	}
	return kbatchtest.Encode(t, b)
}

func mirrorCtx(leo int64, lastEpoch int32) PartitionContext {
	return PartitionContext{Mode: ModePush, State: StateMirroring, LeaderEpoch: 100, LogEndOffset: leo, LastBatchEpoch: lastEpoch}
}

func TestBuiltinsJudge(t *testing.T) {
	h := newHost(t, Options{CacheDir: testCacheDir})
	b, err := h.Bind("orders", []string{"epoch-monotonic", "control-records", "producer-ids"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	ctx := context.Background()
	good := slices.Concat(batch(t, 10, 3, nil), batch(t, 11, 4, nil))
	v, err := b.Judge(ctx, mirrorCtx(10, 3), good)
	if err != nil || !v.Accepted() {
		t.Fatalf("good set: %+v %v", v, err)
	}
	bad := slices.Concat(batch(t, 10, 4, nil), batch(t, 11, 2, nil), batch(t, 12, 5, func(b *kbatch.Batch) { b.ProducerID = -7 }))
	v, err = b.Judge(ctx, mirrorCtx(10, 3), bad)
	if err != nil {
		t.Fatal(err)
	}
	if len(v.Rejected) != 2 {
		t.Fatalf("rejections %+v", v.Rejected)
	}
	r0, r1 := v.Rejected[0], v.Rejected[1]
	if r0.Batch != 1 || r0.BaseOffset != 11 || r0.Policy != "epoch-monotonic" || r0.Code != 44 || !strings.Contains(r0.Reason, "rewinds") {
		t.Fatalf("first rejection %+v", r0)
	}
	if r1.Batch != 2 || r1.BaseOffset != 12 || r1.Policy != "producer-ids" || r1.Code != 87 {
		t.Fatalf("second rejection %+v", r1)
	}
	var re *RejectedError
	if err := v.Err(); !errors.As(err, &re) || re.KafkaCode() != 44 || !strings.Contains(err.Error(), "offset 11") {
		t.Fatalf("Err() = %v", err)
	}
}

func TestUnknownPolicy(t *testing.T) {
	h := newHost(t, Options{CacheDir: testCacheDir})
	for _, n := range []string{"nope", "../etc/passwd", ""} {
		if _, err := h.Bind("t", []string{n}, nil); !errors.Is(err, ErrUnknownPolicy) {
			t.Errorf("Bind(%q): %v", n, err)
		}
		if err := h.Check([]string{n}); !errors.Is(err, ErrUnknownPolicy) {
			t.Errorf("Check(%q): %v", n, err)
		}
	}
}

// TestBoundedModules: only import-free built-ins run without termination
// checks; a Go built-in, and any module from a file (even a copy of a
// built-in), keep the deadline.
func TestBoundedModules(t *testing.T) {
	dir := t.TempDir()
	h := newHost(t, Options{PolicyDir: dir, CacheDir: testCacheDir})
	for name, want := range map[string]bool{"epoch-monotonic": true, "control-records": true, "producer-ids": false} {
		if err := h.Check([]string{name}); err != nil {
			t.Fatal(err)
		}
		h.mu.Lock()
		got := h.modules[name].bounded
		h.mu.Unlock()
		if got != want {
			t.Errorf("%s: bounded %v, want %v", name, got, want)
		}
	}
	wasm, _ := policies.Builtin("epoch-monotonic")
	path := filepath.Join(dir, "copy.wasm")
	if err := os.WriteFile(path, wasm, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := h.LoadFile(path); err != nil {
		t.Fatal(err)
	}
	h.mu.Lock()
	m := h.modules["epoch-monotonic"]
	h.mu.Unlock()
	if m.bounded || m.source != path {
		t.Fatalf("a module file runs bounded (source %s)", m.source)
	}
}

func TestHasImports(t *testing.T) {
	for name, want := range map[string]bool{"epoch-monotonic": false, "control-records": false, "producer-ids": true} {
		wasm, _ := policies.Builtin(name)
		if got := hasImports(wasm); got != want {
			t.Errorf("%s: hasImports %v, want %v", name, got, want)
		}
	}
	for _, bad := range [][]byte{nil, []byte("\x00asm"), []byte("\x00asm\x01\x00\x00\x00\x01\xff"), []byte("notwasm!")} {
		if !hasImports(bad) {
			t.Errorf("unreadable %q counted as import-free", bad)
		}
	}
	if hasImports([]byte("\x00asm\x01\x00\x00\x00")) {
		t.Error("empty module has imports")
	}
}

// Each module's latency goes to its timer, and Verdicts.Elapsed is their
// sum: one clock read per module boundary, shared by the neighbours.
func TestJudgeTimesModules(t *testing.T) {
	var mu sync.Mutex
	got := map[string][]time.Duration{}
	h := newHost(t, Options{CacheDir: testCacheDir, ModuleTimer: func(module string) func(time.Duration) {
		return func(d time.Duration) {
			mu.Lock()
			got[module] = append(got[module], d)
			mu.Unlock()
		}
	}})
	mods := []string{"epoch-monotonic", "control-records", "producer-ids"}
	b, err := h.Bind("orders", mods, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		v, err := b.Judge(context.Background(), mirrorCtx(int64(i), 5), batch(t, int64(i), 5, nil))
		if err != nil || !v.Accepted() {
			t.Fatalf("judge %d: %v %+v", i, err, v)
		}
		mu.Lock()
		var sum time.Duration
		for _, m := range mods {
			if len(got[m]) != i+1 || got[m][i] < 0 {
				t.Fatalf("call %d: module %s timed %v", i, m, got[m])
			}
			sum += got[m][i]
		}
		mu.Unlock()
		if v.Elapsed != sum {
			t.Fatalf("call %d: Elapsed %v, the modules' times add to %v", i, v.Elapsed, sum)
		}
	}
}

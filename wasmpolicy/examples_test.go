package wasmpolicy

import (
	"bytes"
	"context"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/verbatim-kafka/verbatim/kbatch"
)

// TestWATModulesAssemble re-assembles every hand-written module (the
// non-Go guest and the hostile test modules) with wabt's wat2wasm and
// fails if a committed .wasm differs from its .wat source.
func TestWATModulesAssemble(t *testing.T) {
	wat2wasm, err := exec.LookPath("wat2wasm")
	if err != nil {
		t.Fatal("wat2wasm not found: install Debian's wabt package (apt-get install -y wabt); the committed .wasm files must be checked against their .wat sources")
	}
	srcs, _ := filepath.Glob("testdata/wat/*.wat")
	more, _ := filepath.Glob("../policies/examples/*/*.wat")
	srcs = append(srcs, more...)
	if len(srcs) < 10 {
		t.Fatalf("found only %d .wat sources", len(srcs))
	}
	tmp := t.TempDir()
	for _, src := range srcs {
		out := filepath.Join(tmp, filepath.Base(src)+".wasm")
		if msg, err := exec.Command(wat2wasm, src, "-o", out).CombinedOutput(); err != nil {
			t.Errorf("%s: %v\n%s", src, err, msg)
			continue
		}
		fresh, _ := os.ReadFile(out)
		committed, err := os.ReadFile(strings.TrimSuffix(src, ".wat") + ".wasm")
		if err != nil || !bytes.Equal(fresh, committed) {
			t.Errorf("%s: committed .wasm is missing or stale; run wat2wasm %s -o %s", src, filepath.Base(src), strings.TrimSuffix(filepath.Base(src), ".wat")+".wasm")
		}
	}
}

// TestWATGuestAgreesWithGoBuiltin: the hand-written WAT epoch policy and
// the Go built-in decide the same over random epoch sequences; the ABI
// carries the same meaning to both languages.
func TestWATGuestAgreesWithGoBuiltin(t *testing.T) {
	h, _ := watExampleHost(t)
	goB, err := h.Bind("t", []string{"epoch-monotonic"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	watB, err := h.Bind("t", []string{"epoch-monotonic-wat"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	rejected := 0
	for round := 0; round < 200; round++ {
		n := 1 + rng.IntN(40)
		var set []byte
		for i := 0; i < n; i++ {
			set = append(set, batch(t, int64(i), int32(rng.IntN(8))-1, nil)...)
		}
		pc := mirrorCtx(0, int32(rng.IntN(6))-1)
		vg, err1 := goB.Judge(context.Background(), pc, set)
		vw, err2 := watB.Judge(context.Background(), pc, set)
		if err1 != nil || err2 != nil {
			t.Fatal(err1, err2)
		}
		if len(vg.Rejected) != len(vw.Rejected) {
			t.Fatalf("round %d: Go rejected %d, WAT %d", round, len(vg.Rejected), len(vw.Rejected))
		}
		for i := range vg.Rejected {
			g, w := vg.Rejected[i], vw.Rejected[i]
			if g.Batch != w.Batch || g.Code != w.Code || g.BaseOffset != w.BaseOffset {
				t.Fatalf("round %d: Go %+v, WAT %+v", round, g, w)
			}
		}
		rejected += len(vg.Rejected)
	}
	if rejected == 0 {
		t.Fatal("no rejection in 200 rounds: the comparison proved nothing")
	}
}

// TestSDKExample runs the SDK example (built with the standard toolchain
// in TestMain) with the topic config it declares.
func TestSDKExample(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "max-batch-bytes.wasm"), sdkExample, 0o644); err != nil {
		t.Fatal(err)
	}
	h := newHost(t, Options{PolicyDir: dir, CacheDir: testCacheDir})
	d, err := h.Describe("max-batch-bytes")
	if err != nil || len(d.Configs) != 1 || d.Configs[0] != "max.message.bytes" {
		t.Fatalf("descriptor %+v %v", d, err)
	}
	small := batch(t, 0, 1, nil)
	big := batch(t, 1, 1, func(b *kbatch.Batch) { b.Records[0].Value = make([]byte, 500) })
	b, err := h.Bind("t", []string{"max-batch-bytes"}, map[string]string{"max.message.bytes": "300", "retention.ms": "1"})
	if err != nil {
		t.Fatal(err)
	}
	v, err := b.Judge(context.Background(), mirrorCtx(0, -1), slices.Concat(small, big))
	if err != nil || len(v.Rejected) != 1 || v.Rejected[0].Batch != 1 || v.Rejected[0].Code != 10 ||
		!strings.Contains(v.Rejected[0].Reason, "exceeds max.message.bytes=300") {
		t.Fatalf("verdicts %+v %v", v, err)
	}
	// Without the config the policy has no limit.
	b2, err := h.Bind("u", []string{"max-batch-bytes"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if v, _ := b2.Judge(context.Background(), mirrorCtx(0, -1), slices.Concat(small, big)); !v.Accepted() {
		t.Fatalf("no config, still rejected: %+v", v)
	}
}

// TestReloadOnFileChange: a module file replaced on disk is picked up by
// Refresh (and Watch) in bound topics without rebinding; a broken new
// version is refused and the running one kept.
func TestReloadOnFileChange(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "reload.wasm")
	v1, _ := os.ReadFile("testdata/wat/reload-v1.wasm")
	v2, _ := os.ReadFile("testdata/wat/reload-v2.wasm")
	broken, _ := os.ReadFile("testdata/wat/noexport.wasm")
	if err := os.WriteFile(path, v1, 0o644); err != nil {
		t.Fatal(err)
	}
	h := newHost(t, Options{PolicyDir: dir, CacheDir: testCacheDir})
	b, err := h.Bind("t", []string{"reload"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	set := batch(t, 0, 1, nil)
	if v := judgeOne(t, b, set); !v.Accepted() {
		t.Fatalf("v1 rejected: %+v", v)
	}
	replace := func(content []byte, age time.Duration) {
		if err := os.WriteFile(path, content, 0o644); err != nil {
			t.Fatal(err)
		}
		// A distinct modification time, even on coarse file systems.
		mt := time.Now().Add(age)
		if err := os.Chtimes(path, mt, mt); err != nil {
			t.Fatal(err)
		}
	}
	replace(v2, time.Second)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go h.Watch(ctx, 10*time.Millisecond)
	deadline := time.Now().Add(20 * time.Second)
	for {
		v := judgeOne(t, b, set)
		if len(v.Rejected) == 1 && v.Rejected[0].Reason == "v2" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("v2 not loaded: %+v", v)
		}
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	replace(broken, 2*time.Second)
	errs := h.Refresh()
	if len(errs) != 1 || !strings.Contains(errs[0].Error(), "kept the running version") {
		t.Fatalf("broken reload: %v", errs)
	}
	if v := judgeOne(t, b, set); len(v.Rejected) != 1 || v.Rejected[0].Reason != "v2" {
		t.Fatalf("running version not kept: %+v", v)
	}
	if errs := h.Refresh(); len(errs) != 0 {
		t.Fatalf("an unchanged broken file is retried: %v", errs)
	}
}

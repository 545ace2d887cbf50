package policies

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// TestBuiltinsUpToDate rebuilds the built-in modules with build.sh and
// fails if any committed .wasm differs: the embedded artifacts must be
// exactly what the sources produce with the pinned toolchain.
func TestBuiltinsUpToDate(t *testing.T) {
	// build.sh's inputs are read by subprocesses; reading them here too
	// makes go test's cache notice when one changes.
	srcs, _ := filepath.Glob("*/policy.wat")
	gos, _ := filepath.Glob("*/*.go")
	for _, src := range append(append(srcs, gos...), "build.sh") {
		if _, err := os.ReadFile(src); err != nil {
			t.Fatal(err)
		}
	}
	if len(srcs) != 2 {
		t.Fatalf("WAT built-in sources %v, want epoch-monotonic and control-records", srcs)
	}
	out := t.TempDir()
	cmd := exec.Command("sh", "build.sh", out)
	cmd.Env = append(os.Environ(), "GOTOOLCHAIN=local")
	if msg, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build.sh: %v\n%s", err, msg)
	}
	names := BuiltinNames()
	if len(names) != 3 {
		t.Fatalf("embedded built-ins %v, want 3", names)
	}
	for _, n := range names {
		fresh, err := os.ReadFile(filepath.Join(out, n+".wasm"))
		if err != nil {
			t.Fatal(err)
		}
		committed, _ := Builtin(n)
		if !bytes.Equal(fresh, committed) {
			t.Errorf("policies/builtin/%s.wasm is stale (built %d bytes, committed %d) with %s: run `go generate ./policies` (wat2wasm for policy.wat sources, the toolchain go.mod pins for Go ones) and commit", n, len(fresh), len(committed), runtime.Version())
		}
	}
}

func TestBuiltinLookup(t *testing.T) {
	for _, n := range DefaultMirror {
		b, ok := Builtin(n)
		if !ok || !bytes.HasPrefix(b, []byte("\x00asm")) {
			t.Fatalf("default built-in %s missing or not WebAssembly", n)
		}
	}
	for _, bad := range []string{"", "../builtin/epoch-monotonic", "epoch-monotonic.wasm", "nope"} {
		if _, ok := Builtin(bad); ok {
			t.Errorf("Builtin(%q) found something", bad)
		}
	}
	if !strings.Contains(strings.Join(BuiltinNames(), ","), "producer-ids") {
		t.Fatal("producer-ids not listed")
	}
}

package wasmpolicy

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// testCacheDir is a compilation cache shared by the package's tests, so
// each Go guest is compiled to machine code once per run.
var testCacheDir string

// goGuest is the hostile Go guest (testdata/goguest), sdkExample the SDK
// example (policies/examples/max-batch-bytes) and goEpoch the Go reference
// of the epoch-monotonic built-in (policies/epoch-monotonic), built for
// this run.
var goGuest, sdkExample, goEpoch []byte

// buildGuest builds a Go policy with the standard toolchain.
func buildGuest(dir, pkg string) ([]byte, error) {
	out := filepath.Join(dir, filepath.Base(pkg)+".wasm")
	cmd := exec.Command("go", "build", "-trimpath", "-buildmode=c-shared", "-o", out, pkg)
	cmd.Env = append(os.Environ(), "GOOS=wasip1", "GOARCH=wasm", "CGO_ENABLED=0")
	if msg, err := cmd.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("building %s: %v\n%s", pkg, err, msg)
	}
	return os.ReadFile(out)
}

func TestMain(m *testing.M) {
	os.Exit(func() int {
		dir, err := os.MkdirTemp("", "wasmpolicy-test")
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		defer os.RemoveAll(dir)
		// A cache that outlives the run, shared with the other packages'
		// tests: compiling a 2 MB Go guest costs seconds of CPU (tens under
		// -race), and the compiled code depends only on the module, the
		// wazero version and the CPU, which is what wazero keys it by.
		testCacheDir = filepath.Join(os.TempDir(), "verbatim-wasm-test-cache")
		if goGuest, err = buildGuest(dir, "./testdata/goguest"); err == nil {
			sdkExample, err = buildGuest(dir, "../policies/examples/max-batch-bytes")
		}
		if err == nil {
			goEpoch, err = buildGuest(dir, "../policies/epoch-monotonic")
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		return m.Run()
	}())
}

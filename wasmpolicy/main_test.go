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

// goGuest is the hostile Go guest (testdata/goguest) built for this run.
var goGuest []byte

func TestMain(m *testing.M) {
	os.Exit(func() int {
		dir, err := os.MkdirTemp("", "wasmpolicy-test")
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		defer os.RemoveAll(dir)
		testCacheDir = filepath.Join(dir, "cache")
		out := filepath.Join(dir, "goguest.wasm")
		cmd := exec.Command("go", "build", "-trimpath", "-buildmode=c-shared", "-o", out, "./testdata/goguest")
		cmd.Env = append(os.Environ(), "GOOS=wasip1", "GOARCH=wasm", "CGO_ENABLED=0")
		if msg, err := cmd.CombinedOutput(); err != nil {
			fmt.Fprintf(os.Stderr, "building testdata/goguest: %v\n%s", err, msg)
			return 1
		}
		if goGuest, err = os.ReadFile(out); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		return m.Run()
	}())
}

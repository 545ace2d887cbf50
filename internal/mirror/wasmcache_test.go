package mirror

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/verbatim-kafka/verbatim/broker"
	"github.com/verbatim-kafka/verbatim/policies"
	"github.com/verbatim-kafka/verbatim/wasmpolicy"
)

// wasmCache is the policy compilation cache the package's destination
// brokers share.
var wasmCache string

// TestMain compiles the default mirror policies once, before any test,
// into the compilation cache the other packages' tests share (it outlives
// the run; wazero keys compiled code by module, wazero version and CPU).
// A broker compiles them in the background on start and its first mirror
// produce waits for that: cold, under -race on a loaded machine, it took
// 20 s or more, so every test paid it and a push meant to be interrupted
// part way could instead run into its deadline.
func TestMain(m *testing.M) {
	os.Exit(func() int {
		wasmCache = filepath.Join(os.TempDir(), "verbatim-wasm-test-cache")
		h, err := wasmpolicy.NewHost(wasmpolicy.Options{CacheDir: wasmCache})
		if err == nil {
			err = h.Check(policies.DefaultMirror)
			h.Close()
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "compiling the default mirror policies:", err)
			return 1
		}
		return m.Run()
	}())
}

// linkWasmCache points a broker data directory's compilation cache
// (<data-dir>/.wasm-cache) at the shared one. A data directory holding
// anything must carry its format version file, so a fresh one gets it
// first, as the broker writes it on first start.
func linkWasmCache(t *testing.T, dataDir string) {
	t.Helper()
	format := filepath.Join(dataDir, "verbatim.format")
	if _, err := os.Stat(format); errors.Is(err, fs.ErrNotExist) {
		if err := os.WriteFile(format, []byte(strconv.Itoa(broker.DataFormatVersion)+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	err := os.Symlink(wasmCache, filepath.Join(dataDir, ".wasm-cache"))
	if err != nil && !errors.Is(err, fs.ErrExist) {
		t.Fatalf("linking the policy compilation cache: %v", err)
	}
}

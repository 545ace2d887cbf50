package testwasm

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

// CacheDir is the compilation cache shared by the packages' tests (it
// outlives the run; wazero keys compiled code by module, wazero version and
// CPU). The broker and wasmpolicy tests use the same directory.
func CacheDir() string { return filepath.Join(os.TempDir(), "verbatim-wasm-test-cache") }

// Main is a TestMain body: it compiles the default mirror policies into
// CacheDir once, before any test, then runs the tests.
func Main(m *testing.M) int {
	h, err := wasmpolicy.NewHost(wasmpolicy.Options{CacheDir: CacheDir()})
	if err == nil {
		err = h.Check(policies.DefaultMirror)
		h.Close()
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "compiling the default mirror policies:", err)
		return 1
	}
	return m.Run()
}

// LinkCache points a broker data directory's compilation cache
// (<data-dir>/.wasm-cache) at CacheDir. A data directory holding anything
// must carry its format version file, so a fresh one gets it first, as the
// broker writes it on first start.
func LinkCache(t testing.TB, dataDir string) {
	t.Helper()
	format := filepath.Join(dataDir, "verbatim.format")
	if _, err := os.Stat(format); errors.Is(err, fs.ErrNotExist) {
		if err := os.WriteFile(format, []byte(strconv.Itoa(broker.DataFormatVersion)+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// The shared directory exists only once some package's TestMain (Main)
	// compiled into it; a package without one (interop) may run first on a
	// fresh machine, and a link to nothing makes the broker's MkdirAll fail.
	if err := os.MkdirAll(CacheDir(), 0o755); err != nil {
		t.Fatalf("creating the policy compilation cache: %v", err)
	}
	err := os.Symlink(CacheDir(), filepath.Join(dataDir, ".wasm-cache"))
	if err != nil && !errors.Is(err, fs.ErrExist) {
		t.Fatalf("linking the policy compilation cache: %v", err)
	}
}

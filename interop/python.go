package interop

import (
	"os"
	"path/filepath"
	"testing"
)

// PythonBinary returns the virtualenv interpreter that has confluent-kafka,
// failing the test when the virtualenv is missing.
func PythonBinary(t testing.TB) string {
	t.Helper()
	peers, err := PeersDir()
	if err != nil {
		missingPeer(t, "Python virtualenv", err)
	}
	p := filepath.Join(peers, "venv", "bin", "python")
	if _, err := os.Stat(p); err != nil {
		missingPeer(t, "Python virtualenv with confluent-kafka (.peers/venv)", err)
	}
	return p
}

// RunPython runs script (Python source text) with the virtualenv's
// interpreter; args become sys.argv[1:]. The error is non-nil on timeout or
// a non-zero exit.
func RunPython(t testing.TB, c Cmd, script string, args ...string) (*Result, error) {
	t.Helper()
	py := PythonBinary(t)
	f := filepath.Join(t.TempDir(), "script.py")
	if err := os.WriteFile(f, []byte(script), 0o644); err != nil {
		t.Fatalf("interop: write python script: %v", err)
	}
	return runTool(t, c, append([]string{py, f}, args...))
}

// Python runs script like RunPython and fails the test unless it exits 0.
func Python(t testing.TB, script string, args ...string) *Result {
	t.Helper()
	res, err := RunPython(t, Cmd{}, script, args...)
	if err != nil {
		t.Fatalf("interop: python: %v", err)
	}
	return res
}

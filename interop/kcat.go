package interop

import (
	"os/exec"
	"testing"
)

func kcatBinary(t testing.TB) string {
	t.Helper()
	p, err := exec.LookPath("kcat")
	if err != nil {
		missingPeer(t, "kcat", err)
	}
	return p
}

// RunKcat runs kcat with args; the error is non-nil on timeout or a
// non-zero exit. A missing kcat fails the test.
func RunKcat(t testing.TB, c Cmd, args ...string) (*Result, error) {
	t.Helper()
	return runTool(t, c, append([]string{kcatBinary(t)}, args...))
}

// Kcat runs kcat and fails the test unless it exits 0 in time.
func Kcat(t testing.TB, args ...string) *Result {
	t.Helper()
	res, err := RunKcat(t, Cmd{}, args...)
	if err != nil {
		t.Fatalf("interop: kcat: %v", err)
	}
	return res
}

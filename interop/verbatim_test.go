package interop

import (
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestVerbatimServeApiVersions starts `verbatim serve` and checks that
// franz-go and kcat (librdkafka 2.0.2) get ApiVersions answered, that
// SIGTERM stops it cleanly, and that a second serve on the same data
// directory is refused because of the lock.
func TestVerbatimServeApiVersions(t *testing.T) {
	bin := BuildVerbatim(t)
	v := StartVerbatim(t, bin, VerbatimOptions{})
	t.Logf("verbatim serve at %s (pid %d)", v.Addr, v.Proc.PID())

	assertApiVersions(t, v.Addr)
	// Metadata comes with the broker issue; kcat -L may fail after
	// ApiVersions, so only its ApiVersions exchange is asserted.
	res := assertKcatSawApiVersions(t, v.Addr)
	t.Logf("kcat -L exit code %d", res.ExitCode)
	if err := v.Proc.Alive(); err != nil {
		t.Fatalf("verbatim died while serving kcat: %v", err)
	}

	// A second broker on the same data directory must refuse to start.
	second, err := RunTool(t, Cmd{Timeout: 30 * time.Second}, bin, "serve",
		"--listen", Addr(FreePorts(t, 1)[0]), "--data-dir", v.DataDir)
	if err == nil || second.ExitCode <= 0 {
		t.Fatalf("second serve on a locked data dir: exit %d, want a non-zero exit\n%s", second.ExitCode, second.describe())
	}
	if out := strings.ToLower(second.Stdout + second.Stderr); !strings.Contains(out, "lock") {
		t.Fatalf("second serve refused without mentioning the lock:\n%s", second.describe())
	}
	if err := v.Proc.Alive(); err != nil {
		t.Fatalf("first broker died when the second was refused: %v", err)
	}

	// SIGTERM: clean shutdown, exit 0.
	v.Proc.Signal(syscall.SIGTERM)
	if !v.Proc.Wait(20 * time.Second) {
		t.Fatalf("verbatim did not exit within 20s of SIGTERM\n%s", v.Proc.LogTail(30))
	}
	if code := v.Proc.ExitCode(); code != 0 {
		t.Fatalf("verbatim exited with %d after SIGTERM, want 0\n%s", code, v.Proc.LogTail(30))
	}

	// Once it is gone the lock is released and the data dir is usable again.
	v2 := StartVerbatim(t, bin, VerbatimOptions{DataDir: v.DataDir})
	assertApiVersions(t, v2.Addr)
}

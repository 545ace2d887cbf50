package interop

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Proc is a long-running peer process (a Kafka node, a Verbatim broker)
// whose stdout and stderr go to a log file.
type Proc struct {
	Name    string
	LogPath string

	cmd  *exec.Cmd
	done chan struct{}

	mu      sync.Mutex
	waitErr error
	exited  bool
}

// StartProc starts argv with stdout and stderr appended to logPath. The
// process gets SIGKILL if the test binary dies first.
func StartProc(t testing.TB, name, logPath, dir string, env []string, argv ...string) *Proc {
	t.Helper()
	logf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatalf("interop: %s: open log: %v", name, err)
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdout = logf
	cmd.Stderr = logf
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		logf.Close()
		t.Fatalf("interop: %s: start %s: %v", name, strings.Join(argv, " "), err)
	}
	p := &Proc{Name: name, LogPath: logPath, cmd: cmd, done: make(chan struct{})}
	go func() {
		err := cmd.Wait()
		logf.Close()
		p.mu.Lock()
		p.waitErr, p.exited = err, true
		p.mu.Unlock()
		close(p.done)
	}()
	return p
}

// PID is the operating-system process id.
func (p *Proc) PID() int { return p.cmd.Process.Pid }

// Alive returns nil while the process runs, or an error describing how it
// ended.
func (p *Proc) Alive() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.exited {
		return nil
	}
	return fmt.Errorf("%s (pid %d) exited: %s", p.Name, p.cmd.Process.Pid, p.exitDesc())
}

func (p *Proc) exitDesc() string {
	if p.waitErr == nil {
		return "exit status 0"
	}
	return p.waitErr.Error()
}

// Done is closed when the process has exited.
func (p *Proc) Done() <-chan struct{} { return p.done }

// ExitCode is the exit code once Done is closed (-1 if killed by a signal).
func (p *Proc) ExitCode() int {
	<-p.done
	return p.cmd.ProcessState.ExitCode()
}

// Signal sends sig to the process if it is still running.
func (p *Proc) Signal(sig os.Signal) {
	select {
	case <-p.done:
	default:
		_ = p.cmd.Process.Signal(sig)
	}
}

// Wait waits up to timeout for the process to exit and reports whether it
// did.
func (p *Proc) Wait(timeout time.Duration) bool {
	select {
	case <-p.done:
		return true
	case <-time.After(timeout):
		return false
	}
}

// Stop sends SIGTERM, waits up to grace, then SIGKILLs. It reports whether
// the process exited on SIGTERM alone.
func (p *Proc) Stop(grace time.Duration) bool {
	p.Signal(syscall.SIGTERM)
	if p.Wait(grace) {
		return true
	}
	p.Signal(syscall.SIGKILL)
	<-p.done
	return false
}

// StopAll stops several processes at once: SIGTERM to all, a shared grace
// period, then SIGKILL to the stragglers. Stopping the nodes of a KRaft
// cluster one by one can stall the last ones on a lost quorum.
func StopAll(grace time.Duration, procs ...*Proc) {
	for _, p := range procs {
		p.Signal(syscall.SIGTERM)
	}
	deadline := time.Now().Add(grace)
	for _, p := range procs {
		if !p.Wait(time.Until(deadline)) {
			p.Signal(syscall.SIGKILL)
			<-p.done
		}
	}
}

// LogTail returns the last n lines of the process log.
func (p *Proc) LogTail(n int) string {
	b, err := os.ReadFile(p.LogPath)
	if err != nil {
		return fmt.Sprintf("(cannot read %s: %v)", p.LogPath, err)
	}
	return tail(string(b), n)
}

// keepLogsOnFailure registers a cleanup that, if the test failed, copies the
// logs out of the test's temporary directory into .peers/logs/ and prints
// their tails. Register it before the cleanup that stops the processes:
// cleanups run last-in first-out, so the processes are stopped first and the
// copied logs are complete.
func keepLogsOnFailure(t testing.TB, procs func() []*Proc) {
	t.Helper()
	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		peers, err := PeersDir()
		if err != nil {
			return
		}
		dir := filepath.Join(peers, "logs")
		_ = os.MkdirAll(dir, 0o755)
		safe := strings.NewReplacer("/", "_", " ", "_").Replace(t.Name())
		for _, p := range procs() {
			b, err := os.ReadFile(p.LogPath)
			if err != nil {
				continue
			}
			keep := filepath.Join(dir, safe+"-"+p.Name+".log")
			_ = os.WriteFile(keep, b, 0o644)
			t.Logf("%s log kept at %s; last lines:\n%s", p.Name, keep, tail(string(b), 40))
		}
	})
}

// WaitForLog polls the process log until it contains s, the process exits,
// or timeout passes.
func WaitForLog(p *Proc, s string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		if b, err := os.ReadFile(p.LogPath); err == nil && strings.Contains(string(b), s) {
			return nil
		}
		if err := p.Alive(); err != nil {
			return err
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s: %q not in log after %v", p.Name, s, timeout)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

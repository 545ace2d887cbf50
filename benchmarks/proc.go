package benchmarks

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// ProcStats is what /proc says about a process: its peak resident set
// (VmHWM) and the CPU time it used (user + system).
type ProcStats struct {
	PeakRSSMB float64
	CPUSecs   float64
}

// ReadProcStats reads /proc/<pid>/status and /proc/<pid>/stat.
func ReadProcStats(pid int) (ProcStats, error) {
	var st ProcStats
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return st, err
	}
	for line := range strings.SplitSeq(string(status), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			f := strings.Fields(rest)
			if len(f) >= 1 {
				kb, _ := strconv.ParseFloat(f[0], 64)
				st.PeakRSSMB = kb / 1024
			}
		}
	}
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return st, err
	}
	// Fields after the command name (which may hold spaces) in parentheses.
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 {
		return st, errors.New("malformed /proc stat")
	}
	f := strings.Fields(string(stat[i+1:]))
	if len(f) < 13 {
		return st, errors.New("malformed /proc stat")
	}
	ut, _ := strconv.ParseFloat(f[11], 64)
	stt, _ := strconv.ParseFloat(f[12], 64)
	st.CPUSecs = (ut + stt) / 100 // USER_HZ is 100 on Linux
	return st, nil
}

// Server is a child process serving Kafka frames on Addr.
type Server struct {
	Addr string
	Cmd  *exec.Cmd
	Log  *bytes.Buffer
	done chan struct{}
}

// FreeAddr returns a loopback address with a port free right now.
func FreeAddr() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}

// StartServer runs argv (with "{addr}" replaced by a free loopback address)
// and waits until the address accepts connections.
func StartServer(argv []string, env []string) (*Server, error) {
	addr, err := FreeAddr()
	if err != nil {
		return nil, err
	}
	args := make([]string, len(argv))
	for i, a := range argv {
		args[i] = strings.ReplaceAll(a, "{addr}", addr)
	}
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Env = append(os.Environ(), env...)
	log := &bytes.Buffer{}
	w := &tailWriter{b: log}
	cmd.Stdout, cmd.Stderr = w, w // one writer: exec serialises its writes
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	s := &Server{Addr: addr, Cmd: cmd, Log: log, done: make(chan struct{})}
	go func() { cmd.Wait(); close(s.done) }()
	deadline := time.Now().Add(30 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			c.Close()
			return s, nil
		}
		select {
		case <-s.done:
			return nil, fmt.Errorf("%s exited at start: %s", args[0], tailString(log.String(), 2000))
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			s.Stop()
			return nil, fmt.Errorf("%s did not listen on %s within 30s", args[0], addr)
		}
	}
}

// Stats reads the server's /proc figures (call before Stop).
func (s *Server) Stats() (ProcStats, error) { return ReadProcStats(s.Cmd.Process.Pid) }

// Stop sends SIGTERM and waits (SIGKILL after 20 s).
func (s *Server) Stop() {
	_ = s.Cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.done:
	case <-time.After(20 * time.Second):
		_ = s.Cmd.Process.Kill()
		<-s.done
	}
}

type tailWriter struct {
	b *bytes.Buffer
}

func (w *tailWriter) Write(p []byte) (int, error) {
	// exec copies each stream in its own goroutine; keep only a bounded
	// tail so a chatty server cannot grow the harness's memory.
	if w.b.Len() > 1<<20 {
		w.b.Reset()
	}
	return w.b.Write(p)
}

func tailString(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}

// CreateTopic creates topic on a Kafka-protocol server.
// Extra kgo options (TLS, SASL) come after the seed.
func CreateTopic(ctx context.Context, addr, topic string, parts int32, configs map[string]string, opts ...kgo.Opt) error {
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(addr)}, opts...)...)
	if err != nil {
		return err
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	cfg := map[string]*string{}
	for k, v := range configs {
		cfg[k] = &v
	}
	resp, err := adm.CreateTopic(ctx, parts, 1, cfg, topic)
	if err != nil {
		return err
	}
	return resp.Err
}

// Machine describes the host as read at run time.
type Machine struct {
	CPUs      int     `json:"cpus"`
	CPUModel  string  `json:"cpu_model"`
	MemGiB    float64 `json:"mem_gib"`
	Kernel    string  `json:"kernel"`
	Disk      string  `json:"disk"`
	LoadAvg   string  `json:"load_avg"`
	GoVersion string  `json:"go_version"`
}

// DescribeMachine reads nproc, memory, kernel, the disk holding dir and the
// load average.
func DescribeMachine(dir string) Machine {
	m := Machine{CPUs: runtime.NumCPU(), GoVersion: runtime.Version()}
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for line := range strings.SplitSeq(string(b), "\n") {
			if v, ok := strings.CutPrefix(line, "model name"); ok {
				m.CPUModel = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(v), ":"))
				break
			}
		}
	}
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		sc := bufio.NewScanner(bytes.NewReader(b))
		for sc.Scan() {
			if v, ok := strings.CutPrefix(sc.Text(), "MemTotal:"); ok {
				kb, _ := strconv.ParseFloat(strings.Fields(v)[0], 64)
				m.MemGiB = float64(int(kb/1024/1024*10+0.5)) / 10
			}
		}
	}
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		m.Kernel = strings.TrimSpace(string(b))
	}
	if b, err := os.ReadFile("/proc/loadavg"); err == nil {
		f := strings.Fields(string(b))
		if len(f) >= 3 {
			m.LoadAvg = strings.Join(f[:3], " ")
		}
	}
	m.Disk = describeDisk(dir)
	return m
}

func describeDisk(dir string) string {
	var st syscall.Statfs_t
	abs, _ := filepath.Abs(dir)
	if err := syscall.Statfs(abs, &st); err != nil {
		return "unknown"
	}
	// Find the mount holding dir in /proc/self/mounts (longest prefix).
	dev, fstype, best := "", "", -1
	if b, err := os.ReadFile("/proc/self/mounts"); err == nil {
		for line := range strings.SplitSeq(string(b), "\n") {
			f := strings.Fields(line)
			if len(f) < 3 {
				continue
			}
			mp := f[1]
			if (abs == mp || strings.HasPrefix(abs, strings.TrimSuffix(mp, "/")+"/")) && len(mp) > best {
				dev, fstype, best = f[0], f[2], len(mp)
			}
		}
	}
	size := float64(st.Blocks) * float64(st.Bsize) / (1 << 30)
	rot := ""
	if base := filepath.Base(dev); strings.HasPrefix(dev, "/dev/") {
		name := strings.TrimRight(base, "0123456789")
		if b, err := os.ReadFile("/sys/block/" + name + "/queue/rotational"); err == nil {
			if strings.TrimSpace(string(b)) == "0" {
				rot = ", non-rotational"
			} else {
				rot = ", rotational"
			}
		}
	}
	return fmt.Sprintf("%s (%s, %.0f GiB%s)", dev, fstype, size, rot)
}

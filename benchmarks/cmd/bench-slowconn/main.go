package main

import (
	"context"
	"encoding/binary"
	"flag"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/verbatim-kafka/verbatim/benchmarks"
)

func main() { os.Exit(run()) }

func run() int {
	bin := flag.String("verbatim", "bin/verbatim", "the verbatim binary")
	extra := flag.String("server-args", "", "extra flags for verbatim serve, space separated")
	conns := flag.Int("conns", 200, "slow connections")
	announce := flag.Int("announce", 90<<20, "frame size each slow connection announces")
	trickle := flag.Int("trickle", 64, "bytes each slow connection sends per tick")
	every := flag.Duration("every", 500*time.Millisecond, "tick of the slow connections")
	from := flag.String("from", "127.0.0.2", "local address of the slow connections")
	phase := flag.Duration("phase", 20*time.Second, "length of each phase")
	kcat := flag.String("kcat", "kcat", "kcat binary (empty: skip kcat)")
	flag.Parse()

	dir, err := os.MkdirTemp("", "bench-slowconn-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	argv := []string{*bin, "serve", "--listen", "{addr}", "--data-dir", filepath.Join(dir, "data"), "--log-level", "warn"}
	if *extra != "" {
		argv = append(argv, strings.Fields(*extra)...)
	}
	srv, err := benchmarks.StartServer(argv, nil)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer srv.Stop()
	ctx := context.Background()
	if err := benchmarks.CreateTopic(ctx, srv.Addr, "probe", 1, nil); err != nil {
		fmt.Fprintln(os.Stderr, "create topic:", err)
		return 1
	}
	if *kcat != "" {
		if _, err := exec.LookPath(*kcat); err != nil {
			fmt.Fprintln(os.Stderr, "kcat not found; skipping kcat probes")
			*kcat = ""
		}
	}
	pid := srv.Cmd.Process.Pid
	time.Sleep(2 * time.Second)
	fmt.Printf("idle (no clients): rss %.1f MiB\n", rssMiB(pid))
	probe(srv.Addr, *kcat, pid, *phase, "idle")

	a := &attack{addr: srv.Addr, from: *from, announce: *announce, trickle: *trickle}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for range *conns {
		wg.Add(1)
		go func() { defer wg.Done(); a.loop(stop, *every) }()
	}
	time.Sleep(time.Second)
	probe(srv.Addr, *kcat, pid, *phase, "attack")
	close(stop)
	wg.Wait()
	lifetimes := a.lifetimes()
	fmt.Printf("attack: %d slow connections opened, %d closed by the broker, lifetime p50 %s max %s\n",
		a.opened.Load(), len(lifetimes), pct(lifetimes, 50), pct(lifetimes, 100))
	warn := strings.Count(srv.Log.String(), "level=WARN")
	fmt.Printf("broker WARN lines: %d\n", warn)
	return 0
}

// probe measures franz-go produce and end-to-end latency and kcat round
// trips for d, and the broker's RSS meanwhile.
func probe(addr, kcat string, pid int, d time.Duration, name string) {
	done := make(chan struct{})
	var peak atomic.Int64
	go func() {
		for {
			peak.Store(max(peak.Load(), int64(rssMiB(pid)*1024)))
			select {
			case <-done:
				return
			case <-time.After(100 * time.Millisecond):
			}
		}
	}()
	var wg sync.WaitGroup
	var produce, e2e, kc []time.Duration
	var errs atomic.Int64
	wg.Add(1)
	go func() {
		defer wg.Done()
		produce, e2e = kgoProbe(addr, d, &errs)
	}()
	if kcat != "" {
		wg.Add(1)
		go func() {
			defer wg.Done()
			kc = kcatProbe(addr, kcat, d, &errs)
		}()
	}
	wg.Wait()
	close(done)
	fmt.Printf("%s: rss peak %.1f MiB; franz-go produce p50 %s p99 %s max %s (n=%d); franz-go produce->fetch p50 %s p99 %s max %s; kcat produce+consume p50 %s p99 %s max %s (n=%d); errors %d\n",
		name, float64(peak.Load())/1024, pct(produce, 50), pct(produce, 99), pct(produce, 100), len(produce),
		pct(e2e, 50), pct(e2e, 99), pct(e2e, 100), pct(kc, 50), pct(kc, 99), pct(kc, 100), len(kc), errs.Load())
}

func kgoProbe(addr string, d time.Duration, errs *atomic.Int64) (produce, e2e []time.Duration) {
	pc, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.DefaultProduceTopic("probe"), kgo.ProducerLinger(0))
	if err != nil {
		errs.Add(1)
		return
	}
	defer pc.Close()
	cc, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ConsumeTopics("probe"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchMaxWait(100*time.Millisecond))
	if err != nil {
		errs.Add(1)
		return
	}
	defer cc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), d+30*time.Second)
	defer cancel()
	end := time.Now().Add(d)
	for i := 0; time.Now().Before(end); i++ {
		key := []byte("kgo-" + strconv.Itoa(i))
		t0 := time.Now()
		if err := pc.ProduceSync(ctx, &kgo.Record{Key: key, Value: make([]byte, 1000)}).FirstErr(); err != nil {
			errs.Add(1)
			continue
		}
		produce = append(produce, time.Since(t0))
		found := false
		for !found && ctx.Err() == nil {
			cc.PollFetches(ctx).EachRecord(func(r *kgo.Record) {
				if string(r.Key) == string(key) {
					found = true
				}
			})
		}
		e2e = append(e2e, time.Since(t0))
		time.Sleep(100 * time.Millisecond)
	}
	return produce, e2e
}

func kcatProbe(addr, kcat string, d time.Duration, errs *atomic.Int64) []time.Duration {
	var out []time.Duration
	end := time.Now().Add(d)
	for i := 0; time.Now().Before(end); i++ {
		t0 := time.Now()
		p := exec.Command(kcat, "-b", addr, "-P", "-t", "probe", "-p", "0")
		p.Stdin = strings.NewReader("kcat-" + strconv.Itoa(i) + "\n")
		c := exec.Command(kcat, "-b", addr, "-C", "-t", "probe", "-p", "0", "-o", "-1", "-c", "1", "-e", "-q")
		if err := p.Run(); err != nil {
			errs.Add(1)
			continue
		}
		if err := c.Run(); err != nil {
			errs.Add(1)
			continue
		}
		out = append(out, time.Since(t0))
		time.Sleep(200 * time.Millisecond)
	}
	return out
}

// attack is the slow connections: each announces a Produce frame of
// announce bytes and sends trickle bytes per tick; one the broker closes
// is opened again.
type attack struct {
	addr, from string
	announce   int
	trickle    int
	opened     atomic.Int64
	mu         sync.Mutex
	lived      []time.Duration
}

func (a *attack) loop(stop <-chan struct{}, every time.Duration) {
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(a.from)}, Timeout: 5 * time.Second}
	for {
		select {
		case <-stop:
			return
		default:
		}
		nc, err := d.Dial("tcp", a.addr)
		if err != nil {
			time.Sleep(every)
			continue
		}
		a.opened.Add(1)
		t0 := time.Now()
		closed := make(chan struct{})
		go func() {
			buf := make([]byte, 512)
			for {
				if _, err := nc.Read(buf); err != nil {
					close(closed)
					return
				}
			}
		}()
		head := binary.BigEndian.AppendUint32(nil, uint32(a.announce))
		head = append(head, 0, 0, 0, 9, 0, 0, 0, 1, 0, 4, 's', 'l', 'o', 'w')
		_, _ = nc.Write(head)
		chunk := make([]byte, a.trickle)
		tick := time.NewTicker(every)
	conn:
		for {
			select {
			case <-stop:
				tick.Stop()
				nc.Close()
				return
			case <-closed:
				a.mu.Lock()
				a.lived = append(a.lived, time.Since(t0))
				a.mu.Unlock()
				break conn
			case <-tick.C:
				_, _ = nc.Write(chunk)
			}
		}
		tick.Stop()
		nc.Close()
	}
}

func (a *attack) lifetimes() []time.Duration {
	a.mu.Lock()
	defer a.mu.Unlock()
	return slices.Clone(a.lived)
}

func pct(ds []time.Duration, p int) string {
	if len(ds) == 0 {
		return "-"
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	i := min(len(s)-1, (len(s)*p)/100)
	return s[i].Round(100 * time.Microsecond).String()
}

// rssMiB is the process's resident set now (VmRSS).
func rssMiB(pid int) float64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			if f := strings.Fields(rest); len(f) > 0 {
				kb, _ := strconv.ParseFloat(f[0], 64)
				return kb / 1024
			}
		}
	}
	return 0
}

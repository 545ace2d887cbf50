package benchmarks

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/verbatim-kafka/verbatim/kbatch"
)

// IngestOptions configures `make bench-ingest`.
type IngestOptions struct {
	Verbatim string   // the verbatim binary
	SinkArgv []string // argv that runs the reference sink: flags --listen ADDR --dir DIR --durable
	WorkDir  string   // data dirs are created (and removed) under it

	Modes []string // verbatim, normal
	// Codecs are the compression codecs of normal-mode scenarios (none,
	// gzip, snappy, lz4, zstd; default none). Compressed batches hold
	// text-like records compressing about 3-4x, are about as large as the
	// batch size on the wire, and run only for batches of 16 KiB and more;
	// verbatim scenarios are uncompressed (mirror produces are not
	// decompressed).
	Codecs     []string
	Batches    []int    // batch sizes in bytes, header included
	Flushes    []string // never, always
	Rounds     int
	Conns      int
	InFlight   int
	RoundBytes int64 // bytes per run for batches >= 16 KiB
	SmallBytes int64 // bytes per run for smaller batches
	// DurableLargeBytes, when set, is the bytes per run for batches of
	// 1 MiB and more under flush=always: at the default run size such a run
	// is only a few hundred fdatasync-bound requests, and one writeback
	// stall of the disk decides its median and p99.
	DurableLargeBytes int64
	// ComparePolicies adds, to every verbatim scenario, runs of Verbatim
	// with the mirror policies switched off (see IngestResult.Policies).
	ComparePolicies bool
	// Baseline, when set, is a second verbatim binary (an older build)
	// run in every round beside Verbatim and the sink, in the same
	// alternating order, so that a change is judged against the build
	// before it on the same machine at the same moment (see
	// IngestResult.BaselineRatio).
	Baseline string
	// LeadIn starts every round with a discarded run of the round's first
	// system. Measured on the 2-core VM, the first run of a round was about
	// half as fast as the others at 256 KiB-1 MiB batches whatever binary
	// it was, which decided the alternating medians by position alone.
	LeadIn bool
	// AllocBytes is the volume of the in-process run that counts
	// allocations per request (0: skip it).
	AllocBytes int64
	// InFlightLimitMB is the server's --max-inflight-bytes in MiB; the RSS
	// target is this plus 128 MiB.
	InFlightLimitMB int
	// Security lists the security protocols to run every scenario over:
	// plaintext (default) and ssl (Verbatim on an SSL listener, the sink
	// speaking TLS too; scenario names end in -ssl).
	Security []string
	Log      io.Writer

	brokers  map[string]*inprocBroker
	topicSeq int
	template string       // see seedDataDir
	codec    kbatch.Codec // the running scenario's
	security string       // the running scenario's
	tls      *TLSMaterial // for ssl scenarios
}

// IngestResult is one scenario's line of output.
type IngestResult struct {
	Scenario      string  `json:"scenario"`
	Mode          string  `json:"mode"`
	Codec         string  `json:"codec"`
	Security      string  `json:"security"`
	BatchBytes    int     `json:"batch_bytes"`
	Flush         string  `json:"flush"`
	MBps          float64 `json:"mb_per_s"`
	RefMBps       float64 `json:"ref_mb_per_s"`
	Ratio         float64 `json:"ratio"`
	RatioMin      float64 `json:"ratio_min"`
	RatioMax      float64 `json:"ratio_max"`
	P50ms         float64 `json:"p50_ms"`
	P99ms         float64 `json:"p99_ms"`
	RefP50ms      float64 `json:"ref_p50_ms"`
	RefP99ms      float64 `json:"ref_p99_ms"`
	AllocsPerReq  float64 `json:"allocs_per_req"`
	PeakRSSMB     float64 `json:"peak_rss_mb"`
	RefPeakRSSMB  float64 `json:"ref_peak_rss_mb"`
	CPUSecsPerGB  float64 `json:"cpu_s_per_gb"`
	RefCPUSecsGB  float64 `json:"ref_cpu_s_per_gb"`
	Rounds        int     `json:"rounds"`
	BytesPerRound int64   `json:"bytes_per_round"`
	Conns         int     `json:"conns"`
	InFlight      int     `json:"inflight_per_conn"`
	RatioTarget   float64 `json:"ratio_target,omitempty"`
	MeetsRatio    *bool   `json:"meets_ratio,omitempty"`
	MeetsP99      *bool   `json:"meets_p99,omitempty"`
	MeetsRSS      bool    `json:"meets_rss"`
	AllocsSource  string  `json:"allocs_source"`
	// Policies is "default" when the Verbatim runs judge every mirror
	// produce with the default WASM policies (mirror topics get them
	// unless mirror.policies says otherwise), "none" for normal mode.
	// With IngestOptions.ComparePolicies, verbatim scenarios also run
	// Verbatim with the policies off (mirror.policies set empty),
	// alternating with the other runs: PoliciesRatio = on / off.
	Policies         string  `json:"policies"`
	PoliciesOffMBps  float64 `json:"policies_off_mb_per_s,omitempty"`
	PoliciesRatio    float64 `json:"policies_ratio,omitempty"`
	PoliciesRatioMin float64 `json:"policies_ratio_min,omitempty"`
	PoliciesRatioMax float64 `json:"policies_ratio_max,omitempty"`
	// With IngestOptions.Baseline: the baseline binary's throughput and
	// BaselineRatio = Verbatim / baseline, the median of the per-round
	// ratios (new / old when the baseline is the older build).
	BaselineMBps     float64 `json:"baseline_mb_per_s,omitempty"`
	BaselineRatio    float64 `json:"baseline_ratio,omitempty"`
	BaselineRatioMin float64 `json:"baseline_ratio_min,omitempty"`
	BaselineRatioMax float64 `json:"baseline_ratio_max,omitempty"`
	// BaselineCPURatio is the same comparison by CPU (the server's user
	// and system seconds per GB, baseline / Verbatim: above 1 the new
	// build spends less), the median of the per-round ratios. On
	// page-cache rows the wall clock mostly measures the kernel's
	// writeback, which neither build controls; CPU is their own work.
	BaselineCPUSecsGB   float64 `json:"baseline_cpu_s_per_gb,omitempty"`
	BaselineCPURatio    float64 `json:"baseline_cpu_ratio,omitempty"`
	BaselineCPURatioMin float64 `json:"baseline_cpu_ratio_min,omitempty"`
	BaselineCPURatioMax float64 `json:"baseline_cpu_ratio_max,omitempty"`
}

type runResult struct {
	mbps, p50, p99 float64
	stats          ProcStats
	bytes          int64
}

// RatioTarget is the acceptance ratio of a scenario (0: informative only).
func RatioTarget(mode string, batch int) float64 {
	switch {
	case batch < 16<<10:
		return 0
	case mode == "verbatim" && batch >= 256<<10:
		return 0.85
	case mode == "verbatim":
		return 0.70
	default:
		return 0.75
	}
}

func (o *IngestOptions) logf(format string, args ...any) {
	if o.Log != nil {
		fmt.Fprintf(o.Log, format+"\n", args...)
	}
}

// RunIngest runs every scenario (mode x batch size x flush), Verbatim and
// the reference sink alternating for o.Rounds rounds, and calls emit with
// each scenario's medians.
func RunIngest(ctx context.Context, o IngestOptions, emit func(IngestResult) error) error {
	if o.InFlightLimitMB == 0 {
		o.InFlightLimitMB = 256
	}
	defer o.closeInproc()
	defer func() {
		if o.template != "" {
			os.RemoveAll(o.template)
		}
	}()
	codecs, err := parseCodecs(o.Codecs)
	if err != nil {
		return err
	}
	securities := o.Security
	if len(securities) == 0 {
		securities = []string{SecurityPlaintext}
	}
	for _, sec := range securities {
		switch sec {
		case SecurityPlaintext:
		case SecuritySSL, SecuritySASLSSL:
			if o.tls == nil {
				if o.tls, err = NewTLSMaterial(o.WorkDir); err != nil {
					return err
				}
				defer o.tls.Close()
			}
		default:
			return fmt.Errorf("unknown security protocol %q (plaintext, ssl, sasl_ssl)", sec)
		}
	}
	for _, sec := range securities {
		o.security = sec
		if err := o.runAll(ctx, codecs, emit); err != nil {
			return err
		}
	}
	return nil
}

func (o *IngestOptions) runAll(ctx context.Context, codecs []kbatch.Codec, emit func(IngestResult) error) error {
	for _, flush := range o.Flushes {
		for _, mode := range o.Modes {
			for _, codec := range codecs {
				if codec != kbatch.CodecNone && mode != "normal" {
					continue
				}
				o.codec = codec
				for _, batch := range o.Batches {
					if codec != kbatch.CodecNone && batch < 16<<10 {
						continue
					}
					res, err := o.scenario(ctx, mode, batch, flush)
					if err != nil {
						return fmt.Errorf("%s/%s/%d/%s/%s: %w", mode, codec, batch, flush, o.security, err)
					}
					if err := emit(res); err != nil {
						return err
					}
				}
			}
		}
	}
	return nil
}

func (o *IngestOptions) scenario(ctx context.Context, mode string, batch int, flush string) (IngestResult, error) {
	total := o.RoundBytes
	if batch < 16<<10 && o.SmallBytes > 0 {
		total = o.SmallBytes
	}
	if batch >= 1<<20 && flush == "always" && o.DurableLargeBytes > total {
		total = o.DurableLargeBytes
	}
	name := mode
	if o.codec != kbatch.CodecNone {
		name += "-" + o.codec.String()
	}
	suffix := ""
	if o.security != SecurityPlaintext && o.security != "" {
		suffix = "-" + strings.ReplaceAll(o.security, "_", "-")
	}
	r := IngestResult{
		Scenario: fmt.Sprintf("ingest-%s-%s-%s%s", name, sizeName(batch), flush, suffix),
		Mode:     mode, Codec: o.codec.String(), Security: o.security, BatchBytes: batch, Flush: flush, Rounds: o.Rounds,
		BytesPerRound: total, Conns: o.Conns, InFlight: o.InFlight,
	}
	r.Policies = "none"
	comparePolicies := o.ComparePolicies && mode == "verbatim"
	if mode == "verbatim" {
		r.Policies = "default"
	}
	const (
		runVerbatim = iota
		runSink
		runPoliciesOff
		runBaseline
	)
	var vs, rs []runResult
	var ratios, polRatios, offMBps, baseRatios, baseMBps, baseCPU, baseCPURatios []float64
	for round := range o.Rounds {
		var v, ref, off, base runResult
		var err error
		order := []int{runVerbatim, runSink}
		if comparePolicies {
			order = append(order, runPoliciesOff)
		}
		if o.Baseline != "" {
			order = append(order, runBaseline)
		}
		if round%2 == 1 {
			slices.Reverse(order)
		}
		if o.LeadIn {
			order = append([]int{-1 - order[0]}, order...)
		}
		for _, which := range order {
			syscall.Sync() // the previous run's writeback must not land on this one
			if which < 0 { // the lead-in: run the first system, keep nothing
				which = -1 - which
				var lead runResult
				var err error
				switch which {
				case runSink:
					lead, err = o.runSink(ctx, mode, batch, flush, total)
				case runBaseline:
					lead, err = o.runVerbatim(ctx, o.Baseline, mode, batch, flush, total, false)
				default:
					lead, err = o.runVerbatim(ctx, o.Verbatim, mode, batch, flush, total, which == runPoliciesOff)
				}
				if err != nil {
					return r, fmt.Errorf("lead-in: %w", err)
				}
				o.logf("%s round %d: lead-in run %.1f MB/s (discarded)", r.Scenario, round+1, lead.mbps)
				continue
			}
			switch which {
			case runVerbatim:
				v, err = o.runVerbatim(ctx, o.Verbatim, mode, batch, flush, total, false)
			case runSink:
				ref, err = o.runSink(ctx, mode, batch, flush, total)
			case runPoliciesOff:
				off, err = o.runVerbatim(ctx, o.Verbatim, mode, batch, flush, total, true)
			case runBaseline:
				base, err = o.runVerbatim(ctx, o.Baseline, mode, batch, flush, total, false)
			}
			if err != nil {
				return r, err
			}
		}
		o.logf("%s round %d: verbatim %.1f MB/s p99 %.2f ms, reference %.1f MB/s p99 %.2f ms", r.Scenario, round+1, v.mbps, v.p99, ref.mbps, ref.p99)
		vs, rs = append(vs, v), append(rs, ref)
		ratios = append(ratios, v.mbps/ref.mbps)
		if comparePolicies {
			o.logf("%s round %d: verbatim without policies %.1f MB/s", r.Scenario, round+1, off.mbps)
			polRatios = append(polRatios, v.mbps/off.mbps)
			offMBps = append(offMBps, off.mbps)
		}
		if o.Baseline != "" {
			o.logf("%s round %d: baseline %.1f MB/s p99 %.2f ms", r.Scenario, round+1, base.mbps, base.p99)
			baseRatios = append(baseRatios, v.mbps/base.mbps)
			baseMBps = append(baseMBps, base.mbps)
			baseCPU = append(baseCPU, cpuPerGB(base))
			baseCPURatios = append(baseCPURatios, cpuPerGB(base)/cpuPerGB(v))
		}
	}
	if o.Baseline != "" {
		r.BaselineMBps = round2(Median(baseMBps))
		r.BaselineRatio = round2(Median(baseRatios))
		r.BaselineRatioMin, r.BaselineRatioMax = round2(slices.Min(baseRatios)), round2(slices.Max(baseRatios))
		r.BaselineCPUSecsGB = round2(Median(baseCPU))
		r.BaselineCPURatio = round2(Median(baseCPURatios))
		r.BaselineCPURatioMin, r.BaselineCPURatioMax = round2(slices.Min(baseCPURatios)), round2(slices.Max(baseCPURatios))
	}
	if comparePolicies {
		r.PoliciesOffMBps = round2(Median(offMBps))
		r.PoliciesRatio = round2(Median(polRatios))
		r.PoliciesRatioMin, r.PoliciesRatioMax = round2(slices.Min(polRatios)), round2(slices.Max(polRatios))
	}
	pick := func(xs []runResult, f func(runResult) float64) float64 {
		vals := make([]float64, len(xs))
		for i, x := range xs {
			vals[i] = f(x)
		}
		return Median(vals)
	}
	r.MBps = round2(pick(vs, func(x runResult) float64 { return x.mbps }))
	r.RefMBps = round2(pick(rs, func(x runResult) float64 { return x.mbps }))
	r.Ratio = round2(Median(ratios))
	r.RatioMin, r.RatioMax = round2(slices.Min(ratios)), round2(slices.Max(ratios))
	r.P50ms = round2(pick(vs, func(x runResult) float64 { return x.p50 }))
	r.P99ms = round2(pick(vs, func(x runResult) float64 { return x.p99 }))
	r.RefP50ms = round2(pick(rs, func(x runResult) float64 { return x.p50 }))
	r.RefP99ms = round2(pick(rs, func(x runResult) float64 { return x.p99 }))
	r.PeakRSSMB = round2(pick(vs, func(x runResult) float64 { return x.stats.PeakRSSMB }))
	r.RefPeakRSSMB = round2(pick(rs, func(x runResult) float64 { return x.stats.PeakRSSMB }))
	r.CPUSecsPerGB = round2(pick(vs, cpuPerGB))
	r.RefCPUSecsGB = round2(pick(rs, cpuPerGB))
	// Compressed rows are informative: the sink does not decompress.
	if t := RatioTarget(mode, batch); t > 0 && o.codec == kbatch.CodecNone {
		ok := r.Ratio >= t
		r.RatioTarget, r.MeetsRatio = t, &ok
	}
	if flush == "always" {
		ok := r.P99ms <= 2*r.RefP99ms
		r.MeetsP99 = &ok
	}
	r.MeetsRSS = r.PeakRSSMB <= float64(o.InFlightLimitMB+128)
	if o.AllocBytes > 0 && o.securityTLS() == nil {
		a, err := o.countAllocs(ctx, mode, batch, flush)
		if err != nil {
			return r, fmt.Errorf("allocation run: %w", err)
		}
		r.AllocsPerReq = round2(a)
		r.AllocsSource = "in-process"
	} else {
		r.AllocsSource = "not measured"
	}
	return r, nil
}

// cpuPerGB is a run's server CPU seconds per GB written.
func cpuPerGB(x runResult) float64 { return x.stats.CPUSecs / (float64(x.bytes) / 1e9) }

func (o *IngestOptions) load(addr, mode string, batch int, total int64) Load {
	return Load{Addr: addr, Topic: "ingest", Mirror: mode == "verbatim", BatchBytes: batch, Codec: o.codec,
		Conns: o.Conns, InFlight: o.InFlight, TotalBytes: total, Timeout: 10 * time.Minute, TLS: o.securityTLS()}
}

func topicConfigs(mode string, batch int, policiesOff bool) map[string]string {
	if mode == "verbatim" {
		if policiesOff {
			// An empty list binds no policy module (docs/policies.md).
			return map[string]string{"mirror.mode": "push", "mirror.policies": ""}
		}
		return map[string]string{"mirror.mode": "push"}
	}
	return map[string]string{"max.message.bytes": strconv.Itoa(max(2<<20, 2*batch))}
}

func (o *IngestOptions) runVerbatim(ctx context.Context, bin, mode string, batch int, flush string, total int64, policiesOff bool) (runResult, error) {
	dir, err := os.MkdirTemp(o.WorkDir, "verbatim-")
	if err != nil {
		return runResult{}, err
	}
	defer os.RemoveAll(dir)
	if err := o.seedDataDir(dir); err != nil {
		return runResult{}, err
	}
	srv, err := StartServer(o.verbatimSecurityArgs(o.serveArgv(bin, dir, flush)), nil)
	if err != nil {
		return runResult{}, err
	}
	defer srv.Stop()
	if err := CreateTopic(ctx, srv.Addr, "ingest", int32(o.Conns), topicConfigs(mode, batch, policiesOff), o.verbatimAdminOpts()...); err != nil {
		return runResult{}, fmt.Errorf("create topic: %w", err)
	}
	return o.measure(ctx, srv, "verbatim", true, mode, batch, total, o.verbatimSASL())
}

func (o *IngestOptions) runSink(ctx context.Context, mode string, batch int, flush string, total int64) (runResult, error) {
	dir, err := os.MkdirTemp(o.WorkDir, "sink-")
	if err != nil {
		return runResult{}, err
	}
	defer os.RemoveAll(dir)
	argv := append(slices.Clone(o.SinkArgv), "--listen", "{addr}", "--dir", dir, "--durable="+strconv.FormatBool(flush == "always"))
	argv = append(argv, o.sinkSecurityArgs()...)
	srv, err := StartServer(argv, nil)
	if err != nil {
		return runResult{}, err
	}
	defer srv.Stop()
	return o.measure(ctx, srv, "reference sink", false, mode, batch, total, nil)
}

// measure is one measured run against srv (warmAndRun) and the server's
// figures over its measured phase; who names the server in an error, which
// ends with the tail of the server's log.
func (o *IngestOptions) measure(ctx context.Context, srv *Server, who string, verbatim bool, mode string, batch int, total int64, auth func(net.Conn) error) (runResult, error) {
	var before ProcStats
	res, err := o.warmAndRun(ctx, srv, verbatim, mode, batch, total, &before, auth)
	if err != nil {
		return runResult{}, fmt.Errorf("%s: %w\n%s", who, err, tailString(srv.Log.String(), 2000))
	}
	st, err := srv.Stats()
	if err != nil {
		return runResult{}, err
	}
	st.CPUSecs -= before.CPUSecs // the measured phase only
	return runResult{mbps: res.MBps(), p50: res.Percentile(0.50), p99: res.Percentile(0.99), stats: st, bytes: res.Bytes}, nil
}

func (o *IngestOptions) serveArgv(bin, dir, flush string) []string {
	return []string{bin, "serve", "--listen", "{addr}", "--data-dir", dir,
		"--flush", flush, "--log-level", "warn", "--max-inflight-bytes", strconv.Itoa(o.InFlightLimitMB << 20)}
}

// seedDataDir fills the fresh data dir dir with a copy of a template: the
// data dir of a broker started once (no topics) and stopped, so every run
// starts like a restarted broker with its compiled-policy cache warm (a cold
// compile of the default WASM policies takes 1.5 CPU seconds, and over 10
// seconds on a loaded machine, in the background after start).
func (o *IngestOptions) seedDataDir(dir string) error {
	if o.template == "" {
		tmpl, err := os.MkdirTemp(o.WorkDir, "template-")
		if err != nil {
			return err
		}
		srv, err := StartServer(o.serveArgv(o.Verbatim, tmpl, "never"), nil)
		if err != nil {
			return err
		}
		WaitIdle(srv.Cmd.Process.Pid, 2*time.Minute)
		srv.Stop()
		if err := os.Remove(filepath.Join(tmpl, ".lock")); err != nil && !os.IsNotExist(err) {
			return err
		}
		o.template = tmpl
	}
	return os.CopyFS(dir, os.DirFS(o.template))
}

// warmAndRun sends a warm-up of two windows of requests per connection,
// waits until the server is idle (a fresh verbatim serve compiles its
// default WASM policies in the background after start, about 1.5 CPU
// seconds with a cold cache), then measures total bytes continuing from the
// warm-up's log ends. verbatim: the server is a Verbatim, whose mirror
// writers register (Load.Register, logged in as the load is).
func (o *IngestOptions) warmAndRun(ctx context.Context, srv *Server, verbatim bool, mode string, batch int, total int64, cpuBefore *ProcStats, auth func(net.Conn) error) (LoadResult, error) {
	warm := o.load(srv.Addr, mode, batch, int64(o.Conns)*int64(o.InFlight)*int64(batch))
	warm.Authenticate, warm.Register, warm.RegisterSASL = auth, verbatim, o.verbatimSASLMechanism()
	wres, err := RunLoad(ctx, warm)
	if err != nil {
		return LoadResult{}, fmt.Errorf("warm-up: %w", err)
	}
	WaitIdle(srv.Cmd.Process.Pid, 60*time.Second)
	l := o.load(srv.Addr, mode, batch, total)
	l.Authenticate, l.Register, l.RegisterSASL = auth, verbatim, o.verbatimSASLMechanism()
	l.StartOffsets = wres.EndOffsets
	l.OnStart = func() { *cpuBefore, _ = srv.Stats() }
	return RunLoad(ctx, l)
}

// WaitIdle waits until process pid used less than 10% of a CPU over a
// quarter second, or until timeout.
func WaitIdle(pid int, timeout time.Duration) {
	deadline := time.Now().Add(timeout)
	prev, err := ReadProcStats(pid)
	for err == nil && time.Now().Before(deadline) {
		time.Sleep(250 * time.Millisecond)
		cur, e := ReadProcStats(pid)
		if e != nil || cur.CPUSecs-prev.CPUSecs < 0.025 {
			return
		}
		prev, err = cur, e
	}
}

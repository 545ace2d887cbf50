package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"

	"github.com/verbatim-kafka/verbatim/benchmarks"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == "sink" {
		os.Exit(sinkMain(os.Args[2:]))
	}
	os.Exit(benchMain(os.Args[1:]))
}

func sinkMain(args []string) int {
	fs := flag.NewFlagSet("sink", flag.ContinueOnError)
	listen := fs.String("listen", "127.0.0.1:0", "address to listen on")
	dir := fs.String("dir", "", "directory for the partition files")
	durable := fs.Bool("durable", false, "group-commit fdatasync before acknowledging")
	tlsCert := fs.String("tls-cert", "", "PEM certificate: speak TLS (with --tls-key)")
	tlsKey := fs.String("tls-key", "", "PEM private key of --tls-cert")
	if err := fs.Parse(args); err != nil || *dir == "" || (*tlsCert == "") != (*tlsKey == "") {
		fmt.Fprintln(os.Stderr, "usage: bench-ingest sink --listen ADDR --dir DIR [--durable] [--tls-cert FILE --tls-key FILE]")
		return 2
	}
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		fmt.Fprintln(os.Stderr, "sink:", err)
		return 1
	}
	if *tlsCert != "" {
		if ln, err = benchmarks.SinkListener(ln, *tlsCert, *tlsKey); err != nil {
			fmt.Fprintln(os.Stderr, "sink:", err)
			return 1
		}
	}
	s := &benchmarks.Sink{Dir: *dir, Durable: *durable}
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT)
	go func() { <-sigs; ln.Close() }()
	_ = s.Serve(ln)
	return 0
}

func benchMain(args []string) int {
	fs := flag.NewFlagSet("bench-ingest", flag.ContinueOnError)
	bin := fs.String("verbatim", "bin/verbatim", "the verbatim binary")
	work := fs.String("work-dir", "", "where data dirs are created (default: the system temp dir; must be on the disk to measure, not tmpfs)")
	modes := fs.String("modes", "verbatim,normal", "modes: verbatim (mirror produce), normal")
	codecs := fs.String("codecs", "none,gzip,lz4,zstd", "codecs of normal-mode batches (none, gzip, snappy, lz4, zstd); compressed ones hold text-like records and run for batches of 16 KiB and more")
	batches := fs.String("batches", "1024,16384,262144,1048576", "batch sizes in bytes, header included")
	flushes := fs.String("flush", "never,always", "flush policies")
	rounds := fs.Int("rounds", 3, "alternating rounds per scenario (the median is reported)")
	conns := fs.Int("conns", 4, "connections (one partition each)")
	inflight := fs.Int("inflight", 8, "requests in flight per connection")
	roundMB := fs.Int("round-mb", 384, "MiB per run for batches of 16 KiB and more")
	smallMB := fs.Int("small-mb", 32, "MiB per run for smaller batches")
	durableLargeMB := fs.Int("durable-large-mb", 2048, "MiB per run for batches of 1 MiB and more under flush=always (0: round-mb)")
	policies := fs.Bool("policies", true, "also run verbatim scenarios with the mirror policies off and report policies_ratio (on / off)")
	allocMB := fs.Int("alloc-mb", 64, "MiB of the in-process run that counts allocations per request, at least 512 requests (0: skip)")
	limitMB := fs.Int("inflight-limit-mb", 256, "the server's --max-inflight-bytes in MiB")
	baseline := fs.String("baseline", "", "a second verbatim binary (an older build) run in every round; reports baseline_ratio = verbatim / baseline")
	leadIn := fs.Bool("lead-in", true, "start every round with a discarded run of its first system (the first run of a round is slower whatever it runs)")
	quiet := fs.Bool("q", false, "no progress on stderr")
	outPath := fs.String("out", "", "also write the JSON lines to this file")
	security := fs.String("security", "plaintext", "security protocols to run every scenario over: plaintext, ssl (Verbatim on an SSL listener, the sink speaking TLS too), sasl_ssl (Verbatim on a SASL_SSL listener with SASL PLAIN per connection, the sink speaking TLS)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	self, err := os.Executable()
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench-ingest:", err)
		return 1
	}
	if _, err := os.Stat(*bin); err != nil {
		fmt.Fprintf(os.Stderr, "bench-ingest: verbatim binary: %v (run make build)\n", err)
		return 2
	}
	if *baseline != "" {
		if _, err := os.Stat(*baseline); err != nil {
			fmt.Fprintf(os.Stderr, "bench-ingest: baseline binary: %v\n", err)
			return 2
		}
	}
	o := benchmarks.IngestOptions{
		Verbatim: *bin, SinkArgv: []string{self, "sink"}, WorkDir: *work,
		Modes: split(*modes), Codecs: split(*codecs), Flushes: split(*flushes), Rounds: *rounds,
		Conns: *conns, InFlight: *inflight,
		RoundBytes: int64(*roundMB) << 20, SmallBytes: int64(*smallMB) << 20,
		DurableLargeBytes: int64(*durableLargeMB) << 20,
		ComparePolicies:   *policies,
		Baseline:          *baseline,
		LeadIn:            *leadIn,
		AllocBytes:        int64(*allocMB) << 20, InFlightLimitMB: *limitMB,
		Security: split(*security),
	}
	if !*quiet {
		o.Log = os.Stderr
	}
	for _, b := range split(*batches) {
		n, err := strconv.Atoi(b)
		if err != nil || n < 100 {
			fmt.Fprintf(os.Stderr, "bench-ingest: bad batch size %q\n", b)
			return 2
		}
		o.Batches = append(o.Batches, n)
	}
	if o.Rounds < 1 || o.Conns < 1 || o.InFlight < 1 {
		fmt.Fprintln(os.Stderr, "bench-ingest: rounds, conns and inflight must be positive")
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	var out io.Writer = os.Stdout
	if *outPath != "" {
		f, err := os.Create(*outPath)
		if err != nil {
			fmt.Fprintln(os.Stderr, "bench-ingest:", err)
			return 2
		}
		defer f.Close()
		out = io.MultiWriter(os.Stdout, f)
	}
	err = benchmarks.RunIngest(ctx, o, func(r benchmarks.IngestResult) error {
		return benchmarks.WriteJSONLine(out, r)
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench-ingest:", err)
		return 1
	}
	return 0
}

func split(s string) []string {
	var out []string
	for f := range strings.SplitSeq(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}

package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net"
	"os"
	"os/signal"
	"runtime/debug"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/verbatim-kafka/verbatim/broker"
	"github.com/verbatim-kafka/verbatim/brokerconf"
	"github.com/verbatim-kafka/verbatim/link"
	"github.com/verbatim-kafka/verbatim/props"
	"github.com/verbatim-kafka/verbatim/wireext"
)

// serveCmd runs `verbatim serve`. Exit codes: 0 after a clean shutdown,
// 1 when the broker refuses to start (data dir locked or of an unknown
// format) or fails while running, 2 for usage errors.
func serveCmd(args []string) int {
	return serveMain(args, os.Stderr, nil)
}

// serveMain is serveCmd with its log sink and an optional ready callback
// (called with the bound address), so tests can run it in-process.
func serveMain(args []string, stderr io.Writer, ready func(net.Addr)) int {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.SetOutput(stderr)
	listen := fs.String("listen", "127.0.0.1:9092", "address to listen on (host:port)")
	advertised := fs.String("advertised-listener", "", "host:port clients are told to connect to (default: the listen address)")
	dataDir := fs.String("data-dir", "./data", "directory holding the broker's data")
	nodeID := fs.Int("node-id", 1, "this broker's node id")
	logFormat := fs.String("log-format", "text", "log format: text or json")
	logLevel := fs.String("log-level", "info", "log level: debug, info, warn or error")
	flush := fs.String("flush", "never", "durability: never (page cache, as Kafka's default), interval, or always (ack after fsync)")
	maxFrame := fs.Int("max-frame-bytes", 100<<20, "largest request frame accepted; larger frames close the connection")
	inflightReqs := fs.Int("max-inflight-requests", 128, "requests read but not answered, per connection")
	inflightBytes := fs.Int64("max-inflight-bytes", 256<<20, "request bytes held in memory by all connections together (frames are charged as they arrive, by the pooled buffers they hold)")
	inflightConnBytes := fs.Int64("max-inflight-bytes-per-conn", 0, "request bytes held in memory per connection (default: what a largest frame holds while it is read, its buffer class + 1/8)")
	decodeBytes := fs.Int64("max-decode-bytes", 64<<20, "working memory for looking inside batches, over all requests (decompression while validating compressed batches, batches read for timestamp lookups); more waits")
	fetchMax := fs.Int("fetch-max-bytes", 55<<20, "most record bytes one Fetch response carries whatever the request asks (Kafka's fetch.max.bytes); the first batch is returned whole anyway")
	reqTimeout := fs.Duration("request-timeout", 30*time.Second, "longest a request may take before its connection is closed")
	idleTimeout := fs.Duration("idle-timeout", 10*time.Minute, "close connections idle this long")
	memLimit := fs.Int64("memory-limit", -1, "Go soft memory limit in bytes (GOMEMLIMIT); -1: the GOMEMLIMIT environment variable if set, else --max-inflight-bytes + --max-decode-bytes + 96 MiB; 0: no limit")
	shutdownTimeout := fs.Duration("shutdown-timeout", 30*time.Second, "how long shutdown waits for in-flight requests")
	autoCreate := fs.Bool("auto-create-topics", false, "create unknown topics on Metadata requests (Kafka's auto.create.topics.enable)")
	numPartitions := fs.Int("num-partitions", 1, "partitions of auto-created topics and of CreateTopics with -1")
	maxPartitions := fs.Int("max-partitions", 10000, "partitions of all topics together; creating more is refused (INVALID_PARTITIONS)")
	rebalanceDelay := fs.Duration("group-initial-rebalance-delay", 3*time.Second, "how long the first JoinGroup of an empty consumer group waits for more members (Kafka's group.initial.rebalance.delay.ms)")
	// Limits against hostile or broken peers.
	maxConnsPerIP := fs.Int("max-connections-per-ip", math.MaxInt32, "connections allowed from each IP address; more are closed when accepted (Kafka's max.connections.per.ip; 0 only with overrides)")
	maxConnsOverrides := fs.String("max-connections-per-ip-overrides", "", "per-address exceptions to --max-connections-per-ip, host:count,host:count (Kafka's max.connections.per.ip.overrides)")
	inflightIPBytes := fs.Int64("max-inflight-bytes-per-ip", 0, "request bytes held in memory by the connections of one IP address (default: a quarter of --max-inflight-bytes, at least what a largest frame holds)")
	frameMinRate := fs.Int64("frame-min-rate", 1<<20, "bytes/s a request frame must arrive at on average after --frame-grace, else its connection is closed (0: no rate, only --request-timeout)")
	frameGrace := fs.Duration("frame-grace", 5*time.Second, "how long a request frame may arrive slower than --frame-min-rate")
	// The log cleaner (Kafka's log.cleaner.* and offsets.topic.segment.bytes).
	cleanerThreads := fs.Int("log-cleaner-threads", 1, "goroutines cleaning compacted logs, internal topics included (Kafka's log.cleaner.threads; 0: none)")
	cleanerDedupe := fs.Int64("log-cleaner-dedupe-buffer-size", 128<<20, "offset-map memory of the cleaner threads together, 24 bytes a key (Kafka's log.cleaner.dedupe.buffer.size)")
	cleanerBackoff := fs.Int64("log-cleaner-backoff-ms", 15000, "how long an idle cleaner thread sleeps before it looks for a dirty log again (Kafka's log.cleaner.backoff.ms)")
	cleanerIO := fs.Float64("log-cleaner-io-max-bytes-per-second", 0, "cleaner I/O rate, read and written (Kafka's log.cleaner.io.max.bytes.per.second; 0: unlimited)")
	offsetsSegBytes := fs.Int("offsets-topic-segment-bytes", 100<<20, "segment size __consumer_offsets is created with (Kafka's offsets.topic.segment.bytes, at least 1 MiB)")
	policyDir := fs.String("policy-dir", "", "directory of mirror policy modules NAME.wasm for mirror.policies (docs/policies.md); reloaded when a file changes")
	// Configuration files and listeners.
	configFile := fs.String("config", "", "a Kafka server.properties (Kafka's broker property names; listeners, TLS, ...): flags given on the command line win over it, --override over the file")
	var overrides overrideFlags
	fs.Var(&overrides, "override", "name=value: a broker property winning over --config's (repeatable)")
	// Metrics and health probes.
	metricsListen := fs.String("metrics-listen", "", "host:port serving Prometheus /metrics, /healthz and /readyz (docs/operations.md); default: none")
	partSeries := fs.Int("metrics-partition-series", 1000, "how many partitions get per-partition log series on /metrics (kafka_log_log_logendoffset, ...; metrics.partition.series); 0: none")
	helpConfig := fs.Bool("help-config", false, "list the Kafka broker properties Verbatim implements (for --config and --override) and exit")
	// Audit.
	auditLog := fs.String("audit-log", "", "append the audit log of admin mutations (principal, client, resource, outcome) to FILE as JSON lines; default: the main log at INFO")
	if code, ok := parseArgs(fs, args, stderr, "verbatim serve"); !ok {
		return code
	}
	if *helpConfig {
		printConfigHelp(stderr)
		return 0
	}
	var level slog.Level
	if err := level.UnmarshalText([]byte(*logLevel)); err != nil {
		fmt.Fprintf(stderr, "verbatim serve: bad --log-level %q\n", *logLevel)
		return 2
	}
	var handler slog.Handler
	switch *logFormat {
	case "text":
		handler = slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level})
	case "json":
		handler = slog.NewJSONHandler(stderr, &slog.HandlerOptions{Level: level})
	default:
		fmt.Fprintf(stderr, "verbatim serve: --log-format must be text or json, got %q\n", *logFormat)
		return 2
	}
	log := slog.New(handler)
	if *nodeID < 0 || *nodeID > 1<<31-1 {
		fmt.Fprintf(stderr, "verbatim serve: bad --node-id %d\n", *nodeID)
		return 2
	}
	if *maxFrame < 64 || *maxFrame > 1<<31-1 {
		fmt.Fprintf(stderr, "verbatim serve: bad --max-frame-bytes %d\n", *maxFrame)
		return 2
	}
	if *maxPartitions < 1 {
		fmt.Fprintf(stderr, "verbatim serve: bad --max-partitions %d\n", *maxPartitions)
		return 2
	}
	if *numPartitions < 1 || *numPartitions > *maxPartitions {
		fmt.Fprintf(stderr, "verbatim serve: bad --num-partitions %d\n", *numPartitions)
		return 2
	}
	cfg := broker.Config{
		DataDir:            *dataDir,
		NodeID:             int32(*nodeID),
		Logger:             log,
		MaxFrameBytes:      int32(*maxFrame),
		MaxInFlightPerConn: *inflightReqs,
		MaxInFlightBytes:   *inflightBytes,
		// Per-connection bytes: 0 selects the default.
		MaxInFlightBytesPerConn: *inflightConnBytes,
		MaxDecodeBytes:          *decodeBytes,
		FetchMaxBytes:           int32(min(*fetchMax, 1<<31-1)),
		RequestTimeout:          *reqTimeout,
		IdleTimeout:             *idleTimeout,
		Flush:                   *flush,
		AutoCreateTopics:        *autoCreate,
		DefaultPartitions:       int32(*numPartitions),
		MaxPartitions:           *maxPartitions,
		PolicyDir:               *policyDir,
		MetricsListen:           *metricsListen,
		MetricsPartitionSeries:  partitionSeries(*partSeries),
	}
	if *maxConnsPerIP < 0 || *frameMinRate < 0 || *frameGrace <= 0 {
		fmt.Fprintf(stderr, "verbatim serve: bad --max-connections-per-ip %d, --frame-min-rate %d or --frame-grace %s\n", *maxConnsPerIP, *frameMinRate, *frameGrace)
		return 2
	}
	cfg.MaxConnectionsPerIP = maxConnsPerIP
	cfg.MaxConnectionsPerIPOverrides = *maxConnsOverrides
	cfg.MaxInFlightBytesPerIP = *inflightIPBytes
	cfg.FrameMinRate, cfg.FrameGrace = *frameMinRate, *frameGrace
	if *frameMinRate == 0 {
		cfg.FrameMinRate = -1 // off
	}
	if *rebalanceDelay < 0 {
		fmt.Fprintf(stderr, "verbatim serve: bad --group-initial-rebalance-delay %s\n", *rebalanceDelay)
		return 2
	}
	cfg.GroupInitialRebalanceDelay = rebalanceDelay
	if *cleanerThreads < 0 || *cleanerDedupe <= 0 || *cleanerIO < 0 || *cleanerBackoff <= 0 || *offsetsSegBytes < 1<<20 || *offsetsSegBytes > math.MaxInt32 {
		fmt.Fprintln(stderr, "verbatim serve: bad log cleaner setting (threads >= 0, dedupe buffer > 0, io rate >= 0, backoff > 0, offsets topic segment >= 1 MiB)")
		return 2
	}
	cfg.LogCleanerThreads = *cleanerThreads
	if *cleanerThreads == 0 {
		cfg.LogCleanerThreads = -1 // none
	}
	cfg.LogCleanerDedupeBufferSize, cfg.LogCleanerIOMaxBytesPerSecond = *cleanerDedupe, *cleanerIO
	cfg.LogCleanerBackoff = time.Duration(*cleanerBackoff) * time.Millisecond
	cfg.OffsetsTopicSegmentBytes = int32(*offsetsSegBytes)
	var advHost string
	var advPort int32
	if *advertised != "" {
		host, port, err := net.SplitHostPort(*advertised)
		p, perr := strconv.ParseUint(port, 10, 16)
		if err != nil || perr != nil || host == "" || p == 0 {
			fmt.Fprintf(stderr, "verbatim serve: --advertised-listener must be host:port, got %q\n", *advertised)
			return 2
		}
		advHost, advPort = host, int32(p)
		cfg.AdvertisedHost, cfg.AdvertisedPort = advHost, advPort
	}
	var clusterCfg *brokerconf.Cluster // cluster mode (serve_cluster.go); nil: the single node
	if *configFile != "" || len(overrides) > 0 {
		// The file and the overrides apply over the flags' defaults; the
		// flags given on the command line are then applied again.
		explicit := map[string]bool{}
		fs.Visit(func(f *flag.Flag) { explicit[f.Name] = true })
		p, code := loadConfig(&cfg, *configFile, overrides, stderr)
		if code != 0 {
			return code
		}
		reapply := map[string]func(){
			"node-id":                          func() { cfg.NodeID = int32(*nodeID) },
			"data-dir":                         func() { cfg.DataDir = *dataDir },
			"max-frame-bytes":                  func() { cfg.MaxFrameBytes = int32(*maxFrame) },
			"max-inflight-bytes":               func() { cfg.MaxInFlightBytes = *inflightBytes },
			"fetch-max-bytes":                  func() { cfg.FetchMaxBytes = int32(min(*fetchMax, 1<<31-1)) },
			"idle-timeout":                     func() { cfg.IdleTimeout = *idleTimeout },
			"auto-create-topics":               func() { cfg.AutoCreateTopics = *autoCreate },
			"num-partitions":                   func() { cfg.DefaultPartitions = int32(*numPartitions) },
			"group-initial-rebalance-delay":    func() { cfg.GroupInitialRebalanceDelay = rebalanceDelay },
			"max-connections-per-ip":           func() { cfg.MaxConnectionsPerIP = maxConnsPerIP },
			"max-connections-per-ip-overrides": func() { cfg.MaxConnectionsPerIPOverrides = *maxConnsOverrides },
			"advertised-listener":              func() { cfg.AdvertisedHost, cfg.AdvertisedPort = advHost, advPort },
			"log-cleaner-threads": func() {
				cfg.LogCleanerThreads = *cleanerThreads
				if *cleanerThreads == 0 {
					cfg.LogCleanerThreads = -1
				}
			},
			"log-cleaner-dedupe-buffer-size":      func() { cfg.LogCleanerDedupeBufferSize = *cleanerDedupe },
			"log-cleaner-io-max-bytes-per-second": func() { cfg.LogCleanerIOMaxBytesPerSecond = *cleanerIO },
			"offsets-topic-segment-bytes":         func() { cfg.OffsetsTopicSegmentBytes = int32(*offsetsSegBytes) },
			"metrics-listen":                      func() { cfg.MetricsListen = *metricsListen },
			"metrics-partition-series":            func() { cfg.MetricsPartitionSeries = partitionSeries(*partSeries) },
		}
		for name := range explicit {
			if f := reapply[name]; f != nil {
				f()
			}
		}
		if len(cfg.Listeners) > 0 && explicit["listen"] {
			fmt.Fprintf(stderr, "verbatim serve: --listen and the listeners property are both given; use one\n")
			return 2
		}
		if len(cfg.Listeners) > 0 && explicit["advertised-listener"] {
			// The flag is the first listener's advertised address.
			cfg.Listeners[0].Advertised = *advertised
			cfg.AdvertisedHost, cfg.AdvertisedPort = "", 0
		}
		if clusterCfg, code = loadClusterConfig(&cfg, p, overrides, stderr); code != 0 {
			return code
		}
	}
	switch *flush {
	case "never", "interval", "always":
	default:
		fmt.Fprintf(stderr, "verbatim serve: --flush must be never, interval or always, got %q\n", *flush)
		return 2
	}

	if limit, source := memoryLimit(*memLimit, cfg.MaxInFlightBytes+*decodeBytes); limit > 0 {
		debug.SetMemoryLimit(limit)
		log.Info("memory limit set", "bytes", limit, "from", source)
	}

	if *auditLog != "" {
		f, err := os.OpenFile(*auditLog, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
		if err != nil {
			fmt.Fprintf(stderr, "verbatim serve: --audit-log: %v\n", err)
			return 2
		}
		defer f.Close()
		cfg.AuditLog = f
	}
	var cn *clusterNode
	if clusterCfg != nil {
		var err error
		if cn, err = startCluster(&cfg, clusterCfg, log); err != nil {
			log.Error("refusing to start: cluster mode", "err", err)
			return 1
		}
		defer cn.close() // after the broker's shutdown
	}
	srv, err := broker.Open(cfg)
	if err != nil {
		log.Error("refusing to start", "err", err)
		return 1
	}
	if cn != nil {
		cn.attach(srv)
	}
	var ms *metricsServer
	if cfg.MetricsListen != "" {
		if ms, err = startMetrics(srv, cfg.MetricsListen, log); err != nil {
			log.Error("cannot listen", "listener", "metrics", "addr", cfg.MetricsListen, "err", err)
			_ = srv.Shutdown(context.Background())
			if strings.Contains(err.Error(), "address already in use") {
				return 1
			}
			return 2
		}
		defer ms.stop() // after the broker's shutdown: /healthz answers during it
	}
	listeners := cfg.Listeners
	if len(listeners) == 0 {
		listeners = []*broker.Listener{{Name: string(broker.ProtocolPlaintext), Protocol: broker.ProtocolPlaintext, Bind: *listen}}
	}
	lns := make([]net.Listener, 0, len(listeners))
	for _, l := range listeners {
		ln, err := net.Listen("tcp", l.Bind)
		if err != nil {
			log.Error("cannot listen", "listener", l.Name, "addr", l.Bind, "err", err)
			for _, ln := range lns {
				ln.Close()
			}
			_ = srv.Shutdown(context.Background())
			if strings.Contains(err.Error(), "address already in use") {
				return 1
			}
			return 2
		}
		lns = append(lns, ln)
	}
	// The cluster links run inside the broker: opened once it is,
	// installed before the listeners serve, closed before it shuts down.
	links, err := link.Open(link.Config{Host: srv, Log: log.With("component", "link")})
	if err != nil {
		log.Error("refusing to start: the cluster links do not load", "err", err)
		for _, ln := range lns {
			ln.Close()
		}
		_ = srv.Shutdown(context.Background())
		return 1
	}
	srv.SetLinkService(links)
	// The mirror partitions' and links' metrics are read from the same
	// status `mirror status` shows, at scrape time.
	srv.RegisterMirrorMetrics(func() []wireext.MirrorPartitionStatus {
		st, err := links.DescribeMirrors(context.Background(), wireext.DescribeMirrorsRequest{})
		if err != nil {
			return nil
		}
		return st
	})
	closeLinks := func() {
		srv.SetLinkService(nil)
		_ = links.Close()
	}

	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)
	defer signal.Stop(sigs)
	served := make(chan error, len(lns))
	for i, ln := range lns {
		go func() { served <- srv.ServeListener(ln, listeners[i]) }()
	}
	// abort stops what serving started, after a failure: exit status 1.
	abort := func() int {
		closeLinks()
		ctx, cancel := context.WithTimeout(context.Background(), *shutdownTimeout)
		defer cancel()
		_ = srv.Shutdown(ctx)
		return 1
	}
	if cn != nil {
		if err := cn.join(srv, listeners, lns, &cfg); err != nil {
			log.Error("refusing to start: cluster mode", "err", err)
			return abort()
		}
	}
	if ready != nil {
		ready(lns[0].Addr())
	}
	select {
	case sig := <-sigs:
		log.Info("shutting down", "signal", sig.String())
		if cn != nil {
			ctx, cancel := context.WithTimeout(context.Background(), *shutdownTimeout)
			cn.leave(ctx, srv)
			cancel()
			cn.stopReplication()
		}
	case err := <-served:
		log.Error("listener failed", "err", err)
		return abort()
	}
	closeLinks()
	ctx, cancel := context.WithTimeout(context.Background(), *shutdownTimeout)
	defer cancel()
	if err := srv.Shutdown(ctx); err != nil {
		log.Warn("shutdown", "err", err)
	}
	for range lns {
		<-served
	}
	return 0
}

// overrideFlags collects the repeatable --override name=value.
type overrideFlags []string

func (o *overrideFlags) String() string { return strings.Join(*o, " ") }

func (o *overrideFlags) Set(v string) error {
	if k, _, ok := strings.Cut(v, "="); !ok || strings.TrimSpace(k) == "" {
		return errors.New("must be name=value")
	}
	*o = append(*o, v)
	return nil
}

// loadConfig applies --config and --override to cfg and logs the
// warning line of the Kafka properties Verbatim ignores. It returns 0 or
// the exit code of a refusal (2: a usage error).
func loadConfig(cfg *broker.Config, file string, overrides []string, stderr io.Writer) (*props.Props, int) {
	var p *props.Props
	if file != "" {
		var err error
		if p, err = props.ReadFile(file); err != nil {
			fmt.Fprintf(stderr, "verbatim serve: --config: %v\n", err)
			return nil, 2
		}
	}
	warnings, err := brokerconf.LoadInto(cfg, p, overrides)
	if err != nil {
		where := "--override"
		if file != "" {
			where = "--config " + file
		}
		fmt.Fprintf(stderr, "verbatim serve: %s: %v\n", where, err)
		return nil, 2
	}
	for _, w := range warnings {
		cfg.Logger.Warn(w)
	}
	return p, 0
}

// memoryLimit picks the Go soft memory limit: an explicit flag value, else
// the GOMEMLIMIT environment variable (which the runtime has already
// applied; 0 is returned so it is left alone), else budgetBytes (what the
// broker's budgets allow: request frames in flight plus decode memory) plus
// headroom for everything else (buffers of responses, metadata, goroutine
// stacks), so that the garbage collector
// keeps the heap near what the configured limits allow instead of letting
// it grow to twice the live heap.
func memoryLimit(flagValue, budgetBytes int64) (int64, string) {
	switch {
	case flagValue >= 0:
		return flagValue, "--memory-limit"
	case os.Getenv("GOMEMLIMIT") != "":
		return 0, "GOMEMLIMIT"
	default:
		return budgetBytes + 96<<20, "--max-inflight-bytes + --max-decode-bytes + 96 MiB"
	}
}

// printConfigHelp lists the implemented broker properties with their
// scope and one line each.
func printConfigHelp(w io.Writer) {
	fmt.Fprintf(w, "Kafka broker properties implemented (others of Kafka %s are accepted with a warning):\n", brokerconf.KafkaVersion)
	for _, n := range brokerconf.Names() {
		p, _ := brokerconf.Lookup(n)
		scope := ""
		switch p.Scope {
		case brokerconf.ScopeListener:
			scope = " (also listener.name.<listener>." + n + ")"
		case brokerconf.ScopeMechanism:
			scope = " (also listener.name.<listener>.<mechanism>." + n + ")"
		}
		fmt.Fprintf(w, "  %s%s\n      %s\n", n, scope, p.Doc)
	}
}

// partitionSeries maps --metrics-partition-series to
// broker.Config.MetricsPartitionSeries (0 there is the default, so "none"
// is negative).
func partitionSeries(n int) int {
	if n <= 0 {
		return -1
	}
	return n
}

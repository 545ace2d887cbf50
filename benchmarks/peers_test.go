//go:build peerbench

package benchmarks

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/verbatim-kafka/verbatim/interop"
)

var (
	benchProfile = flag.String("bench.profile", "quick", "quick (smoke sizes, 1 round) or full")
	benchOut     = flag.String("bench.out", "tmp", "directory (relative to benchmarks/) for <date>-<commit>.json")
	benchCommit  = flag.String("bench.commit", "", "the commit the tree was exported from (for runs outside a git checkout, e.g. of `git archive` output)")
	benchOnly    = flag.String("bench.only", "", "comma-separated scenario groups to run (produce-perf, consume, e2e, produce-raw, mirror, ingest); empty: all")
)

type profile struct {
	rounds       int
	ppRecords    int   // ProducerPerformance records per run (1 KiB each), page cache
	ppDurable    int   // the same with durable writes (Kafka flush.messages=1 is slow)
	rawBytes     int64 // raw generator bytes per run
	e2eRecords   int
	mirrorMB     int // per pre-loaded topic
	ingestArgs   []string
	toolTimeout  time.Duration
	mirrorTopics []string
}

func profiles(name string) (profile, error) {
	topics := []string{"mirror-plain", "mirror-lz4", "mirror-txn"}
	switch name {
	case "quick":
		return profile{rounds: 1, ppRecords: 5000, ppDurable: 2000, rawBytes: 8 << 20, e2eRecords: 100, mirrorMB: 4,
			ingestArgs:  []string{"-rounds", "1", "-round-mb", "8", "-small-mb", "2", "-alloc-mb", "4", "-batches", "16384,262144"},
			toolTimeout: 3 * time.Minute, mirrorTopics: topics}, nil
	case "full":
		return profile{rounds: 3, ppRecords: 30_000, ppDurable: 20_000, rawBytes: 128 << 20, e2eRecords: 500, mirrorMB: 32,
			ingestArgs:  []string{"-rounds", "3", "-round-mb", "192", "-small-mb", "16", "-alloc-mb", "32"},
			toolTimeout: 10 * time.Minute, mirrorTopics: topics}, nil
	}
	return profile{}, fmt.Errorf("unknown -bench.profile %q", name)
}

// perfJVM are the tool JVM options for measuring runs: the optimising JIT
// and a heap large enough for the producer's buffers.
var perfJVM = []string{"-Xms512m", "-Xmx512m", "-XX:+UseG1GC", "-Djava.awt.headless=true"}

// server is one broker under measurement.
type server struct {
	name string
	addr string
	pid  func() int
}

// measure runs f and returns the server's CPU seconds during f and its
// peak RSS during f (VmHWM reset through clear_refs first).
func measure(t *testing.T, s server, f func()) (cpu, rss float64) {
	pid := s.pid()
	_ = os.WriteFile(fmt.Sprintf("/proc/%d/clear_refs", pid), []byte("5"), 0)
	before, err := ReadProcStats(pid)
	if err != nil {
		t.Fatalf("%s stats: %v", s.name, err)
	}
	f()
	after, err := ReadProcStats(pid)
	if err != nil {
		t.Fatalf("%s stats: %v", s.name, err)
	}
	return after.CPUSecs - before.CPUSecs, after.PeakRSSMB
}

func TestPeerBench(t *testing.T) {
	p, err := profiles(*benchProfile)
	if err != nil {
		t.Fatal(err)
	}
	root, err := interop.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	commit := *benchCommit
	if commit == "" {
		commit = headCommit(t, root, "benchmarks", "broker", "hotpath", "storage", "wasmpolicy", "policies", "cmd", "internal")
	}
	rep := &Report{
		Date: time.Now().UTC().Format("2006-01-02T15:04Z"), Commit: commit, Profile: *benchProfile,
		Command: "make bench", Machine: DescribeMachine(os.TempDir()),
	}
	if *benchProfile == "quick" {
		rep.Command = "make bench-quick"
	}
	rep.Gaps = append(rep.Gaps, "MirrorMaker 2 is connect-mirror 4.3.0 with the 4.3.0 Kafka clients and Connect runtime: 4.4.0 is not served by this machine's Maven Central mirror (benchmarks/mm2/pom.xml)")
	bin := interop.BuildVerbatim(t)
	run := func(group string) bool {
		return *benchOnly == "" || slices.Contains(strings.Split(*benchOnly, ","), group)
	}

	k := interop.StartKafka(t, interop.KafkaOptions{FullJIT: true, HeapMB: 1024, LogLevel: "warn",
		Props: map[string]string{"auto.create.topics.enable": "false"}})
	kafka := server{name: "kafka", addr: k.Bootstrap(), pid: k.Nodes[0].PID}
	// The interop harness starts Kafka with group.initial.rebalance.delay.ms=0;
	// Verbatim gets the same so the consumer-group join of ConsumerPerformance
	// costs the same on both.
	vNever := interop.StartVerbatim(t, bin, interop.VerbatimOptions{Args: []string{"--flush", "never", "--log-level", "warn", "--group-initial-rebalance-delay", "0s"}})
	vAlways := interop.StartVerbatim(t, bin, interop.VerbatimOptions{Args: []string{"--flush", "always", "--log-level", "warn", "--group-initial-rebalance-delay", "0s"}})
	// Start-up work (Kafka's JIT and log loading, Verbatim's background
	// compile of its default WASM policies) must not land in a measurement.
	for _, pid := range []int{k.Nodes[0].PID(), vNever.Proc.PID(), vAlways.Proc.PID()} {
		WaitIdle(pid, time.Minute)
	}
	verb := func(durable bool) server {
		v := vNever
		if durable {
			v = vAlways
		}
		return server{name: "verbatim", addr: v.Addr, pid: v.Proc.PID}
	}
	kafkaCfg := func(durable bool, extra map[string]string) map[string]string {
		m := map[string]string{}
		for k, v := range extra {
			m[k] = v
		}
		if durable {
			m["flush.messages"] = "1"
		}
		return m
	}
	create := func(s server, topic string, parts int32, cfg map[string]string) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := CreateTopic(ctx, s.addr, topic, parts, cfg); err != nil {
			t.Fatalf("create %s on %s: %v", topic, s.name, err)
		}
		// Kafka answers CreateTopics before its partitions have leaders;
		// wait until every partition answers ListOffsets.
		for {
			_, per, err := endOffsets(ctx, s.addr, []string{topic})
			if err == nil && len(per) == int(parts) {
				return
			}
			if ctx.Err() != nil {
				t.Fatalf("topic %s on %s not ready: %v", topic, s.name, err)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	durName := func(d bool) string {
		if d {
			return "durable"
		}
		return "pagecache"
	}

	// versus measures one scenario on Kafka and on Verbatim (v) for p.rounds
	// rounds, the order swapped every other round so neither always runs
	// second, and reports one entry per system.
	versus := func(scen, params string, v server, round func(r int, s server) map[string]float64) {
		rounds := map[string]Rounds{"kafka": {}, "verbatim": {}}
		for r := range p.rounds {
			order := []server{kafka, v}
			if r%2 == 1 {
				order = []server{v, kafka}
			}
			for _, s := range order {
				rounds[s.name].Add(round(r, s))
			}
		}
		for _, sys := range []string{"kafka", "verbatim"} {
			rep.Scenarios = append(rep.Scenarios, rounds[sys].Entry(scen, sys, params))
		}
	}
	// perfTool runs one of Kafka's perf tools against s, parses what it
	// printed and adds the server's CPU seconds and peak RSS during the run.
	perfTool := func(scen string, s server, parse func(stdout string) (map[string]float64, error), tool string, args ...string) map[string]float64 {
		var m map[string]float64
		cpu, rss := measure(t, s, func() {
			res, err := interop.RunJavaTool(t, interop.Cmd{Timeout: p.toolTimeout, JVMOpts: perfJVM}, tool, args...)
			if err != nil {
				t.Fatalf("%s on %s: %v", scen, s.name, err)
			}
			m, err = parse(res.Stdout)
			if err != nil {
				t.Fatalf("%s on %s: %v\n%s", scen, s.name, err, res.Stdout)
			}
		})
		m["server_cpu_s"], m["server_peak_rss_mb"] = cpu, rss
		return m
	}

	if run("produce-perf") {
		// 1. ProducerPerformance, 1 KiB records, acks=all, idempotent, linger 5 ms.
		for _, durable := range []bool{false, true} {
			for _, codec := range []string{"none", "lz4"} {
				scen := fmt.Sprintf("produce-perf-%s-%s", codec, durName(durable))
				n := p.ppRecords
				if durable {
					n = p.ppDurable
				}
				params := fmt.Sprintf("ProducerPerformance, %d records of 1 KiB, 4 partitions, acks=all, idempotent, linger.ms=5, compression %s, %s", n, codec, durName(durable))
				versus(scen, params, verb(durable), func(r int, s server) map[string]float64 {
					topic := fmt.Sprintf("%s-%d", scen, r)
					cfg := map[string]string{}
					if s.name == "kafka" {
						cfg = kafkaCfg(durable, nil)
					}
					create(s, topic, 4, cfg)
					m := perfTool(scen, s, parseProducerPerf, "kafka-producer-perf-test",
						"--bootstrap-server", s.addr, "--topic", topic, "--num-records", strconv.Itoa(n),
						"--record-size", "1024", "--throughput", "-1", "--command-property", "acks=all",
						"enable.idempotence=true", "linger.ms=5", "compression.type="+codec)
					m["server_cpu_s_per_gb"] = m["server_cpu_s"] / (float64(n) * 1024 / 1e9)
					t.Logf("%s round %d %s: %.1f MB/s p99 %.0f ms", scen, r+1, s.name, m["mb_per_s"], m["p99_ms"])
					return m
				})
			}
		}
	}

	if run("consume") && run("produce-perf") {
		// 2. Consume what the page-cache, uncompressed produce runs wrote.
		scen := "consume-perf"
		params := fmt.Sprintf("ConsumerPerformance (consumer group), %d records of 1 KiB written by produce-perf-none-pagecache", p.ppRecords)
		parse := func(out string) (map[string]float64, error) { return parseConsumerPerf(out, p.ppRecords) }
		versus(scen, params, verb(false), func(r int, s server) map[string]float64 {
			topic := fmt.Sprintf("produce-perf-none-pagecache-%d", r)
			m := perfTool(scen, s, parse, "kafka-consumer-perf-test",
				"--bootstrap-server", s.addr, "--topic", topic, "--num-records", strconv.Itoa(p.ppRecords),
				"--timeout", "120000")
			m["server_cpu_s_per_gb"] = m["server_cpu_s"] / (float64(p.ppRecords) * 1024 / 1e9)
			return m
		})
	}

	if run("e2e") {
		// 3. EndToEndLatency.
		scen := "e2e-latency"
		params := fmt.Sprintf("EndToEndLatency, %d records of 1 KiB, acks=all, page cache", p.e2eRecords)
		versus(scen, params, verb(false), func(r int, s server) map[string]float64 {
			topic := fmt.Sprintf("e2e-%d", r)
			create(s, topic, 1, nil)
			return perfTool(scen, s, parseE2E, "kafka-e2e-latency",
				"--bootstrap-server", s.addr, "--topic", topic, "--num-records", strconv.Itoa(p.e2eRecords),
				"--producer-acks", "all", "--record-size", "1024")
		})
	}

	if run("produce-raw") {
		// 4. The raw generator (normal mode) against both brokers.
		for _, durable := range []bool{false, true} {
			scen := "produce-raw-" + durName(durable)
			const batch = 64 << 10
			params := fmt.Sprintf("raw Produce v9, 64 KiB batches of 1000-byte records, 4 connections x 8 in flight, acks=-1, %d MiB per run, %s", p.rawBytes>>20, durName(durable))
			versus(scen, params, verb(durable), func(r int, s server) map[string]float64 {
				topic := fmt.Sprintf("%s-%d", scen, r)
				cfg := map[string]string{"max.message.bytes": strconv.Itoa(2 << 20)}
				if s.name == "kafka" {
					cfg = kafkaCfg(durable, cfg)
				}
				create(s, topic, 4, cfg)
				var res LoadResult
				cpu, rss := measure(t, s, func() {
					res, err = RunLoad(context.Background(), Load{Addr: s.addr, Topic: topic, BatchBytes: batch, Conns: 4, InFlight: 8, TotalBytes: p.rawBytes})
					if err != nil {
						t.Fatalf("%s on %s: %v", scen, s.name, err)
					}
				})
				m := map[string]float64{"mb_per_s": res.MBps(), "records_per_s": float64(res.Records) / res.Elapsed.Seconds(),
					"p50_ms": res.Percentile(0.5), "p99_ms": res.Percentile(0.99), "p999_ms": res.Percentile(0.999),
					"server_cpu_s": cpu, "server_peak_rss_mb": rss, "server_cpu_s_per_gb": cpu / (float64(res.Bytes) / 1e9)}
				t.Logf("%s round %d %s: %.1f MB/s p99 %.1f ms", scen, r+1, s.name, m["mb_per_s"], m["p99_ms"])
				return m
			})
		}
	}

	if run("mirror") {
		// 5. Mirroring the same pre-loaded topics from the Kafka node: into a
		// fresh Kafka with MirrorMaker 2, and into a fresh Verbatim with
		// `verbatim mirror push`, alternating.
		{
			srcBytes, srcRecords := preloadMirrorTopics(t, k, p)
			scen := "mirror"
			rounds := map[string]Rounds{"mm2": {}, "verbatim": {}}
			for r := range p.rounds {
				systems := []string{"mm2", "verbatim"}
				if r%2 == 1 {
					systems = []string{"verbatim", "mm2"}
				}
				for _, sys := range systems {
					var m map[string]float64
					if sys == "mm2" {
						m = runMM2(t, k, p, srcBytes, srcRecords)
					} else {
						m = runMirrorPush(t, bin, k, p, srcBytes)
					}
					rounds[sys].Add(m)
					t.Logf("%s round %d %s: %.1f MB/s, %.1f CPU s/GB, verify exact %v", scen, r+1, sys, m["mb_per_s"], m["cpu_s_per_gb"], m["verify_exact"] == 1)
				}
			}
			params := fmt.Sprintf("3 pre-loaded topics (plain, lz4, transactional; 4 partitions, %d MiB of 1000-byte values each, %.0f MB stored) copied from Kafka 4.4 into a fresh destination per round (page cache); MB/s from the first copied data on the destination to the last; CPU = copier + destination server", p.mirrorMB, float64(srcBytes)/1e6)
			rep.Scenarios = append(rep.Scenarios, rounds["mm2"].Entry(scen, "mm2", params+"; MirrorMaker 2 4.3.0 dedicated mode (4.4.0 is not served here), IdentityReplicationPolicy, tasks.max=4, into Kafka 4.4; CPU includes the Connect start-up"))
			rep.Scenarios = append(rep.Scenarios, rounds["verbatim"].Entry(scen, "verbatim", params+"; verbatim mirror push --create-topics into verbatim serve"))
		}
	}

	if run("ingest") {
		// 6. bench-ingest (Verbatim vs the reference sink).
		{
			ing := filepath.Join(root, "bin", "bench-ingest")
			work := filepath.Join(root, "benchmarks", "tmp")
			if err := os.MkdirAll(work, 0o755); err != nil {
				t.Fatal(err)
			}
			args := append([]string{"-verbatim", bin, "-work-dir", work, "-q"}, p.ingestArgs...)
			cmd := exec.Command(ing, args...)
			cmd.Stderr = os.Stderr
			out, err := cmd.Output()
			if err != nil {
				t.Fatalf("bench-ingest (build it with make bench / bench-quick): %v", err)
			}
			sc := bufio.NewScanner(strings.NewReader(string(out)))
			for sc.Scan() {
				var r IngestResult
				if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
					t.Fatalf("bench-ingest line %q: %v", sc.Text(), err)
				}
				rep.Ingest = append(rep.Ingest, r)
			}
		}
	}

	name, err := rep.Write(os.TempDir(), filepath.Join(root, "benchmarks", *benchOut), "")
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("wrote %s", name)
}

// preloadMirrorTopics fills the mirroring source topics on k: plain,
// lz4-compressed and transactional (every transaction committed), 4
// partitions each; it returns the bytes the source stores.
func preloadMirrorTopics(t *testing.T, k *interop.Kafka, p profile) (int64, int64) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	perTopic := p.mirrorMB << 20 / 1000
	val := make([]byte, 1000)
	for i := range val {
		val[i] = byte(i*7 + i>>3)
	}
	for _, topic := range p.mirrorTopics {
		k.CreateTopic(t, topic, 4, 1, nil)
		opts := []kgo.Opt{kgo.DefaultProduceTopic(topic), kgo.ProducerLinger(5 * time.Millisecond), kgo.ProducerBatchMaxBytes(256 << 10)}
		switch topic {
		case "mirror-lz4":
			opts = append(opts, kgo.ProducerBatchCompression(kgo.Lz4Compression()))
		default:
			opts = append(opts, kgo.ProducerBatchCompression(kgo.NoCompression()))
		}
		if topic == "mirror-txn" {
			opts = append(opts, kgo.TransactionalID("bench-preload"))
		}
		cl := k.Client(t, opts...)
		if topic == "mirror-txn" {
			const perTxn = 1000
			for done := 0; done < perTopic; done += perTxn {
				if err := cl.BeginTransaction(); err != nil {
					t.Fatal(err)
				}
				for i := 0; i < perTxn && done+i < perTopic; i++ {
					cl.Produce(ctx, &kgo.Record{Value: val}, func(_ *kgo.Record, err error) {
						if err != nil {
							t.Error(err)
						}
					})
				}
				if err := cl.Flush(ctx); err != nil {
					t.Fatal(err)
				}
				if err := cl.EndTransaction(ctx, kgo.TryCommit); err != nil {
					t.Fatal(err)
				}
			}
		} else {
			for i := 0; i < perTopic; i++ {
				cl.Produce(ctx, &kgo.Record{Value: val}, func(_ *kgo.Record, err error) {
					if err != nil {
						t.Error(err)
					}
				})
			}
			if err := cl.Flush(ctx); err != nil {
				t.Fatal(err)
			}
		}
		cl.Close()
	}
	// The stored size is what the source serves: sum the log segments.
	var total int64
	_ = filepath.Walk(k.Nodes[0].DataDir, func(path string, info os.FileInfo, err error) error {
		if err == nil && !info.IsDir() && strings.HasSuffix(path, ".log") && strings.Contains(path, "mirror-") {
			total += info.Size()
		}
		return nil
	})
	if total == 0 {
		t.Fatal("no source segments found for the mirror topics")
	}
	return total, int64(perTopic) * int64(len(p.mirrorTopics))
}

// endOffsets sums the end offsets of topics on addr (per partition too).
func endOffsets(ctx context.Context, addr string, topics []string) (int64, map[string]int64, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		return 0, nil, err
	}
	defer cl.Close()
	ends, err := kadm.NewClient(cl).ListEndOffsets(ctx, topics...)
	if err != nil {
		return 0, nil, err
	}
	var sum int64
	per := map[string]int64{}
	var ferr error
	ends.Each(func(o kadm.ListedOffset) {
		if o.Err != nil {
			ferr = o.Err
			return
		}
		sum += o.Offset
		per[fmt.Sprintf("%s/%d", o.Topic, o.Partition)] = o.Offset
	})
	return sum, per, ferr
}

// copyWatch polls the destination's end offsets every 100 ms and notes when
// data first appeared and when done() first held.
type copyWatch struct {
	first, last time.Time
	stop        chan struct{}
	stopped     chan struct{}
}

func watchCopy(addr string, topics []string, want int64) *copyWatch {
	w := &copyWatch{stop: make(chan struct{}), stopped: make(chan struct{})}
	go func() {
		defer close(w.stopped)
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			sum, _, _ := endOffsets(ctx, addr, topics)
			cancel()
			now := time.Now()
			if sum > 0 && w.first.IsZero() {
				w.first = now
			}
			if want > 0 && sum >= want {
				w.last = now
				return
			}
			select {
			case <-w.stop:
				return
			case <-tick.C:
			}
		}
	}()
	return w
}

func (w *copyWatch) wait(timeout time.Duration) bool {
	select {
	case <-w.stopped:
		return !w.last.IsZero()
	case <-time.After(timeout):
		close(w.stop)
		<-w.stopped
		return false
	}
}

func verifyExact(t *testing.T, bin, src, dst string, topics []string) float64 {
	out, err := exec.Command(bin, "verify", "--source", src, "--dest", dst, "--topics", strings.Join(topics, ","), "--json").Output()
	var vr struct {
		Exact bool `json:"exact"`
	}
	if json.Unmarshal(out, &vr) != nil {
		t.Logf("verify gave no JSON (%v): %s", err, tailString(string(out), 1000))
		return 0
	}
	if vr.Exact {
		return 1
	}
	return 0
}

func endOffsetsMatch(t *testing.T, src, dst string, topics []string) float64 {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, a, err1 := endOffsets(ctx, src, topics)
	_, b, err2 := endOffsets(ctx, dst, topics)
	if err1 != nil || err2 != nil || len(a) != len(b) {
		return 0
	}
	for k, v := range a {
		if b[k] != v {
			return 0
		}
	}
	return 1
}

// runMirrorPush copies the topics into a fresh verbatim serve.
func runMirrorPush(t *testing.T, bin string, k *interop.Kafka, p profile, srcBytes int64) map[string]float64 {
	dst := interop.StartVerbatim(t, bin, interop.VerbatimOptions{Args: []string{"--log-level", "warn"}})
	defer dst.Proc.Stop(10 * time.Second)
	ds := server{name: "verbatim", addr: dst.Addr, pid: dst.Proc.PID}
	WaitIdle(dst.Proc.PID(), time.Minute)
	var pushCPU, pushRSS, secs, copySecs float64
	cpu, rss := measure(t, ds, func() {
		cmd := exec.Command(bin, "mirror", "push", "--source", k.Bootstrap(), "--dest", dst.Addr,
			"--topics", strings.Join(p.mirrorTopics, ","), "--create-topics", "--log-format", "json", "--log-level", "warn")
		w := watchCopy(dst.Addr, p.mirrorTopics, 0)
		start := time.Now()
		out, err := cmd.CombinedOutput()
		end := time.Now()
		close(w.stop)
		<-w.stopped
		if err != nil {
			t.Fatalf("mirror push: %v\n%s", err, tailString(string(out), 3000))
		}
		secs = end.Sub(start).Seconds()
		copySecs = secs
		if !w.first.IsZero() {
			copySecs = end.Sub(w.first).Seconds()
		}
		pushCPU = (cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()).Seconds()
		if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
			pushRSS = float64(ru.Maxrss) / 1024
		}
	})
	gb := float64(srcBytes) / 1e9
	return map[string]float64{"mb_per_s": float64(srcBytes) / 1e6 / copySecs, "mb_per_s_incl_start": float64(srcBytes) / 1e6 / secs,
		"copier_cpu_s_per_gb": pushCPU / gb, "dest_cpu_s_per_gb": cpu / gb, "cpu_s_per_gb": (pushCPU + cpu) / gb,
		"copier_peak_rss_mb": pushRSS, "dest_peak_rss_mb": rss,
		"verify_exact":      verifyExact(t, bin, k.Bootstrap(), dst.Addr, p.mirrorTopics),
		"end_offsets_match": endOffsetsMatch(t, k.Bootstrap(), dst.Addr, p.mirrorTopics)}
}

// runMM2 copies the topics into a fresh Kafka with MirrorMaker 2 in
// dedicated mode (identity topic names, so the same verify applies).
func runMM2(t *testing.T, k *interop.Kafka, p profile, srcBytes, srcRecords int64) map[string]float64 {
	root, _ := interop.RepoRoot()
	kafkaLib, err := interop.KafkaLibDir()
	if err != nil {
		t.Fatal(err)
	}
	mm2Lib := filepath.Join(root, ".peers", "mm2", "lib")
	if _, err := os.Stat(mm2Lib); err != nil {
		t.Fatalf("MirrorMaker 2 jars missing (run benchmarks/mm2/install.sh, part of make bench): %v", err)
	}
	dstK := interop.StartKafka(t, interop.KafkaOptions{FullJIT: true, HeapMB: 1024, LogLevel: "warn"})
	defer dstK.Stop()
	ds := server{name: "kafka", addr: dstK.Bootstrap(), pid: dstK.Nodes[0].PID}
	WaitIdle(dstK.Nodes[0].PID(), time.Minute)
	dir := t.TempDir()
	props := strings.Join([]string{
		"clusters = src, dst",
		"src.bootstrap.servers = " + k.Bootstrap(),
		"dst.bootstrap.servers = " + dstK.Bootstrap(),
		"src->dst.enabled = true",
		"src->dst.topics = " + strings.Join(p.mirrorTopics, "|"),
		"dst->src.enabled = false",
		"replication.policy.class = org.apache.kafka.connect.mirror.IdentityReplicationPolicy",
		"tasks.max = 4",
		"replication.factor = 1",
		"checkpoints.topic.replication.factor = 1",
		"heartbeats.topic.replication.factor = 1",
		"offset-syncs.topic.replication.factor = 1",
		"offset.storage.replication.factor = 1",
		"status.storage.replication.factor = 1",
		"config.storage.replication.factor = 1",
		"sync.topic.acls.enabled = false",
		"refresh.topics.interval.seconds = 1",
		"",
	}, "\n")
	propsPath := filepath.Join(dir, "mm2.properties")
	if err := os.WriteFile(propsPath, []byte(props), 0o644); err != nil {
		t.Fatal(err)
	}
	java, err := exec.LookPath("java")
	if err != nil {
		t.Fatal("java not found: run make peers")
	}
	var mm2 *interop.Proc
	var mm2Stats ProcStats
	var secs, copySecs float64
	ok := false
	cpu, rss := measure(t, ds, func() {
		w := watchCopy(dstK.Bootstrap(), p.mirrorTopics, srcRecords)
		start := time.Now()
		mm2 = interop.StartProc(t, "mm2", filepath.Join(dir, "mm2.log"), dir, nil, java,
			"-Xms512m", "-Xmx512m", "-XX:+UseG1GC", "-Djava.awt.headless=true", "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn",
			"-cp", mm2Classpath(t, mm2Lib, kafkaLib), "org.apache.kafka.connect.mirror.MirrorMaker", propsPath)
		ok = w.wait(p.toolTimeout)
		if ok {
			secs = w.last.Sub(start).Seconds()
			copySecs = w.last.Sub(w.first).Seconds()
		}
		mm2Stats, _ = ReadProcStats(mm2.PID())
	})
	mm2.Stop(20 * time.Second)
	if !ok {
		t.Fatalf("MirrorMaker 2 did not copy %d records within %v:\n%s", srcRecords, p.toolTimeout, mm2.LogTail(40))
	}
	copySecs = max(copySecs, 0.1) // one poll interval at least
	gb := float64(srcBytes) / 1e9
	return map[string]float64{"mb_per_s": float64(srcBytes) / 1e6 / copySecs, "mb_per_s_incl_start": float64(srcBytes) / 1e6 / secs,
		"copier_cpu_s_per_gb": mm2Stats.CPUSecs / gb, "dest_cpu_s_per_gb": cpu / gb, "cpu_s_per_gb": (mm2Stats.CPUSecs + cpu) / gb,
		"copier_peak_rss_mb": mm2Stats.PeakRSSMB, "dest_peak_rss_mb": rss,
		"verify_exact":      verifyExact(t, interop.BuildVerbatim(t), k.Bootstrap(), dstK.Bootstrap(), p.mirrorTopics),
		"end_offsets_match": endOffsetsMatch(t, k.Bootstrap(), dstK.Bootstrap(), p.mirrorTopics)}
}

func gitOut(t *testing.T, dir string, args ...string) string {
	out, err := exec.Command("git", append([]string{"-C", dir}, args...)...).Output()
	if err != nil {
		t.Fatalf("git %v: %v", args, err)
	}
	return strings.TrimSpace(string(out))
}

// headCommit is HEAD's short commit, with -dirty when a tracked file
// under dirs differs from it.
func headCommit(t *testing.T, root string, dirs ...string) string {
	commit := gitOut(t, root, "rev-parse", "--short=12", "HEAD")
	if gitOut(t, root, append([]string{"status", "--porcelain", "--untracked-files=no", "--"}, dirs...)...) != "" {
		commit += "-dirty"
	}
	return commit
}

// waitForFile waits, polling every 30 s, until path exists (empty: no
// wait); what says what waits.
func waitForFile(t *testing.T, path, what string) {
	for path != "" {
		if _, err := os.Stat(path); err == nil {
			return
		}
		t.Logf("waiting for %s (a quiet machine) before %s", path, what)
		time.Sleep(30 * time.Second)
	}
}

// mm2Classpath is MM2's own Kafka jars (4.3.0) followed by the third-party
// jars of the Kafka 4.4 classpath (no Apache Kafka jar from it).
func mm2Classpath(t *testing.T, mm2Lib, kafkaLib string) string {
	cp := []string{mm2Lib + "/*"}
	jars, err := filepath.Glob(filepath.Join(kafkaLib, "*.jar"))
	if err != nil || len(jars) == 0 {
		t.Fatalf("no jars in %s: run make peers", kafkaLib)
	}
	for _, j := range jars {
		b := filepath.Base(j)
		if strings.HasPrefix(b, "kafka") || strings.HasPrefix(b, "connect-") || strings.HasPrefix(b, "trogdor") {
			continue
		}
		cp = append(cp, j)
	}
	return strings.Join(cp, ":")
}

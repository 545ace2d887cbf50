//go:build peerbench

package benchmarks

import (
	"context"
	"flag"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/verbatim-kafka/verbatim/client"
	"github.com/verbatim-kafka/verbatim/interop"
)

var (
	linkBenchParts   = flag.String("linkbench.parts", "4,1000", "partition counts to run (4: one topic; 1000: 4 topics x 250)")
	linkBenchMB      = flag.String("linkbench.mb", "2048,2048", "MiB of record values per partition count (same order as -linkbench.parts)")
	linkBenchRounds  = flag.Int("linkbench.rounds", 3, "rounds; the systems' order rotates each round, medians are reported")
	linkBenchMM2     = flag.String("linkbench.mm2", "4", "partition counts at which MirrorMaker 2 runs too (empty: never)")
	linkBenchOut     = flag.String("linkbench.out", "tmp", "directory (relative to benchmarks/) for <date>-<commit>-link.json")
	linkBenchQuiet   = flag.String("linkbench.wait-file", "", "wait (polling every 30 s) until this file exists before measuring")
	linkBenchPerf    = flag.String("linkbench.perf", "", "record the link's destination with perf into FILE-<partitions>-<round> (profiling runs, not for measuring)")
	linkBenchEnv     = flag.String("linkbench.serve-env", "", "VAR=VALUE for the link's destination (e.g. GODEBUG=gctrace=1; its log tail is printed)")
	linkBenchOldPush = flag.String("linkbench.old-push", "", "also time `mirror push` into `serve`, both built from this git revision (e.g. aee9a91, the push the link's 2x target was set against; empty: not)")
)

// Systems of the link benchmark, in the order of round 1.
const (
	sysRef  = "reference"
	sysLink = "link"
	sysPush = "push"
	// sysOldPush is `mirror push` built from -linkbench.old-push.
	sysOldPush = "push-old"
	sysMM2     = "mm2"
)

// linkSet is one pre-loaded partition set.
type linkSet struct {
	parts    int32
	topics   []string
	regex    string // the link's --topics
	ends     map[client.TopicPartition]int64
	records  int64
	bytes    int64 // stored on the source (its segment files)
	valuesMB int
}

// TestLinkBench measures the cluster link's ingest from a real Kafka 4.4
// node against a reference copier (RefCopy: the same partitions fetched
// raw with the link's fetch shape and written into the write-only Sink),
// `verbatim mirror push --create-topics` and MirrorMaker 2, at 4 and 1,000
// partitions; see benchmarks/README.md "Cluster link".
//
//	make bench-link
//	go test -tags peerbench -count=1 -timeout 60m -run '^TestLinkBench$' ./benchmarks/ -args -linkbench.mb=64,128 -linkbench.rounds=1
func TestLinkBench(t *testing.T) {
	root, err := interop.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	commit := headCommit(t, root, "benchmarks", "broker", "link", "mirror", "client", "storage", "hotpath", "cmd")
	bin := interop.BuildVerbatim(t)
	var partCounts []int32
	var mbs []int
	for i, s := range strings.Split(*linkBenchParts, ",") {
		n, err := strconv.Atoi(s)
		if err != nil || n <= 0 {
			t.Fatalf("-linkbench.parts: %q", s)
		}
		mb := strings.Split(*linkBenchMB, ",")
		if i >= len(mb) {
			t.Fatalf("-linkbench.mb has no size for %d partitions", n)
		}
		m, err := strconv.Atoi(mb[i])
		if err != nil || m <= 0 {
			t.Fatalf("-linkbench.mb: %q", mb[i])
		}
		partCounts, mbs = append(partCounts, int32(n)), append(mbs, m)
	}
	mm2At := map[int32]bool{}
	for _, s := range strings.Split(*linkBenchMM2, ",") {
		if n, err := strconv.Atoi(s); err == nil {
			mm2At[int32(n)] = true
		}
	}
	work := t.TempDir()

	k := interop.StartKafka(t, interop.KafkaOptions{FullJIT: true, HeapMB: 1024, LogLevel: "warn",
		Props: map[string]string{"auto.create.topics.enable": "false"}})
	sets := make([]*linkSet, len(partCounts))
	for i, parts := range partCounts {
		sets[i] = preloadLinkSet(t, k, parts, mbs[i])
		t.Logf("%d partitions: %d records, %.0f MB stored on the source", parts, sets[i].records, float64(sets[i].bytes)/1e6)
	}
	tmpl := serveTemplate(t, bin, work)
	// The old push writes into a serve of its own revision: the writer
	// registration changed since (the broker assigns writer epochs now).
	var oldPush, oldTmpl string
	if *linkBenchOldPush != "" {
		oldPush = buildAtRevision(t, root, *linkBenchOldPush, work)
		oldWork := filepath.Join(work, "old")
		if err := os.MkdirAll(oldWork, 0o755); err != nil {
			t.Fatal(err)
		}
		oldTmpl = serveTemplate(t, oldPush, oldWork)
	}
	WaitIdle(k.Nodes[0].PID(), time.Minute)

	waitForFile(t, *linkBenchQuiet, "measuring")
	rep := &Report{Date: time.Now().UTC().Format("2006-01-02T15:04Z"), Commit: commit, Profile: fmt.Sprintf("%d rounds", *linkBenchRounds),
		Command: "make bench-link", Machine: DescribeMachine(work)}
	rep.Gaps = append(rep.Gaps, "MirrorMaker 2 is connect-mirror 4.3.0 with the 4.3.0 Kafka clients and Connect runtime: 4.4.0 is not served by this machine's Maven Central mirror (benchmarks/mm2/pom.xml)")
	for _, set := range sets {
		systems := []string{sysRef, sysLink, sysPush}
		if oldPush != "" {
			systems = append(systems, sysOldPush)
		}
		if mm2At[set.parts] {
			systems = append(systems, sysMM2)
		} else {
			rep.Gaps = append(rep.Gaps, fmt.Sprintf("MirrorMaker 2 did not run at %d partitions (-linkbench.mm2)", set.parts))
		}
		rounds := map[string]Rounds{}
		for _, s := range systems {
			rounds[s] = Rounds{}
		}
		scen := fmt.Sprintf("link-%d", set.parts)
		for r := range *linkBenchRounds {
			got := map[string]map[string]float64{}
			for i := range systems {
				sys := systems[(i+r)%len(systems)] // rotate the order each round
				var m map[string]float64
				switch sys {
				case sysRef:
					m = runRefCopy(t, k, set, work)
				case sysLink:
					m = runLink(t, bin, k, set, work, tmpl)
				case sysPush:
					m = runPush(t, bin, bin, bin, k, set, work, tmpl)
				case sysOldPush:
					m = runPush(t, oldPush, oldPush, bin, k, set, work, oldTmpl)
				case sysMM2:
					m = runMM2(t, k, profile{mirrorTopics: set.topics, toolTimeout: 10 * time.Minute}, set.bytes, set.records)
				}
				got[sys] = m
				t.Logf("%s round %d %s: %.1f MB/s in %.2fs, %.2f CPU s/GB, verify exact %v %v", scen, r+1, sys, m["mb_per_s"], m["seconds"], m["cpu_s_per_gb"], m["verify_exact"], m)
			}
			// Ratios of the same round, so the machine's drift cancels.
			got[sysLink]["ratio_to_reference"] = got[sysLink]["mb_per_s"] / got[sysRef]["mb_per_s"]
			got[sysLink]["ratio_to_push"] = got[sysLink]["mb_per_s"] / got[sysPush]["mb_per_s"]
			if old, ok := got[sysOldPush]; ok {
				got[sysLink]["ratio_to_push_old"] = got[sysLink]["mb_per_s"] / old["mb_per_s"]
			}
			for sys, m := range got {
				rounds[sys].Add(m)
			}
			t.Logf("%s round %d: link/reference %.2f, link/push %.2f, link/push-old %.2f", scen, r+1, got[sysLink]["ratio_to_reference"], got[sysLink]["ratio_to_push"], got[sysLink]["ratio_to_push_old"])
		}
		shape := fmt.Sprintf("one topic of %d partitions", set.parts)
		if len(set.topics) > 1 {
			shape = fmt.Sprintf("%d topics x %d partitions", len(set.topics), set.parts/int32(len(set.topics)))
		}
		params := fmt.Sprintf("%s on one Kafka 4.4 node, %d MiB of 1000-byte random values (%.1f MiB per partition, uncompressed, 256 KiB producer batches), %.0f MB stored; copied from offset 0 to the source's log end into a fresh destination per round (page cache); MB/s = stored source bytes / seconds from the copier's start to the last partition complete; CPU = copier + destination; source_cpu_s_per_gb: the source Kafka's CPU during the timed part (not for MM2)",
			shape, set.valuesMB, float64(set.valuesMB)/float64(set.parts), float64(set.bytes)/1e6)
		notes := map[string]string{
			sysRef:     "RefCopy: one KIP-227 fetch session per source broker (the link's default), every partition not yet copied in each request, 4 MiB per partition, 32 MiB per response, read_uncommitted; each response's batches sent as one Produce v9 (acks=-1, up to 8 in flight) into the write-only Sink (sink.go: CRC checked, appended to a file per partition, no index), in this process (CPU: this process)",
			sysLink:    "verbatim link create into a fresh verbatim serve (--flush never), timed from the create command to the destination's ListOffsets (polled every 20 ms; 100 ms at 1,000 partitions) at the source's end offsets for every partition; CPU: serve + the create command",
			sysPush:    "verbatim mirror push --create-topics into a fresh verbatim serve, timed from the push's start to its exit; CPU: push + serve",
			sysOldPush: fmt.Sprintf("as push, with push and serve both built from revision %s (its pusher's writer registration predates today's broker); verify is today's", *linkBenchOldPush),
			sysMM2:     "MirrorMaker 2 4.3.0 dedicated mode (4.4.0 is not served here), IdentityReplicationPolicy, tasks.max=4, into a fresh Kafka 4.4; mb_per_s from the first copied data on the destination to the last (mb_per_s_incl_start includes Connect's start-up); CPU: MM2 + destination Kafka, start-up included",
		}
		for _, sys := range systems {
			e := rounds[sys].Entry(scen, sys, params)
			e.Notes = notes[sys]
			rep.Scenarios = append(rep.Scenarios, e)
		}
	}
	name, err := rep.Write(work, filepath.Join(root, "benchmarks", *linkBenchOut), "-link")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range rep.Scenarios {
		if e.System == sysLink {
			t.Logf("RESULT %s: link %.1f MB/s, link/reference %.2f (%.2f-%.2f), link/push %.2f (%.2f-%.2f), link/push-old %.2f (%.2f-%.2f)", e.Scenario, e.Metrics["mb_per_s"].Median,
				e.Metrics["ratio_to_reference"].Median, e.Metrics["ratio_to_reference"].Min, e.Metrics["ratio_to_reference"].Max,
				e.Metrics["ratio_to_push"].Median, e.Metrics["ratio_to_push"].Min, e.Metrics["ratio_to_push"].Max,
				e.Metrics["ratio_to_push_old"].Median, e.Metrics["ratio_to_push_old"].Min, e.Metrics["ratio_to_push_old"].Max)
		}
	}
	t.Logf("wrote %s", name)
}

// preloadLinkSet creates the partition set's topics (4 partitions: one
// topic; more: 4 topics) and fills every partition with the same share of
// mb MiB of 1000-byte random values, partition after partition so the
// producer's batches are full (256 KiB).
func preloadLinkSet(t *testing.T, k *interop.Kafka, parts int32, mb int) *linkSet {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	set := &linkSet{parts: parts, ends: map[client.TopicPartition]int64{}, valuesMB: mb}
	nt := int32(1)
	if parts > 4 {
		nt = 4
	}
	per := parts / nt
	for i := range nt {
		name := fmt.Sprintf("lb%d", parts)
		if nt > 1 {
			name = fmt.Sprintf("lb%d-%d", parts, i)
		}
		k.CreateTopic(t, name, per, 1, nil)
		set.topics = append(set.topics, name)
	}
	set.regex = strings.Join(set.topics, "|")
	pool := make([]byte, 4<<20)
	rng := rand.New(rand.NewPCG(7, uint64(parts)))
	for i := range pool {
		pool[i] = byte(rng.Uint32())
	}
	cl := k.Client(t, kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerBatchMaxBytes(256<<10), kgo.ProducerLinger(5*time.Millisecond),
		kgo.ProducerBatchCompression(kgo.NoCompression()), kgo.MaxBufferedBytes(128<<20), kgo.MaxBufferedRecords(1<<20), kgo.UnknownTopicRetries(-1))
	recsPer := max(mb<<20/1000/int(parts), 1)
	var failed atomic.Int64
	var firstErr atomic.Value
	for _, topic := range set.topics {
		for p := range per {
			for range recsPer {
				off := rng.IntN(len(pool) - 1000)
				cl.Produce(ctx, &kgo.Record{Topic: topic, Partition: p, Value: pool[off : off+1000]}, func(_ *kgo.Record, err error) {
					if err != nil {
						failed.Add(1)
						firstErr.CompareAndSwap(nil, err.Error())
					}
				})
			}
		}
	}
	if err := cl.Flush(ctx); err != nil || failed.Load() > 0 {
		t.Fatalf("loading %v: %v, %d records failed (%v)", set.topics, err, failed.Load(), firstErr.Load())
	}
	cl.Close()
	_, ends, err := endOffsets(ctx, k.Bootstrap(), set.topics)
	if err != nil {
		t.Fatal(err)
	}
	for key, off := range ends {
		i := strings.LastIndexByte(key, '/')
		p, _ := strconv.Atoi(key[i+1:])
		set.ends[client.TopicPartition{Topic: key[:i], Partition: int32(p)}] = off
		set.records += off
	}
	if len(set.ends) != int(parts) || set.records != int64(recsPer)*int64(parts) {
		t.Fatalf("%v: %d partitions, %d records after loading %d", set.topics, len(set.ends), set.records, int64(recsPer)*int64(parts))
	}
	_ = filepath.Walk(k.Nodes[0].DataDir, func(path string, info os.FileInfo, err error) error {
		if err != nil || info.IsDir() || !strings.HasSuffix(path, ".log") {
			return nil
		}
		dir := filepath.Base(filepath.Dir(path))
		if i := strings.LastIndexByte(dir, '-'); i > 0 && slices.Contains(set.topics, dir[:i]) {
			set.bytes += info.Size()
		}
		return nil
	})
	if set.bytes == 0 {
		t.Fatalf("no source segments found for %v", set.topics)
	}
	return set
}

// serveTemplate is the data dir of a `verbatim serve` started once and
// stopped after its start-up work (the default policies' compile): each
// round's destination starts from a copy of it, as a restarted broker.
func serveTemplate(t *testing.T, bin, work string) string {
	dir := filepath.Join(work, "template")
	srv, err := StartServer(serveArgv(bin, dir), nil)
	if err != nil {
		t.Fatal(err)
	}
	WaitIdle(srv.Cmd.Process.Pid, 2*time.Minute)
	srv.Stop()
	if err := os.Remove(filepath.Join(dir, ".lock")); err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	return dir
}

func serveArgv(bin, dir string) []string {
	return []string{bin, "serve", "--listen", "{addr}", "--data-dir", dir, "--flush", "never", "--log-level", "warn"}
}

// freshServe starts a destination from the template; stop stops it. The
// data dir of a set of many partitions stays until the test ends, as the
// sink's (keepDirs): ext4 does not reuse inodes freed in the last minute
// or more, and creating 1,000 partitions' files right after the previous
// round deleted as many cost the next destination seconds of inode search
// (find_inode_bit, recently_deleted in the profile).
func freshServe(t *testing.T, bin, work, tmpl string, set *linkSet, env ...string) (*Server, func()) {
	dir, err := os.MkdirTemp(work, "dest-")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.CopyFS(dir, os.DirFS(tmpl)); err != nil {
		t.Fatal(err)
	}
	srv, err := StartServer(serveArgv(bin, dir), env)
	if err != nil {
		t.Fatal(err)
	}
	WaitIdle(srv.Cmd.Process.Pid, time.Minute)
	return srv, func() {
		srv.Stop()
		if len(env) > 0 {
			t.Logf("destination log tail:\n%s", tailString(srv.Log.String(), 6000))
		}
		if !keepDirs(set) {
			os.RemoveAll(dir)
		}
	}
}

// keepDirs reports whether a set's copies are kept until the test ends
// (see freshServe); a few partitions' files are removed at once.
func keepDirs(set *linkSet) bool { return set.parts > 16 }

func selfCPU() float64 {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()).Seconds()
}

func cmdCPU(c *exec.Cmd) float64 {
	if c.ProcessState == nil {
		return 0
	}
	return (c.ProcessState.UserTime() + c.ProcessState.SystemTime()).Seconds()
}

// sourceCPU returns a function that gives the source's CPU seconds per GB
// of the set since sourceCPU was called: the source shares the machine, so
// what it spends serving a copier is part of that copier's cost.
func sourceCPU(k *interop.Kafka, set *linkSet) func() float64 {
	before, _ := ReadProcStats(k.Nodes[0].PID())
	return func() float64 {
		after, _ := ReadProcStats(k.Nodes[0].PID())
		return (after.CPUSecs - before.CPUSecs) / (float64(set.bytes) / 1e9)
	}
}

// perfRecord records pid with perf into -linkbench.perf's FILE-<what>-<partitions>-<time>
// (profiling runs only) until the returned function is first called (later calls do nothing).
func perfRecord(t *testing.T, what string, set *linkSet, pid int) func() {
	if *linkBenchPerf == "" {
		return func() {}
	}
	perf := exec.Command("perf", "record", "-F", "499", "-g", "-o", fmt.Sprintf("%s-%s-%d-%d", *linkBenchPerf, what, set.parts, time.Now().Unix()), "-p", strconv.Itoa(pid))
	if err := perf.Start(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Second)
	var once sync.Once
	return func() { once.Do(func() { _ = perf.Process.Signal(syscall.SIGINT); _ = perf.Wait() }) }
}

// runRefCopy copies the set with RefCopy into a fresh in-process Sink.
func runRefCopy(t *testing.T, k *interop.Kafka, set *linkSet, work string) map[string]float64 {
	src := k.Bootstrap()
	dir, err := os.MkdirTemp(work, "sink-")
	if err != nil {
		t.Fatal(err)
	}
	if !keepDirs(set) {
		defer os.RemoveAll(dir)
	}
	sink := &Sink{Dir: dir}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go sink.Serve(ln)
	defer func() { ln.Close(); sink.Close() }()
	cl, err := client.NewCluster(src, client.Options{ClientID: "link-bench-ref"})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	stopPerf := perfRecord(t, "ref", set, os.Getpid())
	cpu0, srcCPU := selfCPU(), sourceCPU(k, set)
	res, err := RefCopy(ctx, RefCopyOptions{Cluster: cl, Ends: set.ends, Sink: ln.Addr().String()})
	cpu, scpu := selfCPU()-cpu0, srcCPU()
	stopPerf()
	if err != nil {
		t.Fatalf("reference copy: %v", err)
	}
	if res.Bytes != set.bytes {
		t.Fatalf("reference copy moved %d bytes, the source stores %d", res.Bytes, set.bytes)
	}
	gb := float64(set.bytes) / 1e9
	return map[string]float64{"mb_per_s": float64(set.bytes) / 1e6 / res.Elapsed.Seconds(), "cpu_s_per_gb": cpu / gb, "seconds": res.Elapsed.Seconds(), "source_cpu_s_per_gb": scpu}
}

// destEndsAt polls the destination's end offsets (every 20 ms, or 100 ms
// above 100 partitions: a poll of 1,000 costs the destination's CPU)
// until every partition of set is at the source's end; it returns when
// data was first seen and when the end was.
func destEndsAt(t *testing.T, addr string, set *linkSet, timeout time.Duration) (first, last time.Time) {
	// kgo refreshes metadata at most every 5 s by default: the topics the
	// link creates would be seen up to 5 s late.
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.MetadataMinAge(10*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	deadline := time.Now().Add(timeout)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		ends, _ := adm.ListEndOffsets(ctx, set.topics...)
		cancel()
		now := time.Now()
		done := 0
		ends.Each(func(o kadm.ListedOffset) {
			if o.Err == nil && o.Offset > 0 && first.IsZero() {
				first = now
			}
			if o.Err == nil && o.Offset == set.ends[client.TopicPartition{Topic: o.Topic, Partition: o.Partition}] {
				done++
			}
		})
		if done == len(set.ends) {
			return first, now
		}
		if now.After(deadline) {
			t.Fatalf("the destination has %d of %d partitions at the source's end after %v", done, len(set.ends), timeout)
		}
		if len(set.ends) > 100 {
			time.Sleep(100 * time.Millisecond)
		} else {
			time.Sleep(20 * time.Millisecond)
		}
	}
}

// runLink copies the set with a cluster link into a fresh serve.
func runLink(t *testing.T, bin string, k *interop.Kafka, set *linkSet, work, tmpl string) map[string]float64 {
	src := k.Bootstrap()
	var env []string
	if *linkBenchEnv != "" {
		env = []string{*linkBenchEnv}
	}
	srv, stop := freshServe(t, bin, work, tmpl, set, env...)
	defer stop()
	before, err := srv.Stats()
	if err != nil {
		t.Fatal(err)
	}
	stopPerf := perfRecord(t, "link", set, srv.Cmd.Process.Pid)
	defer stopPerf()
	create := exec.Command(bin, "link", "create", "bench", "--dest", srv.Addr, "--source", src, "--topics", set.regex)
	srcCPU := sourceCPU(k, set)
	start := time.Now()
	if out, err := create.CombinedOutput(); err != nil {
		t.Fatalf("link create: %v\n%s", err, out)
	}
	created := time.Now()
	first, end := destEndsAt(t, srv.Addr, set, 10*time.Minute)
	stopPerf() // the copy only, not the verify below
	scpu := srcCPU()
	after, err := srv.Stats()
	if err != nil {
		t.Fatal(err)
	}
	secs := end.Sub(start).Seconds()
	gb := float64(set.bytes) / 1e9
	cpu := after.CPUSecs - before.CPUSecs + cmdCPU(create)
	return map[string]float64{"mb_per_s": float64(set.bytes) / 1e6 / secs, "cpu_s_per_gb": cpu / gb, "seconds": secs,
		"create_s": created.Sub(start).Seconds(), "first_data_s": first.Sub(start).Seconds(), "source_cpu_s_per_gb": scpu,
		"dest_peak_rss_mb": after.PeakRSSMB, "verify_exact": verifyExact(t, bin, src, srv.Addr, set.topics)}
}

// runPush copies the set with pushBin's `mirror push --create-topics` into
// a fresh serve of serveBin and checks it with verifyBin's `verify`.
func runPush(t *testing.T, pushBin, serveBin, verifyBin string, k *interop.Kafka, set *linkSet, work, tmpl string) map[string]float64 {
	src := k.Bootstrap()
	srv, stop := freshServe(t, serveBin, work, tmpl, set)
	defer stop()
	before, err := srv.Stats()
	if err != nil {
		t.Fatal(err)
	}
	push := exec.Command(pushBin, "mirror", "push", "--source", src, "--dest", srv.Addr, "--topics", strings.Join(set.topics, ","),
		"--create-topics", "--log-format", "json", "--log-level", "warn")
	srcCPU := sourceCPU(k, set)
	start := time.Now()
	out, err := push.CombinedOutput()
	secs := time.Since(start).Seconds()
	scpu := srcCPU()
	if err != nil {
		t.Fatalf("mirror push: %v\n%s", err, tailString(string(out), 3000))
	}
	after, err := srv.Stats()
	if err != nil {
		t.Fatal(err)
	}
	gb := float64(set.bytes) / 1e9
	copier := cmdCPU(push)
	dest := after.CPUSecs - before.CPUSecs
	var rss float64
	if ru, ok := push.ProcessState.SysUsage().(*syscall.Rusage); ok {
		rss = float64(ru.Maxrss) / 1024
	}
	return map[string]float64{"mb_per_s": float64(set.bytes) / 1e6 / secs, "cpu_s_per_gb": (copier + dest) / gb, "seconds": secs,
		"copier_cpu_s_per_gb": copier / gb, "dest_cpu_s_per_gb": dest / gb, "source_cpu_s_per_gb": scpu, "copier_peak_rss_mb": rss, "dest_peak_rss_mb": after.PeakRSSMB,
		"verify_exact": verifyExact(t, verifyBin, src, srv.Addr, set.topics)}
}

// buildAtRevision builds cmd/verbatim as it was at git revision rev (from
// `git archive`, so no worktree is touched) into work and returns the
// binary's path.
func buildAtRevision(t *testing.T, root, rev, work string) string {
	src := filepath.Join(work, "src-"+rev)
	if err := os.MkdirAll(src, 0o755); err != nil {
		t.Fatal(err)
	}
	archive := exec.Command("sh", "-c", `git -C "$1" archive "$2" | tar -x -C "$3"`, "sh", root, rev, src)
	if out, err := archive.CombinedOutput(); err != nil {
		t.Fatalf("git archive %s: %v\n%s", rev, err, out)
	}
	bin := filepath.Join(work, "verbatim-"+rev)
	build := exec.Command("go", "build", "-o", bin, "./cmd/verbatim")
	build.Dir = src
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building %s's cmd/verbatim: %v\n%s", rev, err, out)
	}
	return bin
}

package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/verbatim-kafka/verbatim/benchmarks"
	"github.com/verbatim-kafka/verbatim/kbatch"
	"github.com/verbatim-kafka/verbatim/storage"
)

type options struct {
	bin          string
	work         string
	commits      int
	offsetsSeg   int
	dirtyMB      int
	keys         int
	segMB        int
	fgMB         int
	rounds       int
	recordBytes  int
	cleanerDedup int64
}

func main() { os.Exit(run()) }

func run() int {
	var o options
	phases := flag.String("phases", "offsets,throughput,foreground", "what to measure")
	flag.StringVar(&o.bin, "verbatim", "bin/verbatim", "the verbatim binary (offsets, foreground)")
	flag.StringVar(&o.work, "work-dir", "", "where data directories go (default: a temporary directory)")
	flag.IntVar(&o.commits, "commits", 600000, "offset commits (offsets)")
	flag.IntVar(&o.offsetsSeg, "offsets-segment-bytes", 1<<20, "--offsets-topic-segment-bytes (offsets)")
	flag.IntVar(&o.dirtyMB, "dirty-mb", 256, "dirty compacted log built (throughput, foreground)")
	flag.IntVar(&o.keys, "keys", 10000, "distinct keys of the compacted log")
	flag.IntVar(&o.segMB, "segment-mb", 64, "segment size of the compacted log (throughput)")
	flag.IntVar(&o.fgMB, "foreground-mb", 512, "bytes produced per foreground run")
	flag.IntVar(&o.rounds, "rounds", 3, "rounds (throughput, foreground)")
	flag.IntVar(&o.recordBytes, "record-bytes", 1000, "value size of the compacted records")
	flag.Int64Var(&o.cleanerDedup, "dedupe-buffer", 128<<20, "the cleaner's dedupe buffer")
	flag.Parse()
	if o.work == "" {
		d, err := os.MkdirTemp("", "bench-cleaner-")
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		defer os.RemoveAll(d)
		o.work = d
	}
	out := json.NewEncoder(os.Stdout)
	for _, ph := range strings.Split(*phases, ",") {
		var err error
		switch ph {
		case "offsets":
			err = benchOffsets(o, out)
		case "throughput":
			err = benchThroughput(o, out)
		case "foreground":
			err = benchForeground(o, out)
		default:
			err = fmt.Errorf("unknown phase %q", ph)
		}
		if err != nil {
			fmt.Fprintf(os.Stderr, "bench-cleaner %s: %v\n", ph, err)
			return 1
		}
	}
	return 0
}

func serveArgv(o options, dir string, extra ...string) []string {
	return append([]string{o.bin, "serve", "--listen", "{addr}", "--data-dir", dir, "--log-level", "warn"}, extra...)
}

// dirBytes sums the sizes of the files under dirs matching glob.
func dirBytes(glob string) int64 {
	var n int64
	dirs, _ := filepath.Glob(glob)
	for _, d := range dirs {
		es, _ := os.ReadDir(d)
		for _, e := range es {
			if fi, err := e.Info(); err == nil && !fi.IsDir() {
				n += fi.Size()
			}
		}
	}
	return n
}

func benchOffsets(o options, out *json.Encoder) error {
	const parts = 100
	for _, on := range []bool{false, true} {
		dir := filepath.Join(o.work, fmt.Sprintf("offsets-%v", on))
		threads := "0"
		if on {
			threads = "1"
		}
		flags := []string{"--offsets-topic-segment-bytes", fmt.Sprint(o.offsetsSeg), "--log-cleaner-threads", threads, "--log-cleaner-backoff-ms", "1000"}
		srv, err := benchmarks.StartServer(serveArgv(o, dir, flags...), nil)
		if err != nil {
			return err
		}
		ctx := context.Background()
		if err := benchmarks.CreateTopic(ctx, srv.Addr, "t", parts, nil); err != nil {
			srv.Stop()
			return err
		}
		cl, err := kgo.NewClient(kgo.SeedBrokers(srv.Addr))
		if err != nil {
			srv.Stop()
			return err
		}
		start := time.Now()
		for r := 0; r < o.commits/parts; r++ {
			req := kmsg.NewPtrOffsetCommitRequest()
			req.Version, req.Group, req.Generation = 8, "g", -1
			rt := kmsg.NewOffsetCommitRequestTopic()
			rt.Topic = "t"
			for p := int32(0); p < parts; p++ {
				rp := kmsg.NewOffsetCommitRequestTopicPartition()
				rp.Partition, rp.Offset = p, int64(r)
				rt.Partitions = append(rt.Partitions, rp)
			}
			req.Topics = append(req.Topics, rt)
			if _, err := req.RequestWith(ctx, cl); err != nil {
				cl.Close()
				srv.Stop()
				return err
			}
		}
		commitTime := time.Since(start)
		cl.Close()
		// Let the cleaner finish: the size stops changing for 3 s.
		glob := filepath.Join(dir, "__consumer_offsets-*")
		for last, since := int64(-1), time.Now(); time.Since(since) < 3*time.Second; time.Sleep(200 * time.Millisecond) {
			if n := dirBytes(glob); n != last {
				last, since = n, time.Now()
			}
		}
		size := dirBytes(glob)
		srv.Stop()
		t0 := time.Now()
		srv, err = benchmarks.StartServer(serveArgv(o, dir, flags...), nil)
		if err != nil {
			return err
		}
		listening := time.Since(t0)
		load, err := groupLoad(srv.Addr, o.commits/parts-1)
		srv.Stop()
		if err != nil {
			return err
		}
		out.Encode(map[string]any{"bench": "offsets", "cleaner": on, "commits": o.commits, "offsets_topic_segment_bytes": o.offsetsSeg,
			"commit_seconds": commitTime.Seconds(), "consumer_offsets_bytes": size,
			"restart_listening_ms": listening.Milliseconds(), "group_load_ms": (listening + load).Milliseconds()})
	}
	return nil
}

// groupLoad times OffsetFetch of group g until it answers want for
// partition 0.
func groupLoad(addr string, want int) (time.Duration, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		return 0, err
	}
	defer cl.Close()
	start := time.Now()
	for time.Since(start) < 5*time.Minute {
		req := kmsg.NewPtrOffsetFetchRequest()
		req.Version, req.Group = 5, "g"
		rt := kmsg.NewOffsetFetchRequestTopic()
		rt.Topic, rt.Partitions = "t", []int32{0}
		req.Topics = append(req.Topics, rt)
		resp, err := req.RequestWith(context.Background(), cl)
		if err == nil && resp.ErrorCode == 0 && len(resp.Topics) == 1 && resp.Topics[0].Partitions[0].Offset == int64(want) {
			return time.Since(start), nil
		}
		if err == nil && resp.ErrorCode != 0 && !errors.Is(kerr.ErrorForCode(resp.ErrorCode), kerr.CoordinatorLoadInProgress) {
			return 0, kerr.ErrorForCode(resp.ErrorCode)
		}
		time.Sleep(time.Millisecond)
	}
	return 0, errors.New("the group never answered its offsets")
}

// buildLog writes o.dirtyMB of keyed records (o.keys keys rewritten in
// turn) into a storage log in dir.
func buildLog(o options, dir string, seed uint64) (*storage.Log, error) {
	l, err := storage.Open(storage.OSFS{}, dir, storage.Config{SegmentBytes: int64(o.segMB) << 20})
	if err != nil {
		return nil, err
	}
	rng := rand.New(rand.NewPCG(seed, 1))
	var off int64
	for written := 0; written < o.dirtyMB<<20; {
		recs := make([]kbatch.Record, 100)
		for i := range recs {
			recs[i] = kbatch.Record{OffsetDelta: int32(i), Key: []byte(fmt.Sprintf("key-%d", rng.IntN(o.keys))),
				Value: benchmarks.TextValue(rng, o.recordBytes)}
		}
		b := kbatch.NewBatch(time.Now().UnixMilli(), recs...)
		b.BaseOffset = off
		enc, err := kbatch.Encode(b)
		if err != nil {
			return nil, err
		}
		if _, err := l.AppendVerbatim(enc); err != nil {
			return nil, err
		}
		off += int64(len(recs))
		written += len(enc)
	}
	return l, l.Flush()
}

// copyFiles is the reference: a sequential read and write of every
// segment file below the active one, 1 MiB at a time, each copy synced.
func copyFiles(src, dst string) (int64, error) {
	logs, _ := filepath.Glob(filepath.Join(src, "*.log"))
	if len(logs) > 0 {
		logs = logs[:len(logs)-1] // the active segment is not cleaned either
	}
	if err := os.MkdirAll(dst, 0o755); err != nil {
		return 0, err
	}
	buf := make([]byte, 1<<20)
	var n int64
	for _, f := range logs {
		in, err := os.Open(f)
		if err != nil {
			return n, err
		}
		outf, err := os.Create(filepath.Join(dst, filepath.Base(f)))
		if err != nil {
			in.Close()
			return n, err
		}
		c, err := io.CopyBuffer(outf, in, buf)
		n += c
		if err == nil {
			err = outf.Sync()
		}
		in.Close()
		outf.Close()
		if err != nil {
			return n, err
		}
	}
	return n, nil
}

func benchThroughput(o options, out *json.Encoder) error {
	for r := 0; r < o.rounds; r++ {
		dir := filepath.Join(o.work, fmt.Sprintf("throughput-%d", r), "c-0")
		l, err := buildLog(o, dir, uint64(r))
		if err != nil {
			return err
		}
		cc := storage.CompactConfig{DeleteRetentionMs: storage.DefaultDeleteRetentionMs, MinCleanableRatio: 0}
		st, err := l.CleanableState(cc, time.Now().UnixMilli())
		if err != nil {
			return err
		}
		t0 := time.Now()
		ref, err := copyFiles(dir, dir+"-copy")
		if err != nil {
			return err
		}
		refTime := time.Since(t0)
		c := storage.NewCleaner(storage.CleanerConfig{DedupeBufferBytes: o.cleanerDedup})
		t0 = time.Now()
		cs, err := c.Clean(l, cc, time.Now().UnixMilli())
		if err != nil {
			return err
		}
		cleanTime := time.Since(t0)
		l.Close()
		mbps := float64(st.CleanableBytes) / 1e6 / cleanTime.Seconds()
		refMBps := float64(ref) / 1e6 / refTime.Seconds()
		out.Encode(map[string]any{"bench": "throughput", "round": r, "dirty_bytes": st.CleanableBytes, "keys": o.keys,
			"clean_seconds": cleanTime.Seconds(), "cleaner_mb_per_s": mbps, "reference_mb_per_s": refMBps, "ratio": mbps / refMBps,
			"bytes_written": cs.BytesWritten, "map_full": cs.MapFull, "cleaner_memory_bytes": c.MemoryBytes()})
		os.RemoveAll(filepath.Dir(dir))
	}
	return nil
}

func benchForeground(o options, out *json.Encoder) error {
	// One prepared data directory: a compacted topic of o.dirtyMB on
	// 1 MiB segments, written with the cleaner off.
	prep := filepath.Join(o.work, "foreground-prep")
	srv, err := benchmarks.StartServer(serveArgv(o, prep, "--log-cleaner-threads", "0"), nil)
	if err != nil {
		return err
	}
	ctx := context.Background()
	if err := benchmarks.CreateTopic(ctx, srv.Addr, "dirty", 1, map[string]string{"cleanup.policy": "compact",
		"segment.bytes": "1048576", "min.cleanable.dirty.ratio": "0.01"}); err == nil {
		err = benchmarks.CreateTopic(ctx, srv.Addr, "fg", 1, nil)
	}
	if err == nil {
		err = fillKeyed(ctx, srv.Addr, "dirty", o)
	}
	srv.Stop()
	if err != nil {
		return err
	}
	var ratios []float64
	for r := 0; r < o.rounds; r++ {
		var mbps [2]float64
		for i, on := range []bool{r%2 == 1, r%2 == 0} {
			dir := filepath.Join(o.work, fmt.Sprintf("foreground-%d-%v", r, on))
			if err := copyTree(prep, dir); err != nil {
				return err
			}
			threads := "0"
			if on {
				threads = "1"
			}
			srv, err := benchmarks.StartServer(serveArgv(o, dir, "--log-cleaner-threads", threads, "--log-cleaner-backoff-ms", "100"), nil)
			if err != nil {
				return err
			}
			res, err := benchmarks.RunLoad(ctx, benchmarks.Load{Addr: srv.Addr, Topic: "fg", BatchBytes: 256 << 10, Conns: 1, InFlight: 8,
				TotalBytes: int64(o.fgMB) << 20})
			cleaned := dirBytes(filepath.Join(dir, "dirty-0"))
			srv.Stop()
			os.RemoveAll(dir)
			if err != nil {
				return err
			}
			idx := 0
			if on {
				idx = 1
			}
			mbps[idx] = res.MBps()
			out.Encode(map[string]any{"bench": "foreground", "round": r, "cleaner": on, "produce_mb_per_s": res.MBps(),
				"dirty_topic_bytes_after": cleaned, "seconds": res.Elapsed.Seconds()})
			_ = i
		}
		ratios = append(ratios, mbps[1]/mbps[0])
	}
	out.Encode(map[string]any{"bench": "foreground", "ratios_with_over_without": ratios})
	return nil
}

// fillKeyed produces o.dirtyMB of keyed records to topic.
func fillKeyed(ctx context.Context, addr, topic string, o options) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.DefaultProduceTopic(topic), kgo.ProducerBatchCompression(kgo.NoCompression()))
	if err != nil {
		return err
	}
	defer cl.Close()
	rng := rand.New(rand.NewPCG(7, 7))
	var first error
	for written := 0; written < o.dirtyMB<<20; {
		r := &kgo.Record{Key: []byte(fmt.Sprintf("key-%d", rng.IntN(o.keys))), Value: benchmarks.TextValue(rng, o.recordBytes)}
		written += len(r.Key) + len(r.Value)
		cl.Produce(ctx, r, func(_ *kgo.Record, err error) {
			if err != nil && first == nil {
				first = err
			}
		})
	}
	if err := cl.Flush(ctx); err != nil {
		return err
	}
	return first
}

// copyTree copies a data directory (files and one level of
// subdirectories deep enough for a broker's layout).
func copyTree(src, dst string) error {
	return filepath.Walk(src, func(p string, fi os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		target := filepath.Join(dst, rel)
		if fi.IsDir() {
			return os.MkdirAll(target, 0o755)
		}
		if fi.Name() == ".lock" {
			return nil
		}
		in, err := os.Open(p)
		if err != nil {
			return err
		}
		defer in.Close()
		outf, err := os.Create(target)
		if err != nil {
			return err
		}
		defer outf.Close()
		_, err = io.Copy(outf, in)
		return err
	})
}

package storage

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"sync"
	"testing"
	"time"
)

// Append throughput against a reference measured in the same run, on the
// same disk, with the same bytes:
//
//   - never:  the reference writes the batches sequentially into a fresh
//     file (pwrite at the end), nothing else; the Log runs AppendLeader (or
//     AppendVerbatim, the mirror path) with FlushNever.
//   - always: the reference does the same writes plus Verbatim's
//     group-commit pattern by hand: a syncer goroutine fdatasyncs as soon as
//     the previous sync finished whenever new bytes were written, and the
//     writer keeps at most benchWindow writes not yet durable. The Log runs
//     AppendLeader with FlushAlways and waits with WaitDurable on the same
//     window.
//
// Each round writes benchRoundBytes (64 MiB, 16 MiB under always; well below the dirty-page throttling
// threshold of a machine with several GiB of RAM) with the reference and
// the Log in alternating order; the benchmark reports the medians of at
// least three rounds (after one unmeasured warm-up pair). Run with:
//
//	go test ./storage/ -run '^$' -bench AppendVsReference -benchtime 1x
//
// VERBATIM_BENCH_DIR selects the directory (default: a temporary directory
// under TMPDIR; it must be on the disk under test, not tmpfs);
// VERBATIM_BENCH_ROUNDS the number of rounds (default 9, minimum 3).
const (
	benchRoundBytesNever  = 64 << 20
	benchRoundBytesAlways = 16 << 20 // short rounds: fsync latency drifts
	benchWindow           = 16
)

func benchRoundBytes(p FlushPolicy) int {
	if p == FlushAlways {
		return benchRoundBytesAlways
	}
	return benchRoundBytesNever
}

var benchCache sync.Map // sub-benchmark name -> benchResult

type benchResult struct{ logMBs, refMBs, ratio float64 }

func benchDir(b *testing.B) string {
	if d := os.Getenv("VERBATIM_BENCH_DIR"); d != "" {
		dir, err := os.MkdirTemp(d, "verbatim-bench-")
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { os.RemoveAll(dir) })
		return dir
	}
	return b.TempDir()
}

func benchRounds() int {
	n, err := strconv.Atoi(os.Getenv("VERBATIM_BENCH_ROUNDS"))
	if err != nil {
		n = 9
	}
	if n < 3 {
		n = 3
	}
	return n
}

// benchBatch returns a v2 batch of about size bytes.
func benchBatch(b *testing.B, size int) []byte {
	const valueSize = 1000
	n := size / (valueSize + 16)
	if n < 1 {
		n = 1
	}
	return testBatch(b, 0, 1, 1_700_000_000_000, n, valueSize)
}

func BenchmarkAppendVsReference(b *testing.B) {
	for _, policy := range []FlushPolicy{FlushNever, FlushAlways} {
		for _, size := range []int{64 << 10, 256 << 10, 1 << 20} {
			for _, verbatim := range []bool{false, true} {
				path := "leader"
				if verbatim {
					path = "verbatim"
				}
				name := fmt.Sprintf("%v/%s/%dKiB", policy, path, size>>10)
				b.Run(name, func(b *testing.B) {
					key := b.Name()
					if r, ok := benchCache.Load(key); ok {
						reportBench(b, r.(benchResult))
						return
					}
					batch := benchBatch(b, size)
					dir := benchDir(b)
					var logs, refs, ratios []float64
					// One unmeasured warm-up pair (file system metadata, page
					// cache, CPU frequency), then the measured rounds.
					benchReference(b, filepath.Join(dir, "ref"), batch, policy)
					benchLog(b, filepath.Join(dir, "log-0"), batch, policy, verbatim)
					for round := 0; round < benchRounds(); round++ {
						var l, r float64
						if round%2 == 0 {
							r = benchReference(b, filepath.Join(dir, "ref"), batch, policy)
							l = benchLog(b, filepath.Join(dir, "log-0"), batch, policy, verbatim)
						} else {
							l = benchLog(b, filepath.Join(dir, "log-0"), batch, policy, verbatim)
							r = benchReference(b, filepath.Join(dir, "ref"), batch, policy)
						}
						logs, refs, ratios = append(logs, l), append(refs, r), append(ratios, l/r)
					}
					res := benchResult{median(logs), median(refs), median(ratios)}
					benchCache.Store(key, res)
					reportBench(b, res)
				})
			}
		}
	}
}

func reportBench(b *testing.B, r benchResult) {
	b.ReportMetric(r.logMBs, "log-MB/s")
	b.ReportMetric(r.refMBs, "ref-MB/s")
	b.ReportMetric(r.ratio, "ratio")
}

func median(v []float64) float64 {
	s := append([]float64(nil), v...)
	sort.Float64s(s)
	return s[len(s)/2]
}

// benchLog appends benchRoundBytes with a Log on the real filesystem and
// returns MB/s (durable MB/s under FlushAlways). verbatim uses
// AppendVerbatim with the batch's base offset set to the log end (the
// mirror path) instead of AppendLeader.
func benchLog(b *testing.B, dir string, batch []byte, policy FlushPolicy, verbatim bool) float64 {
	os.RemoveAll(dir)
	l, err := Open(OSFS{}, dir, Config{Flush: policy, SegmentBytes: 1 << 30})
	if err != nil {
		b.Fatal(err)
	}
	n := benchRoundBytes(policy) / len(batch)
	ends := make([]int64, n)
	// One untimed append first: a new log writes its leader-epoch
	// checkpoint (two fsyncs) on its first batch, a one-time cost that is
	// not append throughput. The reference also writes once untimed.
	if _, err := l.AppendLeader(batch, 1, 1); err != nil {
		b.Fatal(err)
	}
	if err := l.Flush(); err != nil {
		b.Fatal(err)
	}
	start := time.Now()
	for i := 0; i < n; i++ {
		var res AppendResult
		if verbatim {
			setBase(batch, l.LogEndOffset())
			res, err = l.AppendVerbatim(batch)
		} else {
			res, err = l.AppendLeader(batch, 1, 1)
		}
		if err != nil {
			b.Fatal(err)
		}
		ends[i] = res.LastOffset + 1
		if policy == FlushAlways && i >= benchWindow {
			if err := l.WaitDurable(ends[i-benchWindow]); err != nil {
				b.Fatal(err)
			}
		}
	}
	if policy == FlushAlways {
		if err := l.WaitDurable(ends[n-1]); err != nil {
			b.Fatal(err)
		}
	}
	el := time.Since(start)
	if err := l.Close(); err != nil {
		b.Fatal(err)
	}
	os.RemoveAll(dir)
	return float64(n*len(batch)) / el.Seconds() / 1e6
}

// benchReference writes the same bytes with plain pwrites (and, under
// FlushAlways, the same group-commit pattern) and returns MB/s.
func benchReference(b *testing.B, dir string, batch []byte, policy FlushPolicy) float64 {
	os.RemoveAll(dir)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		b.Fatal(err)
	}
	f, err := os.OpenFile(filepath.Join(dir, "ref.log"), os.O_CREATE|os.O_RDWR|os.O_TRUNC, 0o644)
	if err != nil {
		b.Fatal(err)
	}
	n := benchRoundBytes(policy) / len(batch)
	var (
		mu       sync.Mutex
		cond     = sync.NewCond(&mu)
		written  int64
		durable  int64
		stop     bool
		wake     = make(chan struct{}, 1)
		syncDone = make(chan struct{})
	)
	if policy == FlushAlways {
		go func() {
			defer close(syncDone)
			for {
				<-wake
				mu.Lock()
				target, quit := written, stop
				mu.Unlock()
				if target > durable {
					if err := datasync(f); err != nil {
						panic(err)
					}
					mu.Lock()
					durable = target
					cond.Broadcast()
					mu.Unlock()
				}
				if quit {
					return
				}
			}
		}()
	}
	signal := func() {
		select {
		case wake <- struct{}{}:
		default:
		}
	}
	if _, err := f.WriteAt(batch, 0); err != nil {
		b.Fatal(err)
	}
	if err := datasync(f); err != nil {
		b.Fatal(err)
	}
	pos := int64(len(batch))
	mu.Lock()
	written, durable = pos, pos
	mu.Unlock()
	start := time.Now()
	for i := 0; i < n; i++ {
		if _, err := f.WriteAt(batch, pos); err != nil {
			b.Fatal(err)
		}
		pos += int64(len(batch))
		if policy == FlushAlways {
			mu.Lock()
			written = pos
			mu.Unlock()
			signal()
			if i >= benchWindow {
				need := pos - int64(benchWindow*len(batch))
				mu.Lock()
				for durable < need {
					signal()
					cond.Wait()
				}
				mu.Unlock()
			}
		}
	}
	if policy == FlushAlways {
		mu.Lock()
		for durable < pos {
			signal()
			cond.Wait()
		}
		stop = true
		mu.Unlock()
		signal()
		<-syncDone
	}
	el := time.Since(start)
	f.Close()
	os.RemoveAll(dir)
	return float64(n*len(batch)) / el.Seconds() / 1e6
}

// BenchmarkAppendMemFS measures the in-memory append path (CPU cost of the
// Log without disk), per batch size.
func BenchmarkAppendMemFS(b *testing.B) {
	for _, size := range []int{1 << 10, 64 << 10} {
		b.Run(fmt.Sprintf("%dKiB", size>>10), func(b *testing.B) {
			batch := benchBatch(b, size)
			l, err := Open(NewMemFS(), "data/t-0", Config{SegmentBytes: 64 << 20, FileDeleteDelay: time.Millisecond})
			if err != nil {
				b.Fatal(err)
			}
			defer l.Close()
			b.SetBytes(int64(len(batch)))
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				if _, err := l.AppendLeader(batch, 1, 1); err != nil {
					b.Fatal(err)
				}
				if l.Size() > 256<<20 { // bound the memory held by MemFS
					b.StopTimer()
					if err := l.TruncateFullyAndStartAt(l.LogEndOffset()); err != nil {
						b.Fatal(err)
					}
					b.StartTimer()
				}
			}
		})
	}
}

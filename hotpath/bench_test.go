package hotpath

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/verbatim-kafka/verbatim/budget"
	"github.com/verbatim-kafka/verbatim/kbatch"
	"github.com/verbatim-kafka/verbatim/kbatch/kbatchtest"
	"github.com/verbatim-kafka/verbatim/storage"
)

// The hot-path benchmark: pre-encoded Produce frames -> framing (pooled
// frame buffers under budgets) -> header and body decoding -> validation ->
// submission queue -> storage append (real files, OSFS) -> response
// encoding, one request at a time, against a reference measured in the same
// run: read the same frame from the same in-memory stream into one reused
// buffer (the copy every receiver pays), CRC-32C over the batch, and write
// it to a file in the same directory with the same flush pattern
// (fdatasync before acknowledging each request under --flush always).
//
// `make bench-hotpath` runs BenchmarkHotpathReport, which alternates
// reference and pipeline rounds and prints the medians as a table;
// BenchmarkPipeline/BenchmarkReference are the plain `go test -bench` forms.

var benchSizes = []int{1 << 10, 16 << 10, 256 << 10, 1 << 20}

// benchFrame is one pre-encoded Produce request frame carrying one batch of
// about size bytes for one partition.
type benchFrame struct {
	frame     []byte // with the 4-byte size prefix
	recordsAt int    // offset of the batch in frame
	batchLen  int
	lod       int64
}

func newBenchFrame(tb testing.TB, size int) *benchFrame {
	tb.Helper()
	const valueSize = 1000
	n := max(1, size/(valueSize+30))
	recs := make([]kbatch.Record, n)
	for i := range recs {
		v := make([]byte, valueSize)
		for j := range v {
			v[j] = byte(i + j*7)
		}
		recs[i] = kbatch.Record{OffsetDelta: int32(i), Key: []byte(fmt.Sprintf("k%06d", i)), Value: v}
	}
	batch := kbatchtest.Encode(tb, kbatch.NewBatch(time.Now().UnixMilli(), recs...))
	frame := kmsg.NewRequestFormatter(kmsg.FormatterClientID("bench")).AppendRequest(nil, oneSetProduce(11, "bench", batch), 1)
	// Locate the batch inside the frame.
	_, _, body := splitRequest(tb, frame[4:])
	var pr ProduceRequest
	if err := pr.Decode(body, 11); err != nil {
		tb.Fatal(err)
	}
	rec := pr.Topics[0].Partitions[0].Records
	at := int(uintptr(unsafe.Pointer(&rec[0])) - uintptr(unsafe.Pointer(&frame[0])))
	return &benchFrame{frame: frame, recordsAt: at, batchLen: len(rec), lod: int64(len(recs) - 1)}
}

// frameSource is an endless stream of the frame, as a socket would deliver
// it. With verbatim set, each new frame's batch gets the next base offset
// (outside the CRC), as a mirror's successive batches have.
type frameSource struct {
	f        *benchFrame
	buf      []byte
	pos      int
	verbatim bool
	next     int64
}

func newFrameSource(f *benchFrame, verbatim bool) *frameSource {
	s := &frameSource{f: f, buf: slices.Clone(f.frame), verbatim: verbatim}
	s.pos = len(s.buf)
	return s
}

// brokerReadBuffer is the size of the broker's bufio.Reader under its
// frame reader (broker/conn.go readLoop).
const brokerReadBuffer = 16 << 10

// Buffered is what the broker's reader would hold once a frame's size has
// been read from it: the rest of the frame, up to its buffer less the
// size (so frames over 16 KiB are read as the broker reads them, paced).
func (s *frameSource) Buffered() int {
	if s.pos == len(s.buf) {
		return 0
	}
	return min(len(s.buf)-s.pos, brokerReadBuffer-4)
}

func (s *frameSource) Read(p []byte) (int, error) {
	if s.pos == len(s.buf) {
		s.pos = 0
		if s.verbatim {
			kbatch.SetBaseOffset(s.buf[s.f.recordsAt:], s.next)
			s.next += s.f.lod + 1
		}
	}
	n := copy(p, s.buf[s.pos:])
	s.pos += n
	return n, nil
}

// pipeline is the system under test for one partition.
type pipeline struct {
	dir    string
	log    *storage.Log // nil in the no-disk configuration
	part   *Partition
	reader *FrameReader
	src    *frameSource
	opts   Options
	req    ProduceRequest
	resp   ProduceResponse
	out    []byte // the encoded response body, reused
	group  *Group
	app    Append
	dur    bool
}

func newPipeline(tb testing.TB, dir string, f *benchFrame, verbatim bool, flush storage.FlushPolicy, disk bool) *pipeline {
	tb.Helper()
	var log *storage.Log
	var sink Log = &nullLog{}
	if disk {
		var err error
		log, err = storage.Open(storage.OSFS{}, filepath.ToSlash(filepath.Join(dir, "bench-0")), storage.Config{Flush: flush})
		if err != nil {
			tb.Fatal(err)
		}
		sink = log
	}
	fr, err := NewFrameReader(64<<20, budget.New(256<<20), 8<<20)
	if err != nil {
		tb.Fatal(err)
	}
	p := &pipeline{dir: dir, log: log, part: NewPartition(sink, QueueConfig{}), reader: fr,
		src: newFrameSource(f, verbatim), group: NewGroup(), dur: flush == storage.FlushAlways}
	p.opts = Options{Mode: Normal, Topic: DefaultTopicConfig(), ProduceVersion: 11}
	p.opts.Topic.MaxMessageBytes = 0
	if verbatim {
		p.opts.Mode = Verbatim
	}
	p.resp.Topics = make([]ProduceTopicResponse, 1)
	p.resp.Topics[0].Partitions = make([]ProducePartitionResponse, 1)
	return p
}

// request runs one produce request through the whole path.
func (p *pipeline) request(tb testing.TB) {
	frame, err := p.reader.ReadFrame(context.Background(), p.src)
	if err != nil {
		tb.Fatal(err)
	}
	version, _, body := splitRequest(tb, frame.Buf)
	if err := p.req.Decode(body, version); err != nil {
		tb.Fatal(err)
	}
	p.opts.NowMs = time.Now().UnixMilli()
	part := &p.req.Topics[0].Partitions[0]
	var res Result
	if err := Validate(part.Records, &p.opts, &res); err != nil {
		tb.Fatal(err)
	}
	a := &p.app
	a.Set, a.Verbatim, a.LeaderEpoch, a.NowMs, a.Durable = part.Records, p.opts.Mode == Verbatim, 0, p.opts.NowMs, p.dur
	p.group.Add(1)
	if err := p.part.Submit(context.Background(), p.group, a); err != nil {
		tb.Fatal(err)
	}
	p.group.Wait()
	if a.Err != nil {
		tb.Fatal(a.Err)
	}
	p.resp.Version = version
	p.resp.Topics[0].Name = p.req.Topics[0].Name
	pr := NewPartitionResponse(part.Index, 0)
	pr.BaseOffset, pr.LogAppendTimeMs, pr.LogStartOffset = a.Result.FirstOffset, res.LogAppendTimeMs, a.Result.LogStartOffset
	p.resp.Topics[0].Partitions[0] = pr
	p.out = p.resp.AppendTo(p.out[:0])
	_, _ = io.Discard.Write(p.out)
	frame.Release()
}

func (p *pipeline) close(tb testing.TB) {
	p.part.Close()
	if p.log == nil {
		return
	}
	if err := p.log.Close(); err != nil {
		tb.Fatal(err)
	}
	_ = os.RemoveAll(filepath.Join(p.dir, "bench-0"))
}

// nullLog stands in for storage in the no-disk configuration: it assigns
// offsets as a leader append does and keeps nothing.
type nullLog struct{ leo int64 }

func (n *nullLog) AppendLeader(set []byte, epoch int32, nowMs int64) (storage.AppendResult, error) {
	first := n.leo
	for rest := set; len(rest) >= kbatch.HeaderSize; rest = rest[kbatch.LogOverhead+int(kbatch.Length(rest)):] {
		kbatch.SetBaseOffset(rest, n.leo)
		kbatch.SetLeaderEpoch(rest, epoch)
		n.leo += int64(kbatch.LastOffsetDelta(rest)) + 1
	}
	return storage.AppendResult{FirstOffset: first, LastOffset: n.leo - 1}, nil
}

func (n *nullLog) AppendVerbatimAt(set []byte, _ int64) (storage.AppendResult, error) {
	n.leo = lastOffset(set) + 1
	return storage.AppendResult{FirstOffset: kbatch.BaseOffset(set), LastOffset: n.leo - 1}, nil
}

func (n *nullLog) OnDurable(upTo int64, fn func(error)) { fn(nil) }
func (n *nullLog) LogEndOffset() int64                  { return n.leo }

// reference is the floor: receive the frame, CRC the batch, write it.
type reference struct {
	file  *os.File // nil in the no-disk configuration
	pos   int64
	src   *frameSource
	buf   []byte
	f     *benchFrame
	flush bool
	path  string
}

func newReference(tb testing.TB, dir string, f *benchFrame, flush storage.FlushPolicy, disk bool) *reference {
	tb.Helper()
	if !disk {
		return &reference{src: newFrameSource(f, false), buf: make([]byte, len(f.frame)), f: f}
	}
	path := filepath.Join(dir, "reference.log")
	file, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR|os.O_TRUNC, 0o644)
	if err != nil {
		tb.Fatal(err)
	}
	return &reference{file: file, src: newFrameSource(f, false), buf: make([]byte, len(f.frame)), f: f,
		flush: flush == storage.FlushAlways, path: path}
}

func (r *reference) request(tb testing.TB) {
	if _, err := io.ReadFull(r.src, r.buf); err != nil {
		tb.Fatal(err)
	}
	batch := r.buf[r.f.recordsAt : r.f.recordsAt+r.f.batchLen]
	if kbatch.CRC(batch) != kbatch.StoredCRC(batch) {
		tb.Fatal("reference CRC mismatch")
	}
	if r.file == nil {
		return
	}
	if _, err := r.file.WriteAt(batch, r.pos); err != nil {
		tb.Fatal(err)
	}
	r.pos += int64(len(batch))
	if r.flush {
		if err := syscall.Fdatasync(int(r.file.Fd())); err != nil {
			tb.Fatal(err)
		}
	}
}

func (r *reference) close() {
	if r.file == nil {
		return
	}
	_ = r.file.Close()
	_ = os.Remove(r.path)
}

type benchConfig struct {
	size     int
	verbatim bool
	flush    storage.FlushPolicy
	disk     bool // false: no storage at all (hot-path overhead only)
}

func (c benchConfig) flushName() string {
	if !c.disk {
		return "no-disk"
	}
	return c.flush.String()
}

func (c benchConfig) String() string {
	mode := "normal"
	if c.verbatim {
		mode = "verbatim"
	}
	return fmt.Sprintf("mode=%s/flush=%s/batch=%s", mode, c.flushName(), sizeName(c.size))
}

func sizeName(n int) string {
	if n >= 1<<20 {
		return fmt.Sprintf("%dMiB", n>>20)
	}
	return fmt.Sprintf("%dKiB", n>>10)
}

func benchConfigs() []benchConfig {
	var out []benchConfig
	for _, disk := range []bool{true, false} {
		for _, flush := range []storage.FlushPolicy{storage.FlushNever, storage.FlushAlways} {
			if !disk && flush == storage.FlushAlways {
				continue
			}
			for _, verbatim := range []bool{true, false} {
				for _, s := range benchSizes {
					out = append(out, benchConfig{s, verbatim, flush, disk})
				}
			}
		}
	}
	return out
}

func BenchmarkPipeline(b *testing.B) {
	for _, c := range benchConfigs() {
		b.Run(c.String(), func(b *testing.B) {
			f := newBenchFrame(b, c.size)
			p := newPipeline(b, b.TempDir(), f, c.verbatim, c.flush, c.disk)
			defer p.close(b)
			p.request(b) // warm pools
			b.SetBytes(int64(f.batchLen))
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				p.request(b)
			}
		})
	}
}

func BenchmarkReference(b *testing.B) {
	for _, c := range benchConfigs() {
		if !c.verbatim {
			continue // the reference does not depend on the mode
		}
		b.Run(strings.Replace(c.String(), "mode=verbatim/", "", 1), func(b *testing.B) {
			f := newBenchFrame(b, c.size)
			r := newReference(b, b.TempDir(), f, c.flush, c.disk)
			defer r.close()
			b.SetBytes(int64(f.batchLen))
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				r.request(b)
			}
		})
	}
}

// roundResult is one timed round: throughput over wall-clock time and over
// the process's CPU time (user+system, every thread). On a machine shared
// with other work the wall-clock figure mostly measures waiting for a CPU;
// the CPU-time figure measures the work, which is what the path costs.
type roundResult struct {
	mbps         float64 // bytes per wall-clock second
	cpuMBps      float64 // bytes per CPU second of this process
	allocsPerReq float64
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func runRound(n int, bytesPerReq int, req func(), mallocs func() uint64) roundResult {
	runtime.GC()
	m0 := mallocs()
	c0 := cpuTime()
	start := time.Now()
	for i := 0; i < n; i++ {
		req()
	}
	el := time.Since(start)
	cpu := cpuTime() - c0
	m1 := mallocs()
	total := float64(n) * float64(bytesPerReq)
	return roundResult{mbps: total / el.Seconds() / 1e6, cpuMBps: total / max(cpu, time.Microsecond).Seconds() / 1e6,
		allocsPerReq: float64(m1-m0) / float64(n)}
}

func mallocCount() uint64 {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.Mallocs
}

func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[len(s)/2]
}

// BenchmarkHotpathReport alternates reference and pipeline rounds (3 each
// by default, HOTPATH_ROUNDS to change) for every configuration and logs a
// Markdown table of medians. Run it with -benchtime 1x (make bench-hotpath).
func BenchmarkHotpathReport(b *testing.B) {
	rounds := 5
	if v := os.Getenv("HOTPATH_ROUNDS"); v != "" {
		_, _ = fmt.Sscan(v, &rounds)
	}
	roundTime := 600 * time.Millisecond
	for it := 0; it < b.N; it++ {
		// Printed rather than logged (go test truncates benchmark logs),
		// row by row so that a long run shows progress.
		fmt.Printf("hot path vs reference, medians of %d alternating rounds (ratios: median of per-pair ratios), %s/%s, GOMAXPROCS=%d:\n",
			rounds, runtime.GOOS, runtime.GOARCH, runtime.GOMAXPROCS(0))
		out := os.Stdout
		fmt.Fprint(out, "| mode | flush | batch | reference MB/s | hot path MB/s | wall ratio | reference MB/CPU-s | hot path MB/CPU-s | CPU ratio | allocs/request | rounds (requests each) |\n")
		fmt.Fprint(out, "|---|---|---|---:|---:|---:|---:|---:|---:|---:|---|\n")
		for _, c := range benchConfigs() {
			f := newBenchFrame(b, c.size)
			dir := b.TempDir()
			// Calibrate the request count on the reference.
			ref := newReference(b, dir, f, c.flush, c.disk)
			n := 0
			for start := time.Now(); time.Since(start) < roundTime/4; n++ {
				ref.request(b)
			}
			ref.close()
			// At least 50 requests (and 32 MiB without fdatasync) per
			// round, so that one slow calibration on a busy machine cannot
			// shrink every round.
			n = max(50, n*4)
			if !c.disk || c.flush != storage.FlushAlways {
				n = max(n, (32<<20)/f.batchLen)
			}
			var refs, pipes, allocs, ratios, refCPU, pipeCPU, cpuRatios []float64
			for r := 0; r < rounds; r++ {
				ref := newReference(b, dir, f, c.flush, c.disk)
				rr := runRound(n, f.batchLen, func() { ref.request(b) }, mallocCount)
				ref.close()
				p := newPipeline(b, dir, f, c.verbatim, c.flush, c.disk)
				p.request(b) // warm pools and the log
				pr := runRound(n, f.batchLen, func() { p.request(b) }, mallocCount)
				p.close(b)
				refs, pipes, allocs = append(refs, rr.mbps), append(pipes, pr.mbps), append(allocs, pr.allocsPerReq)
				ratios = append(ratios, pr.mbps/rr.mbps)
				refCPU, pipeCPU = append(refCPU, rr.cpuMBps), append(pipeCPU, pr.cpuMBps)
				cpuRatios = append(cpuRatios, pr.cpuMBps/rr.cpuMBps)
			}
			mode := "normal"
			if c.verbatim {
				mode = "verbatim"
			}
			fmt.Fprintf(out, "| %s | %s | %s | %.0f | %.0f | %.2f | %.0f | %.0f | %.2f | %.2f | %d (%d) |\n", mode, c.flushName(), sizeName(c.size),
				median(refs), median(pipes), median(ratios), median(refCPU), median(pipeCPU), median(cpuRatios), median(allocs), rounds, n)
		}
	}
}

// BenchmarkValidate is validation alone on one batch (in cache), against
// CRC-32C alone on the same bytes: the hot path's per-byte cost floor.
func BenchmarkValidate(b *testing.B) {
	for _, size := range benchSizes {
		f := newBenchFrame(b, size)
		batch := f.frame[f.recordsAt : f.recordsAt+f.batchLen]
		b.Run("crc-only/batch="+sizeName(size), func(b *testing.B) {
			b.SetBytes(int64(len(batch)))
			for i := 0; i < b.N; i++ {
				if kbatch.CRC(batch) != kbatch.StoredCRC(batch) {
					b.Fatal("crc")
				}
			}
		})
		for _, mode := range []Mode{Verbatim, Normal} {
			b.Run(mode.String()+"/batch="+sizeName(size), func(b *testing.B) {
				o := &Options{Mode: mode, Topic: DefaultTopicConfig(), ProduceVersion: 11, NowMs: time.Now().UnixMilli()}
				var res Result
				b.SetBytes(int64(len(batch)))
				b.ReportAllocs()
				for i := 0; i < b.N; i++ {
					if err := Validate(batch, o, &res); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

package benchmarks

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/verbatim-kafka/verbatim/hotpath"
	"github.com/verbatim-kafka/verbatim/interop"
	"github.com/verbatim-kafka/verbatim/kbatch"
	"github.com/verbatim-kafka/verbatim/wireext"
)

// The test binary doubles as the reference sink process when the harness
// re-executes it (as bench-ingest re-executes itself).
func TestMain(m *testing.M) {
	if os.Getenv("BENCH_SINK_CHILD") == "1" {
		args := os.Args[1:]
		var listen, dir, cert, key string
		durable := false
		for i := 0; i < len(args); i++ {
			switch {
			case args[i] == "--listen" && i+1 < len(args):
				listen, i = args[i+1], i+1
			case args[i] == "--dir" && i+1 < len(args):
				dir, i = args[i+1], i+1
			case strings.HasPrefix(args[i], "--durable="):
				durable = args[i] == "--durable=true"
			case args[i] == "--tls-cert" && i+1 < len(args):
				cert, i = args[i+1], i+1
			case args[i] == "--tls-key" && i+1 < len(args):
				key, i = args[i+1], i+1
			}
		}
		ln, err := net.Listen("tcp", listen)
		if err != nil {
			os.Exit(1)
		}
		if cert != "" {
			if ln, err = SinkListener(ln, cert, key); err != nil {
				os.Exit(1)
			}
		}
		_ = (&Sink{Dir: dir, Durable: durable}).Serve(ln)
		os.Exit(0)
	}
	os.Exit(m.Run())
}

func TestBuildBatchExactSizeAndValid(t *testing.T) {
	for _, size := range []int{100, 1024, 16 << 10, 256 << 10, 1 << 20, 1000 + 61 + 7} {
		b, n, err := BuildBatch(size, 1000, 7)
		if err != nil {
			t.Fatalf("size %d: %v", size, err)
		}
		if len(b) != size {
			t.Fatalf("size %d: built %d bytes", size, len(b))
		}
		h, err := kbatch.ParseHeader(b)
		if err != nil {
			t.Fatal(err)
		}
		if kbatch.CRC(b) != h.CRC || h.Size() != size || int(h.RecordCount) != n || int(h.LastOffsetDelta) != n-1 {
			t.Fatalf("size %d: bad header %+v (records %d)", size, h, n)
		}
		recs, err := kbatch.Records(b)
		if err != nil || len(recs) != n {
			t.Fatalf("size %d: records %d, %v", size, len(recs), err)
		}
	}
	if _, _, err := BuildBatch(50, 1000, 1); err == nil {
		t.Fatal("a 50-byte batch was built")
	}
}

// Compressed load batches are valid, fit the batch size closely and hold
// text-like records that compress about 4x with gzip and zstd, 2.5x with
// LZ4 (neither zeros nor noise).
func TestBuildCompressedBatch(t *testing.T) {
	for _, c := range []kbatch.Codec{kbatch.CodecGzip, kbatch.CodecLZ4, kbatch.CodecZstd} {
		for _, size := range []int{16 << 10, 256 << 10} {
			b, n, err := BuildCompressedBatch(size, 1000, c, 3)
			if err != nil {
				t.Fatalf("%s %d: %v", c, size, err)
			}
			if len(b) > size || len(b) < size*9/10 {
				t.Fatalf("%s %d: built %d bytes", c, size, len(b))
			}
			h, _ := kbatch.ParseHeader(b)
			if h.Codec() != c || int(h.RecordCount) != n || kbatch.CRC(b) != h.CRC {
				t.Fatalf("%s %d: header %+v, %d records", c, size, h, n)
			}
			raw, err := kbatch.Decompress(c, b[kbatch.HeaderSize:])
			if err != nil {
				t.Fatal(err)
			}
			if r := float64(len(raw)) / float64(len(b)); r < 2.2 || r > 4.5 {
				t.Errorf("%s %d: compresses %.1fx", c, size, r)
			}
			var res hotpath.Result
			o := hotpath.Options{Mode: hotpath.Normal, Topic: hotpath.DefaultTopicConfig(), NowMs: 1_700_000_000_000}
			if err := hotpath.Validate(b, &o, &res); err != nil || res.Records != int64(n) {
				t.Fatalf("%s %d: %v", c, size, err)
			}
		}
	}
}

func startSinkInProcess(t *testing.T, durable bool) (string, *Sink) {
	t.Helper()
	s := &Sink{Dir: t.TempDir(), Durable: durable}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go s.Serve(ln)
	t.Cleanup(func() { ln.Close(); s.Close() })
	return ln.Addr().String(), s
}

// The generator against the in-process sink: every byte sent lands in the
// partition files, in order, and mirror mode chains the base offsets.
func TestLoadAgainstSink(t *testing.T) {
	for _, mirror := range []bool{false, true} {
		addr, s := startSinkInProcess(t, true)
		res, err := RunLoad(context.Background(), Load{Addr: addr, Topic: "t", Mirror: mirror, BatchBytes: 4096,
			Conns: 2, InFlight: 4, TotalBytes: 64 << 10, StartOffsets: []int64{0, 100}})
		if err != nil {
			t.Fatal(err)
		}
		if res.Requests != 16 || res.Bytes != 16*4096 || len(res.Latencies) != 16 || res.MBps() <= 0 {
			t.Fatalf("mirror=%v: %+v", mirror, res)
		}
		s.Close()
		for part, first := range []int64{0, 100} {
			data, err := os.ReadFile(filepath.Join(s.Dir, "t-"+string(rune('0'+part))+".log"))
			if err != nil {
				t.Fatal(err)
			}
			if len(data) != 8*4096 {
				t.Fatalf("partition %d holds %d bytes", part, len(data))
			}
			next := first
			for len(data) > 0 {
				b, rest, err := kbatch.Next(data)
				if err != nil {
					t.Fatal(err)
				}
				h, _ := kbatch.ParseHeader(b)
				want := int64(0)
				if mirror {
					want = next
				}
				if h.BaseOffset != want || kbatch.CRC(b) != h.CRC {
					t.Fatalf("mirror=%v partition %d: base offset %d want %d", mirror, part, h.BaseOffset, want)
				}
				next += int64(h.LastOffsetDelta) + 1
				data = rest
			}
			if mirror && res.EndOffsets[part] != next {
				t.Fatalf("end offset %d, want %d", res.EndOffsets[part], next)
			}
		}
	}
}

func TestMirrorTemplateCarriesTags(t *testing.T) {
	tm, err := buildTemplate(Load{Topic: "m", Mirror: true, BatchBytes: 512}, 3, 1)
	if err != nil {
		t.Fatal(err)
	}
	binary.BigEndian.PutUint64(tm.frame[tm.expectAt:], 42)
	body := tm.frame[4:]
	req := kmsg.NewPtrProduceRequest()
	req.Version = ProduceVersion
	// header: key, version, correlation, client id, empty tags
	cl := int(binary.BigEndian.Uint16(body[8:]))
	if err := req.ReadFrom(body[8+2+cl+1:]); err != nil {
		t.Fatal(err)
	}
	tag := func(tags kmsg.Tags) (v []byte, ok bool) {
		tags.Each(func(k uint32, val []byte) {
			if k == wireext.MirrorTag {
				v, ok = val, true
			}
		})
		return v, ok
	}
	if _, ok := tag(req.UnknownTags); !ok {
		t.Fatal("request-level mirror tag missing")
	}
	rp := req.Topics[0].Partitions[0]
	v, ok := tag(rp.UnknownTags)
	if !ok || rp.Partition != 3 || len(v) != 15 || int64(binary.BigEndian.Uint64(v[2:])) != 42 || int32(binary.BigEndian.Uint32(v[10:])) != -1 {
		t.Fatalf("partition tag %x (partition %d)", v, rp.Partition)
	}
}

func TestSinkRefusesBadCRC(t *testing.T) {
	addr, _ := startSinkInProcess(t, false)
	tm, err := buildTemplate(Load{Topic: "t", BatchBytes: 2048}, 0, 1)
	if err != nil {
		t.Fatal(err)
	}
	tm.frame[len(tm.frame)-10] ^= 0xff // a record byte: the CRC no longer matches
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Write(tm.frame); err != nil {
		t.Fatal(err)
	}
	var hdr [4]byte
	c.SetDeadline(time.Now().Add(30 * time.Second))
	if _, err := io.ReadFull(c, hdr[:]); err != nil {
		t.Fatal(err)
	}
	body := make([]byte, binary.BigEndian.Uint32(hdr[:]))
	if _, err := io.ReadFull(c, body); err != nil {
		t.Fatal(err)
	}
	err = checkProduceResponse(body)
	if !errors.Is(err, errAnswer) || !strings.Contains(err.Error(), "CORRUPT_MESSAGE") {
		t.Fatalf("bad CRC answered %v", err)
	}
}

// produceResponse is the frame body of a Produce response (without the
// length) answering one partition of topic with code and msg.
func produceResponse(correlationID uint32, topic string, code int16, msg *string) []byte {
	r := kmsg.NewPtrProduceResponse()
	r.Version = ProduceVersion
	rt := kmsg.NewProduceResponseTopic()
	rt.Topic = topic
	rp := kmsg.NewProduceResponseTopicPartition()
	rp.ErrorCode = code
	rp.ErrorMessage = msg
	rt.Partitions = append(rt.Partitions, rp)
	r.Topics = append(r.Topics, rt)
	out := binary.BigEndian.AppendUint32(nil, correlationID)
	out = append(out, 0) // the response header's empty tag section
	return r.AppendTo(out)
}

func TestCheckProduceResponse(t *testing.T) {
	msg := "the message"
	enc := func(code int16) []byte { return produceResponse(9, "topic", code, &msg) }
	if err := checkProduceResponse(enc(0)); err != nil {
		t.Fatal(err)
	}
	err := checkProduceResponse(enc(kerr.OffsetOutOfRange.Code))
	if !errors.Is(err, errAnswer) || !strings.Contains(err.Error(), "OFFSET_OUT_OF_RANGE") || !strings.Contains(err.Error(), "the message") {
		t.Fatalf("got %v", err)
	}
	// The check reads up to the first partition's error code (byte 19 of
	// this response) and nothing after it; anything cut before is refused.
	full := enc(0)
	for i := 4; i < 19; i++ {
		if err := checkProduceResponse(full[:i]); err == nil {
			t.Fatalf("truncated response of %d bytes accepted", i)
		}
	}
}

// The harness end to end at tiny sizes (make test): verbatim serve and the
// sink as child processes, both modes, durable; the output must be well
// formed. No timing is asserted.
func TestIngestHarnessWellFormed(t *testing.T) {
	bin := interop.BuildVerbatim(t)
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("BENCH_SINK_CHILD", "1") // makes the re-executed test binary the sink
	o := IngestOptions{Verbatim: bin, SinkArgv: []string{self}, WorkDir: t.TempDir(),
		Modes: []string{"verbatim", "normal"}, Codecs: []string{"none", "zstd"}, Batches: []int{16 << 10}, Flushes: []string{"always"},
		Rounds: 1, Conns: 2, InFlight: 2, RoundBytes: 1 << 20, AllocBytes: 512 << 10,
		ComparePolicies: true}
	var lines bytes.Buffer
	err = RunIngest(context.Background(), o, func(r IngestResult) error { return WriteJSONLine(&lines, r) })
	if err != nil {
		t.Fatal(err)
	}
	got := strings.Split(strings.TrimSpace(lines.String()), "\n")
	// verbatim, normal, normal with zstd batches (compressed scenarios
	// are normal-mode only).
	if len(got) != 3 {
		t.Fatalf("%d lines:\n%s", len(got), lines.String())
	}
	for _, l := range got {
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatal(err)
		}
		for _, k := range []string{"scenario", "mode", "codec", "batch_bytes", "flush", "mb_per_s", "ref_mb_per_s", "ratio", "p50_ms", "p99_ms", "ref_p99_ms", "allocs_per_req", "peak_rss_mb"} {
			if _, ok := m[k]; !ok {
				t.Fatalf("line lacks %q: %s", k, l)
			}
		}
		var r IngestResult
		_ = json.Unmarshal([]byte(l), &r)
		if r.MBps <= 0 || r.RefMBps <= 0 || r.PeakRSSMB <= 0 || r.RefPeakRSSMB <= 0 || r.AllocsPerReq <= 0 || r.P99ms < r.P50ms {
			t.Fatalf("implausible line: %s", l)
		}
		if want := r.MBps / r.RefMBps; r.Ratio < want*0.95-0.01 || r.Ratio > want*1.05+0.01 {
			t.Fatalf("ratio %v is not mb_per_s/ref_mb_per_s (%v): %s", r.Ratio, want, l)
		}
		if (r.Flush == "always") != (r.MeetsP99 != nil) || (r.MeetsRatio == nil) != (r.Codec != "none") {
			t.Fatalf("targets not evaluated (compressed rows are informative): %s", l)
		}
		if r.Codec == "zstd" && (r.Mode != "normal" || r.Scenario != "ingest-normal-zstd-16KiB-always") {
			t.Fatalf("compressed scenario: %s", l)
		}
		// Verbatim mode judges with the default policies and, compared,
		// reports the on/off ratio; normal mode has no policies.
		if r.Mode == "verbatim" {
			if r.Policies != "default" || r.PoliciesOffMBps <= 0 || r.PoliciesRatio <= 0 || r.PoliciesRatioMin > r.PoliciesRatioMax {
				t.Fatalf("policies comparison missing: %s", l)
			}
		} else if r.Policies != "none" || r.PoliciesRatio != 0 {
			t.Fatalf("normal mode with a policies comparison: %s", l)
		}
	}
}

func TestReportValidate(t *testing.T) {
	r := &Report{Date: "d", Commit: "c", Machine: DescribeMachine(t.TempDir())}
	if err := r.Validate(); err == nil {
		t.Fatal("an empty report validated")
	}
	rounds := Rounds{}
	rounds.Add(map[string]float64{"mb_per_s": 3})
	rounds.Add(map[string]float64{"mb_per_s": 1})
	rounds.Add(map[string]float64{"mb_per_s": 2})
	e := rounds.Entry("s", "verbatim", "p")
	if s := e.Metrics["mb_per_s"]; s.Median != 2 || s.Min != 1 || s.Max != 3 || s.N != 3 {
		t.Fatalf("stat %+v", s)
	}
	r.Scenarios = append(r.Scenarios, e)
	if err := r.Validate(); err != nil {
		t.Fatal(err)
	}
	r.Scenarios[0].Metrics["x"] = Stat{Median: 5, Min: 6, Max: 7, N: 1}
	if err := r.Validate(); err == nil {
		t.Fatal("a median below the minimum validated")
	}
	if r.Machine.CPUs <= 0 || r.Machine.Kernel == "" || r.Machine.Disk == "" {
		t.Fatalf("machine %+v", r.Machine)
	}
}

func TestParsers(t *testing.T) {
	pp := "1000 records sent, 500.1 records/sec (0.49 MB/sec), 10.5 ms avg latency, 99.0 ms max latency.\n" +
		"50000 records sent, 12345.6 records/sec (12.06 MB/sec), 20.5 ms avg latency, 300.0 ms max latency, 15 ms 50th, 40 ms 95th, 120 ms 99th, 250 ms 99.9th.\n"
	m, err := parseProducerPerf(pp)
	if err != nil || m["records_per_s"] != 12345.6 || m["p99_ms"] != 120 || m["p999_ms"] != 250 || m["p50_ms"] != 15 {
		t.Fatalf("%v %v", m, err)
	}
	if _, err := parseProducerPerf("nothing"); err == nil {
		t.Fatal("no summary accepted")
	}
	cp := "start.time, end.time, data.consumed.in.MB, MB.sec, data.consumed.in.nMsg, nMsg.sec, rebalance.time.ms, fetch.time.ms, fetch.MB.sec, fetch.nMsg.sec\n" +
		"2026-11-29 08:00:00:000, 2026-11-29 08:00:10:000, 97.6562, 9.7656, 100000, 10000.0, 3000, 7000, 13.9509, 14285.7\n"
	m, err = parseConsumerPerf(cp, 100000)
	if err != nil || m["records_per_s"] != 10000 || m["rebalance_ms"] != 3000 || m["fetch_mb_per_s"] != 13.9509*(1<<20)/1e6 {
		t.Fatalf("%v %v", m, err)
	}
	if _, err := parseConsumerPerf(cp, 5); err == nil {
		t.Fatal("a short consume accepted")
	}
	e2e := "0\t12.5\nAvg latency: 3.2500 ms\nPercentiles: 50th = 3, 99th = 9, 99.9th = 20\n"
	m, err = parseE2E(e2e)
	if err != nil || m["avg_ms"] != 3.25 || m["p99_ms"] != 9 {
		t.Fatalf("%v %v", m, err)
	}
}

// TestIngestHarnessSSL: the ssl and sasl_ssl rows run Verbatim on an SSL
// or SASL_SSL listener (serve --config with a PEM keystore made at run
// time, SASL PLAIN per connection) against the sink speaking TLS; checked
// for well-formedness only.
func TestIngestHarnessSSL(t *testing.T) {
	bin := interop.BuildVerbatim(t)
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("BENCH_SINK_CHILD", "1")
	o := IngestOptions{Verbatim: bin, SinkArgv: []string{self}, WorkDir: t.TempDir(),
		Modes: []string{"verbatim", "normal"}, Codecs: []string{"none"}, Batches: []int{256 << 10}, Flushes: []string{"never"},
		Rounds: 1, Conns: 2, InFlight: 2, RoundBytes: 2 << 20, Security: []string{"ssl", "sasl_ssl"}}
	var lines bytes.Buffer
	if err := RunIngest(context.Background(), o, func(r IngestResult) error { return WriteJSONLine(&lines, r) }); err != nil {
		t.Fatal(err)
	}
	got := strings.Split(strings.TrimSpace(lines.String()), "\n")
	if len(got) != 4 {
		t.Fatalf("%d lines:\n%s", len(got), lines.String())
	}
	for i, l := range got {
		var r IngestResult
		if err := json.Unmarshal([]byte(l), &r); err != nil {
			t.Fatal(err)
		}
		sec := []string{"ssl", "ssl", "sasl_ssl", "sasl_ssl"}[i]
		suffix := "-256KiB-never-" + strings.ReplaceAll(sec, "_", "-")
		if r.Security != sec || !strings.HasSuffix(r.Scenario, suffix) || r.MBps <= 0 || r.RefMBps <= 0 || r.AllocsSource != "not measured" {
			t.Fatalf("%s row: %s", sec, l)
		}
	}
}

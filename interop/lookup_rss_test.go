package interop

import (
	"context"
	"encoding/binary"
	"fmt"
	"math/rand"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/verbatim-kafka/verbatim/benchmarks"
	"github.com/verbatim-kafka/verbatim/client"
	"github.com/verbatim-kafka/verbatim/kbatch"
	"github.com/verbatim-kafka/verbatim/wireext"
)

// The memory acceptance of hole 3 (timestamp lookups inflated whole
// batches): a real `verbatim serve` with an explicit --memory-limit holds a
// partition of ~1 MiB gzip batches of highly compressible records (each
// inflating to about 24 MiB, written by a mirror produce: mirror writers
// are trusted and their batches stored untouched), and 1,000 concurrent
// timestamp lookups over 32 connections each look into one of them. The
// broker's peak RSS (VmHWM) must stay below the limit: lookups stream the
// batch and wait for --max-decode-bytes instead of each inflating it.
func TestTimestampLookupsStayUnderMemoryLimit(t *testing.T) {
	const (
		memoryLimit = 160 << 20
		decodeBytes = 16 << 20
		batches     = 16
		lookups     = 1000
		conns       = 32
		ts0         = int64(1_700_000_000_000)
	)
	bin := BuildVerbatim(t)
	v := StartVerbatim(t, bin, VerbatimOptions{Args: []string{
		"--memory-limit", strconv.Itoa(memoryLimit), "--max-decode-bytes", strconv.Itoa(decodeBytes),
	}})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(v.Addr))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ct, err := kadm.NewClient(cl).CreateTopic(ctx, 1, 1, map[string]*string{"mirror.mode": kadm.StringPtr("push")}, "lookups")
	if err == nil {
		err = ct.Err
	}
	if err != nil {
		t.Fatal(err)
	}

	// One records section, compressed once and shared by every batch:
	// a small first record (the one each lookup wants), then 24 MiB of
	// repetitive text.
	payload := compressibleRecords(t, 24<<20)
	body, err := kbatch.Compress(kbatch.CodecGzip, payload.records)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("each batch: %d records, %d bytes inflating to %d (ratio %.0f)", payload.count, len(body)+kbatch.HeaderSize, len(payload.records), float64(len(payload.records))/float64(len(body)))
	epoch, err := benchmarks.RegisterMirrorWriter(ctx, v.Addr, client.Options{}, "lookups", [16]byte{1}, []int32{0})
	if err != nil {
		t.Fatal(err)
	}
	next := int64(0)
	for i := range batches {
		b := rawBatch(next, ts0+int64(i)*1000, payload, body)
		req := mirrorProduceReq("lookups", ct.ID, epoch, b, next)
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			t.Fatal(err)
		}
		if code := resp.Topics[0].Partitions[0].ErrorCode; code != 0 {
			t.Fatalf("mirror produce of batch %d: code %d", i, code)
		}
		next += int64(payload.count)
	}
	base, err := ReadProcHWM(v.Proc.PID())
	if err != nil {
		t.Fatal(err)
	}

	// 1,000 lookups, each for the first record of a batch, pipelined over
	// 32 connections (franz-go's per-broker connection pool is one, so
	// each worker has a client of its own).
	var wg sync.WaitGroup
	errs := make(chan error, conns)
	start := time.Now()
	for w := range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, err := kgo.NewClient(kgo.SeedBrokers(v.Addr))
			if err != nil {
				errs <- err
				return
			}
			defer c.Close()
			var inner sync.WaitGroup
			for i := w; i < lookups; i += conns {
				inner.Add(1)
				go func() {
					defer inner.Done()
					batch := i % batches
					req := kmsg.NewPtrListOffsetsRequest()
					req.Version, req.ReplicaID = 7, -1
					rt := kmsg.NewListOffsetsRequestTopic()
					rt.Topic = "lookups"
					rp := kmsg.NewListOffsetsRequestTopicPartition()
					rp.Partition, rp.Timestamp = 0, ts0+int64(batch)*1000
					rt.Partitions = append(rt.Partitions, rp)
					req.Topics = append(req.Topics, rt)
					resp, err := req.RequestWith(ctx, c)
					if err != nil {
						errs <- err
						return
					}
					p := resp.Topics[0].Partitions[0]
					if want := int64(batch * payload.count); p.ErrorCode != 0 || p.Offset != want {
						errs <- fmt.Errorf("lookup %d: code %d offset %d, want offset %d", i, p.ErrorCode, p.Offset, want)
					}
				}()
			}
			inner.Wait()
		}()
	}
	wg.Wait()
	took := time.Since(start)
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	peak, err := ReadProcHWM(v.Proc.PID())
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d lookups over %d connections in %v: broker VmHWM %.1f MiB before, %.1f MiB after; --memory-limit %d MiB, --max-decode-bytes %d MiB; uncapped, each lookup would hold %.1f MiB",
		lookups, conns, took.Round(time.Millisecond), float64(base)/(1<<20), float64(peak)/(1<<20), memoryLimit>>20, decodeBytes>>20,
		float64(len(body)+len(payload.records))/(1<<20))
	if peak >= memoryLimit {
		t.Fatalf("broker peak RSS %.1f MiB reached its --memory-limit of %d MiB", float64(peak)/(1<<20), memoryLimit>>20)
	}
}

// records is an encoded records section and its record count.
type records struct {
	records []byte
	count   int
}

// compressibleRecords encodes a small first record and then records of
// repetitive text until the section holds about n bytes.
func compressibleRecords(t *testing.T, n int) records {
	t.Helper()
	rng := rand.New(rand.NewSource(1))
	const line = "level=info msg=\"request served\" api=Fetch topic=orders partition=3 bytes=1048576 took_us="
	var out records
	out.records = kbatch.AppendRecord(out.records, &kbatch.Record{Key: []byte("first"), Value: []byte("the record lookups find")})
	out.count = 1
	var sb strings.Builder
	for len(out.records) < n {
		sb.Reset()
		for sb.Len() < 256<<10 { // log lines: a template and a random number
			sb.WriteString(line)
			sb.WriteString(strconv.Itoa(rng.Intn(100000)))
			sb.WriteByte('\n')
		}
		r := kbatch.Record{OffsetDelta: int32(out.count), TimestampDelta: int64(out.count), Value: []byte(sb.String())}
		out.records = kbatch.AppendRecord(out.records, &r)
		out.count++
	}
	return out
}

// rawBatch is a gzip batch at base with the given base timestamp over the
// compressed records body (shared by every batch: the header differs).
func rawBatch(base, ts int64, recs records, body []byte) []byte {
	b := kbatch.NewBatch(ts)
	b.BaseOffset, b.LeaderEpoch, b.Attributes = base, 0, int16(kbatch.CodecGzip)
	b.LastOffsetDelta, b.MaxTimestamp = int32(recs.count-1), ts+int64(recs.count-1)
	hdr, err := kbatch.Encode(b) // no records: the header alone
	if err != nil {
		panic(err)
	}
	out := append(hdr[:kbatch.HeaderSize:kbatch.HeaderSize], body...)
	binary.BigEndian.PutUint32(out[kbatch.LengthOffset:], uint32(len(out)-kbatch.LogOverhead))
	binary.BigEndian.PutUint32(out[kbatch.RecordCountOffset:], uint32(recs.count))
	kbatch.SetCRC(out)
	return out
}

// mirrorProduceReq is a mirror produce (docs/protocol.md) of set to
// partition 0 of topic (named and by id: franz-go sends the highest
// version both sides support) by the writer registered with epoch
// (RegisterMirrorWriter, id {1}), expecting the log to end at expected.
func mirrorProduceReq(topic string, id [16]byte, epoch int32, set []byte, expected int64) *kmsg.ProduceRequest {
	req := kmsg.NewPtrProduceRequest()
	req.Version, req.Acks, req.TimeoutMillis = 11, -1, 30000
	req.UnknownTags.Set(wireext.MirrorTag, (&wireext.MirrorProduce{WriterEpoch: epoch, WriterID: [16]byte{1}}).AppendTo(nil))
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic, rt.TopicID = topic, id
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Partition, rp.Records = 0, set
	pv := wireext.MirrorPartition{ExpectedLogEndOffset: expected, CurrentLeaderEpoch: -1}
	rp.UnknownTags.Set(wireext.MirrorTag, pv.AppendTo(nil))
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	return req
}

// ReadProcHWM returns the peak resident set (VmHWM) of process pid in bytes.
func ReadProcHWM(pid int) (int64, error) {
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for line := range strings.SplitSeq(string(status), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			f := strings.Fields(rest)
			if len(f) >= 1 {
				kb, err := strconv.ParseInt(f[0], 10, 64)
				return kb << 10, err
			}
		}
	}
	return 0, fmt.Errorf("no VmHWM in /proc/%d/status", pid)
}

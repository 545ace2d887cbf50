//go:build !race

package hotpath

import (
	"bytes"
	"context"
	"testing"

	"github.com/verbatim-kafka/verbatim/budget"
	"github.com/verbatim-kafka/verbatim/kbatch"
	"github.com/verbatim-kafka/verbatim/kbatch/kbatchtest"
	"github.com/verbatim-kafka/verbatim/storage"
)

// Validation allocates nothing per batch or per record byte, in both modes,
// including the LogAppendTime patch and the walk of a compressed batch
// (pooled decoders, charged to a decode budget); only rejections allocate.
func TestAllocValidate(t *testing.T) {
	corpus := buildCorpus(t)
	set := verbatimSet(corpus, 0)
	client := kbatchtest.Encode(t, kbatch.NewBatch(corpusNowMs, testRecords(200, 100, true)...))
	gz := kbatch.NewBatch(corpusNowMs, testRecords(50, 100, true)...)
	gz.Attributes = int16(kbatch.CodecGzip)
	clientGzip := kbatchtest.Encode(t, gz)
	lat := normalOpts()
	lat.Topic.LogAppendTime = true
	charged := normalOpts()
	charged.Decode = budget.New(64 << 20)
	cases := []struct {
		name string
		set  []byte
		o    *Options
	}{
		{"verbatim-corpus-set", set, verbatimOpts()},
		{"normal-uncompressed-200-records", client, normalOpts()},
		{"normal-gzip-walked", clientGzip, normalOpts()},
		{"normal-gzip-walked-charged", clientGzip, charged},
		{"normal-log-append-time", client, lat},
	}
	for _, c := range cases {
		var res Result
		buf := make([]byte, len(c.set))
		allocs := testing.AllocsPerRun(100, func() {
			copy(buf, c.set) // normal mode patches in place
			if err := Validate(buf, c.o, &res); err != nil {
				t.Fatal(err)
			}
		})
		if allocs != 0 {
			t.Errorf("%s: %.1f allocations per call, want 0", c.name, allocs)
		}
	}
}

// Decoding a Produce request into a reused struct allocates nothing,
// whatever the number and size of its record sets; encoding the response
// into a reused buffer allocates nothing either. Mirror produces (v9+, with
// the request- and partition-level mirror fields) are decoded in the same
// pass without allocating.
func TestAllocProduceDecodeAndResponse(t *testing.T) {
	var req ProduceRequest
	var resp ProduceResponse
	buf := make([]byte, 0, 64<<10)
	for _, shape := range []struct{ topics, parts, size int }{{1, 1, 1 << 20}, {4, 50, 16 << 10}, {20, 20, 100}} {
		for _, v := range []int16{3, 8, 9, 11, 13, -11, -13} {
			mirror := v < 0
			v = max(v, -v)
			kreq := kmsgProduce(v, shape.topics, shape.parts, shape.size, false)
			if mirror {
				kreq = withMirrorTags(kreq)
			}
			body := kreq.AppendTo(nil)
			run := func() {
				if err := req.Decode(body, v); err != nil || req.HasMirror != mirror {
					t.Fatal(err, req.HasMirror)
				}
				resp.Version = v
				resp.Topics = resp.Topics[:0]
				for _, tp := range req.Topics {
					var parts []ProducePartitionResponse
					if n := len(resp.Topics); n < cap(resp.Topics) {
						parts = resp.Topics[:n+1][n].Partitions[:0]
					}
					for _, p := range tp.Partitions {
						parts = append(parts, NewPartitionResponse(p.Index, 0))
					}
					resp.Topics = append(resp.Topics, ProduceTopicResponse{Name: tp.Name, ID: tp.ID, Partitions: parts})
				}
				buf = resp.AppendTo(buf[:0])
			}
			run() // grow the reusable structures
			if allocs := testing.AllocsPerRun(50, run); allocs != 0 {
				t.Errorf("v%d %+v (mirror %v): %.1f allocations per request, want 0", v, shape, mirror, allocs)
			}
		}
	}
}

// Reading and releasing a frame allocates nothing in steady state.
func TestAllocReadFrame(t *testing.T) {
	broker := budget.New(64 << 20)
	fr, err := NewFrameReader(16<<20, broker, 8<<20)
	if err != nil {
		t.Fatal(err)
	}
	data := frameBytes(make([]byte, 1<<20))
	r := bytes.NewReader(data)
	run := func() {
		r.Reset(data)
		f, err := fr.ReadFrame(context.Background(), r)
		if err != nil {
			t.Fatal(err)
		}
		f.Release()
	}
	run()
	if allocs := testing.AllocsPerRun(100, run); allocs != 0 {
		t.Fatalf("%.1f allocations per frame, want 0", allocs)
	}
}

// A submitted append costs no allocation in steady state, through the queue
// and storage, with or without waiting for the group commit.
func TestAllocSubmit(t *testing.T) {
	for _, flush := range []storage.FlushPolicy{storage.FlushNever, storage.FlushAlways} {
		log := openTestLog(t, flush)
		p := NewPartition(log, QueueConfig{})
		g := NewGroup()
		a := &Append{NowMs: corpusNowMs, Durable: flush == storage.FlushAlways}
		batch := clientBatch(t, 10, 100)
		buf := make([]byte, len(batch))
		run := func() {
			copy(buf, batch)
			a.Set = buf
			g.Add(1)
			if err := p.Submit(context.Background(), g, a); err != nil {
				t.Fatal(err)
			}
			g.Wait()
			if a.Err != nil {
				t.Fatal(a.Err)
			}
		}
		for i := 0; i < 100; i++ {
			run() // grow queues, storage buffers and indexes
		}
		if allocs := testing.AllocsPerRun(200, run); allocs > 0 {
			t.Errorf("flush %s: %.2f allocations per append, want 0", flush, allocs)
		}
		p.Close()
	}
}

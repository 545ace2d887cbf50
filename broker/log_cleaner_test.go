package broker

import (
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestLogCleanerBoundsOffsetsTopic: 100,000 offset commits (1,000
// requests of 100 partitions, one group) on a __consumer_offsets with
// 1 MiB segments leave its partition under a bound set by the live
// offsets (100 keys): at most the active segment plus a small cleaned
// one, where uncleaned it would be several MiB. After a restart the group
// coordinator replays the cleaned log and answers the last offsets.
func TestLogCleanerBoundsOffsetsTopic(t *testing.T) {
	dir := t.TempDir()
	mod := func(c *Config) {
		c.OffsetsTopicSegmentBytes = 1 << 20
		c.cleanerBackoff = 20 * time.Millisecond
	}
	b := startBroker(t, dir, mod)
	const parts, rounds = 100, 1000
	createTopic(t, b, "t", parts, nil)
	commit := func(round int) {
		req := kmsg.NewPtrOffsetCommitRequest()
		req.Version, req.Group, req.Generation = 8, "g", -1
		rt := kmsg.NewOffsetCommitRequestTopic()
		rt.Topic = "t"
		for p := int32(0); p < parts; p++ {
			rp := kmsg.NewOffsetCommitRequestTopicPartition()
			rp.Partition, rp.Offset = p, int64(round)
			rt.Partitions = append(rt.Partitions, rp)
		}
		req.Topics = append(req.Topics, rt)
		resp := rawRequest[*kmsg.OffsetCommitResponse](t, b, req)
		for _, p := range resp.Topics[0].Partitions {
			if p.ErrorCode != 0 {
				t.Fatalf("round %d partition %d: code %d", round, p.Partition, p.ErrorCode)
			}
		}
	}
	for r := 0; r < rounds; r++ {
		commit(r)
	}
	_, l, err := b.srv.internalLog(offsetsTopic, b.srv.groups.PartitionFor("g"))
	if err != nil {
		t.Fatal(err)
	}
	const bound = 1<<20 + 64<<10 // the active segment and the live offsets
	deadline := time.Now().Add(60 * time.Second)
	for l.Size() > bound {
		if time.Now().After(deadline) {
			t.Fatalf("__consumer_offsets partition still %d bytes in %d segments (cleans %d)", l.Size(), l.NumSegments(), b.srv.cleaner.cleaned.Load())
		}
		l.Flush() // the recovery point passes the rolled segments (the flusher would, in its time)
		time.Sleep(20 * time.Millisecond)
	}
	if b.srv.cleaner.cleaned.Load() == 0 || b.srv.cleaner.uncleanable.Load() != 0 {
		t.Fatalf("cleans %d, uncleanable %d", b.srv.cleaner.cleaned.Load(), b.srv.cleaner.uncleanable.Load())
	}
	t.Logf("__consumer_offsets partition: %d bytes in %d segments after %d commits", l.Size(), l.NumSegments(), parts*rounds)
	b.stop()
	b = startBroker(t, dir, mod)
	req := kmsg.NewPtrOffsetFetchRequest()
	req.Version, req.Group = 5, "g"
	rt := kmsg.NewOffsetFetchRequestTopic()
	rt.Topic = "t"
	for p := int32(0); p < parts; p++ {
		rt.Partitions = append(rt.Partitions, p)
	}
	req.Topics = append(req.Topics, rt)
	resp := rawRequest[*kmsg.OffsetFetchResponse](t, b, req)
	for _, p := range resp.Topics[0].Partitions {
		if p.ErrorCode != 0 || p.Offset != rounds-1 {
			t.Fatalf("after restart partition %d: offset %d code %d, want %d", p.Partition, p.Offset, p.ErrorCode, rounds-1)
		}
	}
}

// TestLogCleanerCompactedTopicReadable: a compacted topic with 1 MiB
// segments, keys rewritten many times and tombstones, is cleaned by the
// broker's cleaner and franz-go then reads exactly the latest value of
// every key still alive (gaps, re-encoded batches and delete horizons
// included).
func TestLogCleanerCompactedTopicReadable(t *testing.T) {
	b := startBroker(t, t.TempDir(), func(c *Config) { c.cleanerBackoff = 20 * time.Millisecond })
	// segment.bytes at its minimum (1 MiB) keeps the active segment,
	// never cleaned, under a quarter of what is written.
	policy, seg := "compact", "1048576"
	createTopic(t, b, "c", 1, map[string]*string{"cleanup.policy": &policy, "segment.bytes": &seg})
	cl := b.client(kgo.DefaultProduceTopic("c"), kgo.ProducerLinger(0), kgo.ProducerBatchCompression(kgo.NoCompression()))
	want := map[string]string{}
	val := strings.Repeat("v", 200)
	// produced counts the record bytes acknowledged. The cleaner runs
	// while the records arrive (its backoff is 20 ms), so the log's size
	// after the flush is no baseline: it may already be cleaned.
	var produced atomic.Int64
	var failed atomic.Value
	for i := 0; i < 20000; i++ {
		k := fmt.Sprintf("k%d", i%300)
		r := &kgo.Record{Key: []byte(k), Value: []byte(fmt.Sprintf("%s%d", val, i))}
		if i%300 < 30 && i > 19000 {
			r.Value = nil // tombstones for 30 keys
			delete(want, k)
		} else {
			want[k] = string(r.Value)
		}
		cl.Produce(ctxT(t), r, func(r *kgo.Record, err error) {
			if err != nil {
				failed.CompareAndSwap(nil, err)
				return
			}
			produced.Add(int64(len(r.Key) + len(r.Value)))
		})
	}
	if err := cl.Flush(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	if err, _ := failed.Load().(error); err != nil {
		t.Fatalf("produce: %v", err)
	}
	l, err := partitionLog(b.srv.cluster.topic("c").Partition(0))
	if err != nil {
		t.Fatal(err)
	}
	// 300 live keys of ~205 bytes are ~62 KB, the active segment at most
	// 1 MiB, 20,000 records ~4.1 MB: half of that is reached only by
	// cleaning.
	before := produced.Load()
	deadline := time.Now().Add(90 * time.Second)
	for b.srv.cleaner.cleaned.Load() == 0 || l.Size() > before/2 {
		if time.Now().After(deadline) {
			t.Fatalf("not cleaned: %d bytes for %d record bytes produced", l.Size(), before)
		}
		l.Flush()
		time.Sleep(20 * time.Millisecond)
	}
	consumer := b.client(kgo.ConsumeTopics("c"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	got := map[string]string{}
	end := l.LogEndOffset()
	for seen := int64(-1); seen < end-1; {
		fs := consumer.PollFetches(ctxT(t))
		if err := fs.Err(); err != nil {
			t.Fatal(err)
		}
		fs.EachRecord(func(r *kgo.Record) {
			seen = r.Offset
			if r.Value == nil {
				delete(got, string(r.Key))
			} else {
				got[string(r.Key)] = string(r.Value)
			}
		})
	}
	if len(got) != len(want) {
		t.Fatalf("%d keys read, want %d", len(got), len(want))
	}
	for k, v := range want {
		if got[k] != v {
			t.Fatalf("key %s: %.20q..., want %.20q...", k, got[k], v)
		}
	}
	t.Logf("compacted topic: %d record bytes produced, %d bytes stored after cleaning", before, l.Size())
}

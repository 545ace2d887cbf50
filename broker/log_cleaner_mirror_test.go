package broker

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/verbatim-kafka/verbatim/kbatch"
	"github.com/verbatim-kafka/verbatim/kbatch/kbatchtest"
)

// mirrorKVBatch is a source batch of n keyed records (key i%keys, every
// tenth round a tombstone for key 0) at base with leader epoch epoch.
func mirrorKVBatch(t *testing.T, base int64, epoch int32, n, keys int) []byte {
	t.Helper()
	val := strings.Repeat("v", 200)
	recs := make([]kbatch.Record, n)
	for i := range recs {
		off := base + int64(i)
		recs[i] = kbatch.Record{OffsetDelta: int32(i), TimestampDelta: int64(i),
			Key: []byte(fmt.Sprintf("k%d", off%int64(keys))), Value: []byte(fmt.Sprintf("%s%d", val, off))}
		if off%int64(keys) == 0 && (off/int64(keys))%10 == 9 {
			recs[i].Value = nil
		}
	}
	bt := kbatch.NewBatch(1_700_000_000_000+base, recs...)
	bt.BaseOffset, bt.LeaderEpoch = base, epoch
	return kbatchtest.Encode(t, bt)
}

// applyLatest applies a batch's records to a latest-value-per-key map, as
// a consumer of a compacted topic does (a tombstone deletes).
func applyLatest(t *testing.T, m map[string]string, bt []byte) {
	t.Helper()
	recs, err := kbatch.Records(bt)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range recs {
		if r.Value == nil {
			delete(m, string(r.Key))
		} else {
			m[string(r.Key)] = string(r.Value)
		}
	}
}

func epochEnd(t *testing.T, b *testBroker, topic string, epoch int32) (int32, int64) {
	t.Helper()
	req := kmsg.NewPtrOffsetForLeaderEpochRequest()
	req.Version, req.ReplicaID = 4, -1
	rt := kmsg.NewOffsetForLeaderEpochRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewOffsetForLeaderEpochRequestTopicPartition()
	rp.LeaderEpoch, rp.CurrentLeaderEpoch = epoch, -1
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	p := rawRequest[*kmsg.OffsetForLeaderEpochResponse](t, b, req).Topics[0].Partitions[0]
	if p.ErrorCode != 0 {
		t.Fatalf("OffsetForLeaderEpoch %d: error %d", epoch, p.ErrorCode)
	}
	return p.LeaderEpoch, p.EndOffset
}

// TestLogCleanerCleansMirrorTopic: a compacted mirror topic is cleaned by
// the broker's cleaner while mirror produces keep arriving (every one is
// accepted at its expected log end). Afterwards every batch of the active
// segment is byte for byte what the mirror sent, every surviving batch
// keeps its base offset, last offset and leader epoch, the reads give the
// latest value of every key, and OffsetForLeaderEpoch and ListOffsets
// EARLIEST answer as before cleaning for the epochs whose batches survive.
func TestLogCleanerCleansMirrorTopic(t *testing.T) {
	b := startBroker(t, t.TempDir(), func(c *Config) { c.LogCleanerBackoff = 20 * time.Millisecond })
	createTopic(t, b, "m", 1, map[string]*string{"mirror.mode": sp("push"), "cleanup.policy": sp("compact"),
		"segment.bytes": sp("1048576"), "min.cleanable.dirty.ratio": sp("0.01")})
	l, err := partitionLog(b.srv.cluster.topic("m").Partition(0))
	if err != nil {
		t.Fatal(err)
	}
	const keys, per = 100, 50
	sent := map[int64][]byte{}
	leo := int64(0)
	mirror := func(n int, epoch int32) {
		for i := 0; i < n; i++ {
			base := leo
			if i%10 == 9 {
				base += 3 // a gap, as compacted sources have
			}
			bt := mirrorKVBatch(t, base, epoch, per, keys)
			mirrorTo(t, b, "m", 0, bt, leo)
			sent[base] = bt
			leo = base + per
		}
	}
	mirror(200, 2) // ~2.2 MB in epoch 2
	epoch5Start := leo
	mirror(100, 5)
	wantEpoch, wantEnd := epochEnd(t, b, "m", 2)
	if wantEpoch != 2 || wantEnd != epoch5Start {
		t.Fatalf("before cleaning OffsetForLeaderEpoch(2) = %d@%d, want 2@%d", wantEpoch, wantEnd, epoch5Start)
	}
	waitCleaned := func(n int64) {
		t.Helper()
		deadline := time.Now().Add(60 * time.Second)
		for b.srv.cleaner.cleaned.Load() < n {
			if time.Now().After(deadline) {
				t.Fatalf("mirror topic not cleaned (%d cleans, %d bytes)", b.srv.cleaner.cleaned.Load(), l.Size())
			}
			l.Flush()
			time.Sleep(20 * time.Millisecond)
		}
	}
	waitCleaned(1)
	// The pusher keeps writing while the cleaner works on the older
	// segments; the new ones are cleaned too (during the appends or after).
	cleans := b.srv.cleaner.cleaned.Load()
	mirror(150, 5)
	waitCleaned(cleans + 1)
	// 450 batches of ~11 KB were sent; 100 live keys and a 1 MiB active
	// segment are reached only by cleaning.
	var sentBytes int64
	for _, bt := range sent {
		sentBytes += int64(len(bt))
	}
	for deadline := time.Now().Add(60 * time.Second); l.Size() > sentBytes/2; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("mirror partition %d bytes after cleaning, %d sent", l.Size(), sentBytes)
		}
		l.Flush()
	}
	if e, end := epochEnd(t, b, "m", 2); e != 2 || end != epoch5Start {
		t.Fatalf("after cleaning OffsetForLeaderEpoch(2) = %d@%d, want 2@%d", e, end, epoch5Start)
	}
	if got := listOffsetT(t, b, "m", 0, -2); got != 0 {
		t.Fatalf("after cleaning ListOffsets EARLIEST = %d, want 0", got)
	}
	if got := listOffsetT(t, b, "m", 0, -1); got != leo {
		t.Fatalf("after cleaning ListOffsets LATEST = %d, want %d", got, leo)
	}
	// The last batches sent are in the active segment (1 MiB holds ~90).
	activeBase := leo - 5*per
	want := map[string]string{}
	for off := int64(0); off < leo; off++ {
		bt, ok := sent[off]
		if !ok {
			continue
		}
		applyLatest(t, want, bt)
	}
	got := map[string]string{}
	cleaned, seen := 0, 0
	for from := int64(0); from < leo; {
		fp := fetchAll(t, b, "m", from, 0)
		if fp.ErrorCode != 0 || len(fp.RecordBatches) == 0 {
			t.Fatalf("fetch at %d: error %d, %d bytes", from, fp.ErrorCode, len(fp.RecordBatches))
		}
		it := kbatch.Batches(fp.RecordBatches)
		for it.Next() {
			bt := it.Batch()
			h, _ := kbatch.ParseHeader(bt)
			if h.BaseOffset < from {
				continue
			}
			seen++
			orig, ok := sent[h.BaseOffset]
			if !ok {
				t.Fatalf("batch at %d was never sent", h.BaseOffset)
			}
			oh, _ := kbatch.ParseHeader(orig)
			if h.LastOffsetDelta != oh.LastOffsetDelta || h.LeaderEpoch != oh.LeaderEpoch {
				t.Fatalf("batch at %d: last offset delta %d epoch %d, sent %d epoch %d", h.BaseOffset,
					h.LastOffsetDelta, h.LeaderEpoch, oh.LastOffsetDelta, oh.LeaderEpoch)
			}
			if !bytes.Equal(bt, orig) {
				if h.BaseOffset >= activeBase {
					t.Fatalf("batch at %d in the active segment (base %d) differs from what the mirror sent", h.BaseOffset, activeBase)
				}
				cleaned++
			}
			applyLatest(t, got, bt)
			from = h.LastOffset() + 1
		}
	}
	if cleaned == 0 && seen == len(sent) {
		t.Fatal("no batch was rewritten or removed by the cleaner")
	}
	if len(got) != len(want) {
		t.Fatalf("%d live keys read, want %d", len(got), len(want))
	}
	for k, v := range want {
		if got[k] != v {
			t.Fatalf("key %s: %.12q..., want %.12q...", k, got[k], v)
		}
	}
	t.Logf("mirror topic: %d bytes sent, %d after %d cleans; %d batches rewritten, %d of %d removed", sentBytes, l.Size(),
		b.srv.cleaner.cleaned.Load(), cleaned, len(sent)-seen, len(sent))
}

package broker

import (
	"encoding/hex"
	"encoding/json"
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/verbatim-kafka/verbatim/storage"
)

// recordedSourceStart is the source start the store's mirror record of
// topic holds for partition 0 (nil: none) and the record's version.
func (c *replCluster) recordedSourceStart(topic string) (*mirrorSourceStart, int64) {
	c.t.Helper()
	snap, err := c.store.Snapshot(ctxT(c.t))
	if err != nil {
		c.t.Fatal(err)
	}
	id := c.nodes[1].srv().cluster.topic(topic).ID
	rec, ok := snap.Record(mirrorRecordKind, hex.EncodeToString(id[:]))
	if !ok {
		return nil, 0
	}
	var st mirrorTopicState
	if err := json.Unmarshal(rec.Value, &st); err != nil {
		c.t.Fatal(err)
	}
	return st.Partitions[0].SourceStart, rec.Version
}

func (c *replCluster) epochEntries(node int32, topic string) []storage.EpochEntry {
	return c.handle(node, topic).log.EpochCache().Entries()
}

// A mirror forward carrying the source's epoch at its log start reaches
// every replica's epoch cache (the source's first batches compacted away:
// the copy starts at offset 5 in epoch 2, the source's log starts at 3 in
// epoch 1): the forward is answered once the mirror record holds it; a
// follower records it once its log start got there from its fetches; a
// follower that never fetched the forward, elected leader, moves its log
// start there itself; every new leader answers ListOffsets EARLIEST and
// OffsetForLeaderEpoch as the source.
func TestMirrorStartEpochOnEveryReplica(t *testing.T) {
	c := newReplCluster(t, 3, nil)
	c.createTopic("m", []int32{1, 2, 3}, map[string]string{"mirror.mode": "push", "cleanup.policy": "compact"})
	registerAs(t, c.nodes[1].b, "m", writerID{}, 0)
	ch := c.mirrorProduceAsync(1, "m", concat(data(5, 2, 2).encode(t), data(8, 3, 2).encode(t)), 0)
	c.waitLEO(1, "m", 10)
	if r := c.replicateUntil(ch); r.ErrorCode != 0 {
		t.Fatalf("mirror produce: %+v", r)
	}
	c.replicate(1) // the followers learn the high watermark
	c.nodes[3].fetcher.stopped.Store(true)
	if ss, _ := c.recordedSourceStart("m"); ss != nil {
		t.Fatalf("a source start recorded before any forward: %+v", ss)
	}

	p := rawRequest[*kmsg.DeleteRecordsResponse](t, c.nodes[1].b, startEpochForward(testWriterEpoch, 3, 1)).Topics[0].Partitions[0]
	if p.ErrorCode != 0 || p.LowWatermark != 3 {
		t.Fatalf("forward: %v low watermark %d", kerr.ErrorForCode(p.ErrorCode), p.LowWatermark)
	}
	// Answered after the record write: the store has it already.
	ss, version := c.recordedSourceStart("m")
	if ss == nil || *ss != (mirrorSourceStart{Offset: 3, Epoch: 1}) {
		t.Fatalf("the mirror record after the forward: %+v", ss)
	}
	want := []storage.EpochEntry{{Epoch: 1, StartOffset: 3}, {Epoch: 2, StartOffset: 5}, {Epoch: 3, StartOffset: 8}}
	if got := c.epochEntries(1, "m"); !slices.Equal(got, want) {
		t.Fatalf("the leader's epoch cache %v, want %v", got, want)
	}
	// The followers saw the record, but their log start is still 0.
	c.sync(version)
	for _, id := range []int32{2, 3} {
		if got := c.epochEntries(id, "m"); slices.Contains(got, want[0]) || c.logStart(id, "m") != 0 {
			t.Fatalf("follower %d before fetching the log start: cache %v log start %d", id, got, c.logStart(id, "m"))
		}
	}
	c.replicate(1) // follower 2 takes log start 3, and the epoch with it
	if got := c.epochEntries(2, "m"); !slices.Equal(got, want) || c.logStart(2, "m") != 3 {
		t.Fatalf("follower 2 after a fetch: cache %v log start %d, want %v at 3", got, c.logStart(2, "m"), want)
	}

	// Broker 3 never fetched the forward: elected, it moves its log start
	// to the forward's and answers as the source.
	c.nodes[3].fetcher.stopped.Store(false)
	c.elect("m", 3, []int32{1, 2, 3})
	if got := c.epochEntries(3, "m"); !slices.Equal(got, want) || c.logStart(3, "m") != 3 {
		t.Fatalf("new leader 3: cache %v log start %d, want %v at 3", got, c.logStart(3, "m"), want)
	}
	c.replicate(2)
	checkEarliest := func(leader int32) {
		t.Helper()
		lp := listOffsetsPart(t, c.nodes[leader].b, 9, "m", 0, -2, 0)
		if lp.ErrorCode != 0 || lp.Offset != 3 || lp.LeaderEpoch != 1 {
			t.Fatalf("EARLIEST on leader %d: %v offset %d epoch %d, want 3 in epoch 1", leader, kerr.ErrorForCode(lp.ErrorCode), lp.Offset, lp.LeaderEpoch)
		}
		if e, end := epochEnd(t, c.nodes[leader].b, "m", 1); e != 1 || end != 5 {
			t.Fatalf("OffsetForLeaderEpoch(1) on leader %d: epoch %d end %d, want 1 ending at 5", leader, e, end)
		}
	}
	checkEarliest(3)
	for id := int32(1); id <= 3; id++ {
		if got := c.epochEntries(id, "m"); !slices.Equal(got, want) {
			t.Fatalf("broker %d's epoch cache %v, want %v", id, got, want)
		}
	}
	c.elect("m", 2, []int32{1, 2, 3})
	c.replicate(2)
	checkEarliest(2)
}

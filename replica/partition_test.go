package replica

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/verbatim-kafka/verbatim/client"
	"github.com/verbatim-kafka/verbatim/kbatch"
	"github.com/verbatim-kafka/verbatim/kbatch/kbatchtest"
)

// batchAt encodes a batch of n records at base with epoch.
func batchAt(t testing.TB, base int64, epoch int32, n int) []byte {
	t.Helper()
	recs := make([]kbatch.Record, n)
	for i := range recs {
		recs[i] = kbatch.Record{OffsetDelta: int32(i), Value: []byte{byte(base), byte(i)}}
	}
	b := kbatch.NewBatch(1, recs...)
	b.BaseOffset, b.LeaderEpoch = base, epoch
	return kbatchtest.Encode(t, b)
}

// replicaWith is a replica holding batches of 2 records at the epochs
// given, from offset 0.
func replicaWith(t testing.TB, epochs ...int32) *memReplica {
	r := &memReplica{}
	for _, e := range epochs {
		if err := r.Append(batchAt(t, r.LogEndOffset(), e, 2), 0, 0); err != nil {
			t.Fatal(err)
		}
	}
	return r
}

// noDiv is a fetch answer's DivergingEpoch when there is none.
var noDiv = client.EpochEnd{LeaderEpoch: -1, EndOffset: -1}

func fetchingPart(r *memReplica) *partition {
	p := newPartition(client.TopicPartition{Topic: "t"}, [16]byte{}, 9)
	p.rep, p.phase = r, fetching
	return p
}

// TestDivergingEpoch: a DivergingEpoch answer truncates as Kafka's
// follower does, and when the leader named an epoch we do not have, the
// partition asks OffsetForLeaderEpoch again.
func TestDivergingEpoch(t *testing.T) {
	for _, c := range []struct {
		name    string
		epochs  []int32 // ours: 2 records each
		div     client.EpochEnd
		wantEnd int64
		want    phase
	}{
		// Ours: e1 [0,2) e1 [2,4) e3 [4,6); the leader ends e3 at 5.
		{"same epoch, leader shorter", []int32{1, 1, 3}, client.EpochEnd{LeaderEpoch: 3, EndOffset: 5}, 4, fetching},
		// The leader's e1 ends at 3, inside our second batch: it goes whole.
		{"older epoch", []int32{1, 1, 3}, client.EpochEnd{LeaderEpoch: 1, EndOffset: 3}, 2, fetching},
		// The leader has e2, which we do not: to our end of e1, ask again.
		{"epoch we lack", []int32{1, 1, 3}, client.EpochEnd{LeaderEpoch: 2, EndOffset: 6}, 4, truncating},
		// The leader's epoch is below all of ours: Kafka's cache answers our
		// first epoch's start for it, so everything goes.
		{"below ours", []int32{4, 4}, client.EpochEnd{LeaderEpoch: 2, EndOffset: 2}, 0, fetching},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := replicaWith(t, c.epochs...)
			p := fetchingPart(r)
			o, err := p.onFetch(client.FetchResult{HighWatermark: -1, DivergingEpoch: c.div}, r.LogEndOffset())
			if o != goOn || err != nil {
				t.Fatalf("outcome %v, %v", o, err)
			}
			if r.LogEndOffset() != c.wantEnd || p.phase != c.want {
				t.Fatalf("log end %d phase %s; want %d %s", r.LogEndOffset(), p.phase, c.wantEnd, c.want)
			}
		})
	}
}

// TestDivergingEpochNoTruncation: a divergence that truncates nothing
// (an inconsistent leader) is paced, not asked again at once.
func TestDivergingEpochNoTruncation(t *testing.T) {
	r := replicaWith(t, 1, 3)
	p := fetchingPart(r)
	o, err := p.onFetch(client.FetchResult{DivergingEpoch: client.EpochEnd{LeaderEpoch: 3, EndOffset: 9}}, 4)
	if o != backOff || err == nil || r.LogEndOffset() != 4 || p.phase != fetching {
		t.Fatalf("%v %v: log end %d phase %s", o, err, r.LogEndOffset(), p.phase)
	}
}

// TestFetchAnswers: what each kind of answer does to the partition.
func TestFetchAnswers(t *testing.T) {
	t.Run("records, cut last batch dropped, high watermark taken", func(t *testing.T) {
		r := replicaWith(t, 1)
		p := fetchingPart(r)
		b1, b2 := batchAt(t, 2, 1, 3), batchAt(t, 5, 1, 2)
		set := append(append([]byte{}, b1...), b2[:len(b2)-1]...)
		if o, err := p.onFetch(client.FetchResult{DivergingEpoch: noDiv, Records: set, HighWatermark: 7, LogStart: 0}, 2); o != goOn || err != nil {
			t.Fatal(o, err)
		}
		if r.LogEndOffset() != 5 || r.hw != 5 || r.bad != "" {
			t.Fatalf("log end %d hw %d bad %q", r.LogEndOffset(), r.hw, r.bad)
		}
	})
	t.Run("log start inside the leader's first batch", func(t *testing.T) {
		r := &memReplica{}
		_ = r.TruncateFullyAndStartAt(11) // after OFFSET_OUT_OF_RANGE
		p := fetchingPart(r)
		if o, err := p.onFetch(client.FetchResult{DivergingEpoch: noDiv, Records: batchAt(t, 10, 2, 4), HighWatermark: 14, LogStart: 11}, 11); o != goOn || err != nil {
			t.Fatal(o, err)
		}
		if r.LogEndOffset() != 14 || r.LogStartOffset() != 11 || r.bad != "" {
			t.Fatalf("log [%d,%d) bad %q", r.LogStartOffset(), r.LogEndOffset(), r.bad)
		}
	})
	t.Run("log holding only what the leader deleted", func(t *testing.T) {
		r := replicaWith(t, 1, 1) // [0,4); the leader deleted below 4, inside its batch 3-6
		p := fetchingPart(r)
		if o, err := p.onFetch(client.FetchResult{DivergingEpoch: noDiv, Records: batchAt(t, 3, 2, 4), HighWatermark: 7, LogStart: 4}, 4); o != goOn || err != nil {
			t.Fatal(o, err)
		}
		if r.LogStartOffset() != 4 || r.LogEndOffset() != 7 || r.bad != "" {
			t.Fatalf("log [%d,%d) bad %q", r.LogStartOffset(), r.LogEndOffset(), r.bad)
		}
	})
	t.Run("batch below the end of a non-empty log", func(t *testing.T) {
		r := replicaWith(t, 1, 1)
		p := fetchingPart(r)
		o, err := p.onFetch(client.FetchResult{DivergingEpoch: noDiv, Records: batchAt(t, 3, 1, 4)}, 4)
		if o != backOff || !errors.Is(err, errBelowEnd) || r.LogEndOffset() != 4 {
			t.Fatalf("outcome %v err %v log end %d", o, err, r.LogEndOffset())
		}
	})
	t.Run("stale answer", func(t *testing.T) {
		r := replicaWith(t, 1)
		p := fetchingPart(r)
		if o, err := p.onFetch(client.FetchResult{DivergingEpoch: noDiv, Records: batchAt(t, 0, 1, 2)}, 0); o != goOn || err != nil || r.appends != 1 {
			t.Fatalf("an answer for offset 0 at log end 2: %v %v, %d appends", o, err, r.appends)
		}
	})
	for _, c := range []struct {
		err     error
		outcome outcome
		phase   phase
	}{
		{kerr.OffsetOutOfRange, goOn, outOfRange},
		{kerr.FencedLeaderEpoch, goOn, fenced},
		{kerr.UnknownLeaderEpoch, backOff, fetching},
		{kerr.NotLeaderForPartition, backOff, fetching},
		{kerr.UnknownTopicID, backOff, fetching},
	} {
		t.Run(c.err.Error(), func(t *testing.T) {
			p := fetchingPart(replicaWith(t, 1))
			o, _ := p.onFetch(client.FetchResult{DivergingEpoch: noDiv, Err: c.err}, 2)
			if o != c.outcome || p.phase != c.phase {
				t.Fatalf("%v: outcome %v phase %s; want %v %s", c.err, o, p.phase, c.outcome, c.phase)
			}
		})
	}
}

// TestOutOfRange: Kafka's handling of OFFSET_OUT_OF_RANGE.
func TestOutOfRange(t *testing.T) {
	// The leader ends below us (an unclean election): truncate to its end.
	r := replicaWith(t, 1, 1, 1)
	p := fetchingPart(r)
	p.phase = outOfRange
	if o, err := p.onOffsets(offsetAnswer{Start: 0, End: 3}); o != goOn || err != nil || r.LogEndOffset() != 2 || p.phase != fetching {
		t.Fatalf("%v %v: log end %d phase %s", o, err, r.LogEndOffset(), p.phase)
	}
	// The leader starts above our end: start again at its log start.
	p.phase = outOfRange
	if o, err := p.onOffsets(offsetAnswer{Start: 40, End: 50}); o != goOn || err != nil || r.LogStartOffset() != 40 || r.LogEndOffset() != 40 {
		t.Fatalf("%v %v: log [%d,%d)", o, err, r.LogStartOffset(), r.LogEndOffset())
	}
	// Within the leader's range after all: fetch again, but paced.
	p.phase = outOfRange
	if o, err := p.onOffsets(offsetAnswer{Start: 30, End: 60}); o != backOff || err == nil || p.phase != fetching || r.LogEndOffset() != 40 {
		t.Fatalf("within range: %v %v phase %s log end %d", o, err, p.phase, r.LogEndOffset())
	}
	// Fenced while asking: wait for the next Follow.
	p.phase = outOfRange
	if o, _ := p.onOffsets(offsetAnswer{Err: kerr.FencedLeaderEpoch}); o != goOn || p.phase != fenced {
		t.Fatalf("fenced: %v %s", o, p.phase)
	}
}

// TestEpochEndAnswers: OffsetForLeaderEpoch answers (KIP-279's rounds).
func TestEpochEndAnswers(t *testing.T) {
	r := replicaWith(t, 1, 3, 5) // e1 [0,2) e3 [2,4) e5 [4,6)
	p := fetchingPart(r)
	p.phase = truncating
	// Asked e5, the leader answers e4 ending at 5: we lack e4, so to our
	// end of e3 (4), and ask again for e3.
	if o, err := p.onEpochEnd(epochAnswer{End: client.EpochEnd{LeaderEpoch: 4, EndOffset: 5}}); o != goOn || err != nil || r.LogEndOffset() != 4 || p.phase != truncating {
		t.Fatalf("%v %v: log end %d phase %s", o, err, r.LogEndOffset(), p.phase)
	}
	// Asked e3, the leader's e3 ends at 3: inside our e3 batch, which goes.
	if o, err := p.onEpochEnd(epochAnswer{End: client.EpochEnd{LeaderEpoch: 3, EndOffset: 3}}); o != goOn || err != nil || r.LogEndOffset() != 2 || p.phase != fetching {
		t.Fatalf("%v %v: log end %d phase %s", o, err, r.LogEndOffset(), p.phase)
	}
	p.phase = truncating
	if o, _ := p.onEpochEnd(epochAnswer{Err: kerr.UnknownLeaderEpoch}); o != backOff || p.phase != truncating {
		t.Fatalf("unknown leader epoch: %v %s", o, p.phase)
	}
}

// TestPartitionBackoff: 100 ms after progress, doubling up to the limit.
func TestPartitionBackoff(t *testing.T) {
	p := newPartition(client.TopicPartition{Topic: "t"}, [16]byte{}, 1)
	now := time.Unix(100, 0)
	var got []time.Duration
	for i := 0; i < 6; i++ {
		p.backOff(now, time.Second)
		got = append(got, p.delay.Sub(now))
	}
	want := []time.Duration{100 * time.Millisecond, 200 * time.Millisecond, 400 * time.Millisecond, 800 * time.Millisecond, time.Second, time.Second}
	if !slices.Equal(got, want) {
		t.Fatalf("waits %v, want %v", got, want)
	}
	p.wait = 0 // progress
	if p.backOff(now, 50*time.Millisecond); p.delay.Sub(now) != 50*time.Millisecond {
		t.Fatalf("a limit below 100 ms: waited %v", p.delay.Sub(now))
	}
}

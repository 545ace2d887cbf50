package replica

// The follower's log start both ways: sent in every fetch (the leader's
// low watermark for DeleteRecords counts it) and moved by the leader's.

import (
	"context"
	"testing"

	"github.com/verbatim-kafka/verbatim/broker"
	"github.com/verbatim-kafka/verbatim/client"
)

// answerLeader reports each fetch it is sent and answers it with the
// result the test hands it (the same for every partition); the rest is
// gateLeader's.
type answerLeader struct {
	*gateLeader
	asked  chan []client.SessionPartition
	answer chan client.FetchResult
}

func (l *answerLeader) Fetch(ctx context.Context, want []client.SessionPartition) ([]client.SessionAnswer, error) {
	select {
	case l.asked <- want:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	var a client.FetchResult
	select {
	case a = <-l.answer:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	var out []client.SessionAnswer
	for _, w := range want {
		out = append(out, client.SessionAnswer{TopicPartition: w.TopicPartition, FetchResult: a})
	}
	return out, nil
}

// TestFollowerLogStartSentAndApplied: the fetch carries the replica's log
// start; the leader's log start in the answer moves it (DeleteRecords on
// the leader), and the next fetch carries the new one.
func TestFollowerLogStartSentAndApplied(t *testing.T) {
	tp := clientTP("t", 0)
	host := newMemHost(3)
	rep := host.replica(tp)
	if err := rep.TruncateFullyAndStartAt(5); err != nil { // empty, from 5: nothing to truncate
		t.Fatal(err)
	}
	ld := &answerLeader{gateLeader: newGate(t, 1), asked: make(chan []client.SessionPartition, 1), answer: make(chan client.FetchResult, 1)}
	m := NewManager(Config{Host: host, Log: quietLog()})
	m.fcfg.dialFunc = func(context.Context, int32) (leader, error) { return ld, nil }
	t.Cleanup(m.Close)
	m.Follow([]broker.FollowedPartition{follow(tp, 1, 4)})

	sent := func() client.SessionPartition {
		t.Helper()
		w := <-ld.asked
		if len(w) != 1 || w[0].TopicPartition != tp {
			t.Fatalf("fetch of %+v", w)
		}
		return w[0]
	}
	if w := sent(); w.Offset != 5 || w.LogStart != 5 {
		t.Fatalf("first fetch at %d with log start %d, want 5 and 5", w.Offset, w.LogStart)
	}
	// Five records and the leader's log start 7 (a DeleteRecords there).
	ld.answer <- client.FetchResult{Records: batchAt(t, 5, 4, 5), HighWatermark: 10, LogStart: 7, DivergingEpoch: noDiv}
	if w := sent(); w.Offset != 10 || w.LogStart != 7 {
		t.Fatalf("second fetch at %d with log start %d, want 10 and 7", w.Offset, w.LogStart)
	}
	if s := rep.snapshot(); s.start != 7 || s.end != 10 {
		t.Fatalf("replica [%d, %d), want [7, 10)", s.start, s.end)
	}
	// No records: the log start moves all the same.
	ld.answer <- client.FetchResult{Records: nil, HighWatermark: 10, LogStart: 9, DivergingEpoch: noDiv}
	if w := sent(); w.LogStart != 9 {
		t.Fatalf("third fetch with log start %d, want 9", w.LogStart)
	}
	if c := rep.counts(); c.bad != "" {
		t.Fatal(c.bad)
	}
}

package broker

import (
	"testing"
	"time"
)

// TestMirrorProduceRollsByAge: a mirror produce's append takes the
// request's time for the segment roll, so batches without timestamps
// (the roll then goes by the segment's age, as Kafka's timeWaitedForRoll)
// roll a mirror topic's segment once segment.ms has passed, and not
// before.
func TestMirrorProduceRollsByAge(t *testing.T) {
	b := startBroker(t, t.TempDir(), nil)
	createTopic(t, b, "m", 1, map[string]*string{"mirror.mode": sp("push"), "segment.ms": sp("300")})
	l := b.srv.cluster.topic("m").Partition(0).Log.(*logHandle).log
	noTimestamp := func(base int64) []byte {
		sb := data(base, 0, 1)
		sb.timestampMs = -1
		return sb.encode(t)
	}
	send := func(base int64) {
		t.Helper()
		if pr := mirrorOne(t, b, "m", noTimestamp(base), base, -1); pr.ErrorCode != 0 {
			t.Fatalf("mirror produce at %d: error %d %v", base, pr.ErrorCode, pr.ErrorMessage)
		}
	}
	send(0)
	send(1) // well within segment.ms of the segment's creation
	if n := l.NumSegments(); n != 1 {
		t.Fatalf("%d segments right after creation, want 1", n)
	}
	time.Sleep(400 * time.Millisecond)
	send(2)
	if n := l.NumSegments(); n != 2 {
		t.Fatalf("%d segments after segment.ms passed, want 2 (the append's time must be the request's)", n)
	}
}

package broker

import (
	"bytes"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
)

// A resend after a leader change may find its first batches stored
// already (the new leader replicated them before the old one failed):
// stated at the log end the writer last had acknowledged, it is taken
// when the stored part is byte for byte what it sends, and only the
// rest is appended; a stored part that differs is the expected-log-end
// mismatch, nothing appended.
func TestMirrorResendOverlappingLogEnd(t *testing.T) {
	b := startBroker(t, t.TempDir(), nil)
	createTopic(t, b, "m", 1, map[string]*string{"mirror.mode": sp("push")})
	b1, b2, b3 := data(0, 2, 3).encode(t), data(3, 2, 2).encode(t), data(5, 2, 1).encode(t)
	if r := mirrorOne(t, b, "m", b1, 0, -1); r.ErrorCode != 0 {
		t.Fatalf("first produce: %+v", r)
	}
	// Sent as one chunk at 0, of which 0-2 are stored: 3-5 appended.
	if r := mirrorOne(t, b, "m", concat(b1, b2, b3), 0, -1); r.ErrorCode != 0 || r.BaseOffset != 0 {
		t.Fatalf("resend overlapping the log end: %+v", r)
	}
	if got := fetchAll(t, b, "m", 0, 0); !bytes.Equal(got.RecordBatches, concat(b1, b2, b3)) || got.HighWatermark != 6 {
		t.Fatalf("after the resend: %d bytes, hw %d; want the three batches", len(got.RecordBatches), got.HighWatermark)
	}
	// A chunk at 3 whose stored part differs (another batch at 3-4).
	other := data(3, 2, 2)
	other.timestampMs++
	r := mirrorOne(t, b, "m", concat(other.encode(t), data(6, 2, 1).encode(t)), 3, -1)
	if r.ErrorCode != kerr.OffsetOutOfRange.Code || r.ErrorMessage == nil || *r.ErrorMessage != "mirror: expected log end 3, log end is 6" {
		t.Fatalf("resend whose stored part differs: %+v", r)
	}
	// Expecting more than the log end is refused as before.
	if r := mirrorOne(t, b, "m", data(8, 2, 1).encode(t), 8, -1); r.ErrorCode != kerr.OffsetOutOfRange.Code {
		t.Fatalf("expected log end above the log end: %+v", r)
	}
	if got := fetchAll(t, b, "m", 0, 0); got.HighWatermark != 6 {
		t.Fatalf("refused resends appended: hw %d", got.HighWatermark)
	}
}

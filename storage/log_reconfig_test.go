package storage

import "testing"

// TestLogReconfigureAppliesToLiveLog: a smaller segment.bytes makes the
// next appends roll without reopening the log, and a retention.ms set
// afterwards deletes the old segments on the next retention pass.
func TestLogReconfigureAppliesToLiveLog(t *testing.T) {
	fs := NewMemFS()
	now := int64(1_000_000)
	l := openLog(t, fs, Config{SegmentBytes: 1 << 30, RetentionMs: -1, NowMs: func() int64 { return now }})
	defer l.Close()
	for i := 0; i < 4; i++ {
		if _, err := l.AppendLeader(testBatch(t, 0, 0, now, 4, 200), 0, now); err != nil {
			t.Fatal(err)
		}
	}
	if n := l.NumSegments(); n != 1 {
		t.Fatalf("%d segments before the change, want 1", n)
	}
	if err := l.Reconfigure(Config{SegmentBytes: 1000, RetentionMs: -1}); err != nil {
		t.Fatal(err)
	}
	if got := l.Config().SegmentBytes; got != 1000 {
		t.Fatalf("Config().SegmentBytes = %d after Reconfigure, want 1000", got)
	}
	for i := 0; i < 4; i++ {
		if _, err := l.AppendLeader(testBatch(t, 0, 0, now, 4, 200), 0, now); err != nil {
			t.Fatal(err)
		}
	}
	if n := l.NumSegments(); n < 4 {
		t.Fatalf("%d segments after segment.bytes=1000 and 4 appends of ~900 bytes, want every append in a new segment", n)
	}
	if n, err := l.ApplyRetention(now + 10_000); err != nil || n != 0 {
		t.Fatalf("retention with retention.ms=-1 deleted %d segments (err %v)", n, err)
	}
	if err := l.Reconfigure(Config{SegmentBytes: 1000, RetentionMs: 5_000}); err != nil {
		t.Fatal(err)
	}
	n, err := l.ApplyRetention(now + 10_000)
	if err != nil || n == 0 {
		t.Fatalf("retention after retention.ms=5000 deleted %d segments (err %v), want the expired ones", n, err)
	}
	if l.LogStartOffset() == 0 {
		t.Fatal("log start did not move after retention")
	}
	// The flush policy and the topic name are not reconfigurable.
	if err := l.Reconfigure(Config{Topic: "other", Flush: FlushAlways}); err != nil {
		t.Fatal(err)
	}
	if c := l.Config(); c.Topic != "t" || c.Flush != FlushNever {
		t.Fatalf("Reconfigure changed topic %q / flush %v", c.Topic, c.Flush)
	}
	l.Close()
	if err := l.Reconfigure(Config{}); err == nil {
		t.Fatal("Reconfigure of a closed log succeeded")
	}
}

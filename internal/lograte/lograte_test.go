package lograte

import (
	"bytes"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"
)

func TestLimiterBurstThenCountsHeldBack(t *testing.T) {
	now := time.Unix(1000, 0)
	l := New(time.Second, 2, func() time.Time { return now })
	for i, want := range []bool{true, true, false, false, false} {
		if ok, _ := l.Allow("k"); ok != want {
			t.Fatalf("line %d: allowed %v, want %v", i, ok, want)
		}
	}
	if ok, _ := l.Allow("other"); !ok {
		t.Fatal("a different key shares the first key's rate")
	}
	now = now.Add(time.Second)
	ok, n := l.Allow("k")
	if !ok || n != 3 {
		t.Fatalf("next window: allowed %v with %d held back, want true with 3", ok, n)
	}
	if _, n := l.Allow("k"); n != 0 {
		t.Fatalf("held-back count reported twice: %d", n)
	}
}

func TestLimiterBoundsKeys(t *testing.T) {
	now := time.Unix(1000, 0)
	l := New(time.Minute, 1, func() time.Time { return now })
	for i := range MaxKeys + 100 {
		l.Allow(fmt.Sprint("peer-", i))
	}
	if len(l.keys) > MaxKeys+1 {
		t.Fatalf("%d keys tracked, cap %d", len(l.keys), MaxKeys)
	}
	// The overflow bucket is rate-limited like any key.
	if ok, _ := l.Allow("yet-another"); ok {
		t.Fatal("a new key past the cap was let through although the overflow bucket is spent")
	}
	now = now.Add(time.Minute)
	if ok, _ := l.Allow("fresh"); !ok {
		t.Fatal("expired keys were not dropped to make room")
	}
}

func TestLogWritesSuppressedCount(t *testing.T) {
	var buf bytes.Buffer
	lg := slog.New(slog.NewTextHandler(&buf, nil))
	now := time.Unix(1000, 0)
	l := New(time.Second, 1, func() time.Time { return now })
	for range 5 {
		l.Log(lg, slog.LevelWarn, "refused", "produce refused", "topic", "t")
	}
	now = now.Add(time.Second)
	l.Log(lg, slog.LevelWarn, "refused", "produce refused", "topic", "t")
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 2 {
		t.Fatalf("%d lines written, want 2:\n%s", len(lines), buf.String())
	}
	if !strings.Contains(lines[1], "suppressed=4") {
		t.Fatalf("second line does not count the 4 held back: %s", lines[1])
	}
}

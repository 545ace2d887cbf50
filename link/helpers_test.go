package link

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/verbatim-kafka/verbatim/internal/testkit"
	"github.com/verbatim-kafka/verbatim/wireext"
)

// openManager opens a Manager over d with a short sync interval, closed
// before d stops.
func openManager(t *testing.T, d *testkit.Dest) *Manager {
	t.Helper()
	return openManagerRetry(t, d, 5*time.Second)
}

// openManagerRetry is openManager with the copies' retry bound.
func openManagerRetry(t *testing.T, d *testkit.Dest, retryFor time.Duration) *Manager {
	t.Helper()
	m, err := Open(Config{Host: d.Srv, Log: slog.New(slog.NewTextHandler(io.Discard, nil)), SyncInterval: 50 * time.Millisecond, RetryFor: retryFor})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Close() })
	return m
}

// restart closes m and d and opens both again on d's data directory.
func restart(t *testing.T, m *Manager, d *testkit.Dest) (*Manager, *testkit.Dest) {
	t.Helper()
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	d.Stop()
	d = testkit.StartDest(t, d.Dir)
	return openManager(t, d), d
}

// statuses returns the link's partition statuses by "topic/partition".
func statuses(t *testing.T, m *Manager, link string, topics ...string) map[string]wireext.MirrorPartitionStatus {
	t.Helper()
	sts, err := m.DescribeMirrors(context.Background(), wireext.DescribeMirrorsRequest{Link: link, Topics: topics})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]wireext.MirrorPartitionStatus{}
	for _, st := range sts {
		out[fmt.Sprintf("%s/%d", st.Topic, st.Partition)] = st
	}
	return out
}

// waitState waits until each of parts ("topic/partition") is in state
// (and, for MIRRORING, without lag at the source's high watermark).
func waitState(t *testing.T, m *Manager, link, state string, parts ...string) map[string]wireext.MirrorPartitionStatus {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		sts := statuses(t, m, link)
		done := true
		for _, p := range parts {
			st, ok := sts[p]
			if ok && st.State == wireext.StateFailed && state != wireext.StateFailed {
				t.Fatalf("%s FAILED: %s", p, st.Reason)
			}
			if !ok || st.State != state || state == wireext.StateMirroring && (st.Lag != 0 || st.LogEndOffset != st.SourceHighWatermark) {
				done = false
			}
		}
		if done {
			return sts
		}
		if time.Now().After(deadline) {
			t.Fatalf("not all of %v %s within 30s: %+v", parts, state, sts)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// waitRounds waits until the link completed n more sync rounds.
func waitRounds(t *testing.T, m *Manager, link string, n int64) {
	t.Helper()
	r := m.link(link)
	if r == nil {
		t.Fatalf("no link %s", link)
	}
	want := r.rounds.Load() + n
	for deadline := time.Now().Add(30 * time.Second); r.rounds.Load() < want; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("link %s: %d sync rounds within 30s, want %d", link, r.rounds.Load(), want)
		}
	}
}

// rawLog reads a whole partition as its raw batches.
func rawLog(t *testing.T, addr, topic string, part int32) []byte {
	return testkit.RawLog(t, addr, topic, part)
}

// sameLog wants topic/part byte for byte equal on both sides.
func sameLog(t *testing.T, src, dst, topic string, part int32) {
	t.Helper()
	s, d := rawLog(t, src, topic, part), rawLog(t, dst, topic, part)
	if len(s) == 0 || !bytes.Equal(s, d) {
		t.Fatalf("%s/%d: source %d bytes, destination %d bytes, equal %v", topic, part, len(s), len(d), bytes.Equal(s, d))
	}
}

func produce(t *testing.T, cl *kgo.Client, topic string, part int32, n int, tag string) {
	t.Helper()
	rs := make([]*kgo.Record, n)
	for i := range rs {
		rs[i] = &kgo.Record{Topic: topic, Partition: part, Key: []byte{byte('k'), byte(i % 5)}, Value: []byte(tag + "-" + string(rune('a'+i%26)))}
	}
	if err := cl.ProduceSync(testkit.Ctx(t), rs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
}

package coordlogtest

import (
	"errors"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/verbatim-kafka/verbatim/coordlog"
)

// MemLog keeps what the coordinators append, by partition.
type MemLog struct {
	// Count is the partition count of every internal topic (default 10).
	Count int32
	// BeforeAppend, if set, runs before every append or marker, with no
	// lock of the MemLog held; a non-nil error fails the write.
	BeforeAppend func(topic string, p int32) error

	mu    sync.Mutex
	parts map[coordlog.TopicPartition][]coordlog.Entry
}

// New returns an empty MemLog.
func New() *MemLog { return &MemLog{Count: 10} }

// PartitionCount is Count.
func (l *MemLog) PartitionCount(string) int32 { return l.Count }

// Append stores recs as one batch.
func (l *MemLog) Append(topic string, p int32, recs []coordlog.Record, b coordlog.Batch, now time.Time) error {
	if h := l.BeforeAppend; h != nil {
		if err := h(topic, p); err != nil {
			return err
		}
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.parts == nil {
		l.parts = map[coordlog.TopicPartition][]coordlog.Entry{}
	}
	tp := coordlog.TopicPartition{Topic: topic, Partition: p}
	pid := int64(-1)
	if b.Transactional {
		pid = b.ProducerID
	}
	for _, r := range recs {
		l.parts[tp] = append(l.parts[tp], coordlog.Entry{Offset: int64(len(l.parts[tp])), Timestamp: now.UnixMilli(),
			ProducerID: pid, Transactional: b.Transactional, Key: r.Key, Value: r.Value})
	}
	return nil
}

// AppendMarker stores a COMMIT or ABORT marker of pid in tp.
func (l *MemLog) AppendMarker(tp coordlog.TopicPartition, pid int64, commit bool, now time.Time) error {
	if h := l.BeforeAppend; h != nil {
		if err := h(tp.Topic, tp.Partition); err != nil {
			return err
		}
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.parts == nil {
		l.parts = map[coordlog.TopicPartition][]coordlog.Entry{}
	}
	l.parts[tp] = append(l.parts[tp], coordlog.Entry{Offset: int64(len(l.parts[tp])), Timestamp: now.UnixMilli(),
		ProducerID: pid, Transactional: true, Control: true, Commit: commit})
	return nil
}

// Partitions lists the partitions of topic written so far, nil if none.
func (l *MemLog) Partitions(topic string) []int32 {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []int32
	for tp := range l.parts {
		if tp.Topic == topic {
			out = append(out, tp.Partition)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

// Replay calls fn for every entry of partition p of topic, in order.
func (l *MemLog) Replay(topic string, p int32, fn func(coordlog.Entry)) error {
	for _, e := range l.Entries(topic, p) {
		fn(e)
	}
	return nil
}

// Entries is a copy of what partition p of topic holds.
func (l *MemLog) Entries(topic string, p int32) []coordlog.Entry {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]coordlog.Entry(nil), l.parts[coordlog.TopicPartition{Topic: topic, Partition: p}]...)
}

// Clock is a manual coordlog.Clock.
type Clock struct {
	mu sync.Mutex
	t  time.Time
}

// NewClock returns a clock reading t.
func NewClock(t time.Time) *Clock { return &Clock{t: t} }

// Now is the clock's time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

// Advance moves the clock by d and returns the new time.
func (c *Clock) Advance(d time.Duration) time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
	return c.t
}

// Coordinator is what Start needs of a coordinator.
type Coordinator interface {
	Load() error
	Shutdown()
}

// Start loads c and shuts it down when the test ends.
func Start[C Coordinator](t testing.TB, c C) C {
	t.Helper()
	if err := c.Load(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Shutdown)
	return c
}

// CallBack runs fn on another goroutine and waits for it; for append
// hooks that call back into a coordinator, which deadlocks if the
// coordinator holds its lock during the append. A call that has not
// returned after 10 s fails the test and the append.
func CallBack(t testing.TB, topic string, fn func()) error {
	done := make(chan struct{})
	go func() {
		defer close(done)
		fn()
	}()
	select {
	case <-done:
		return nil
	case <-time.After(10 * time.Second):
		t.Errorf("the coordinator's lock is held during an append to %s", topic)
		return errors.New("deadlocked")
	}
}

package storage

import (
	"bytes"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/verbatim-kafka/verbatim/kbatch"
)

// TestLogConcurrentAppendReadFlush runs appends (with rolls), readers
// following the log end, durability waiters and explicit flushes at once;
// under -race it checks the locking of the flusher's lock-free path.
// Readers must only ever see whole batches that were appended, in order.
func TestLogConcurrentAppendReadFlush(t *testing.T) {
	fs := NewMemFS()
	l := openLog(t, fs, Config{Flush: FlushAlways, SegmentBytes: 4096, IndexIntervalBytes: 128})
	defer l.Close()
	const n = 300
	// Built before the appender starts; AppendLeader patches them under the
	// Log's mutex, which readers take before seeing them.
	batches := make([][]byte, n)
	for i := range batches {
		batches[i] = testBatch(t, 0, int32(i/50), int64(i), 1+i%3, 50+i%200)
	}
	var appended atomic.Int64
	var failed atomic.Bool
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; i < n; i++ {
			res, err := l.AppendLeader(batches[i], int32(i/50), 1)
			if err != nil {
				t.Error(err)
				failed.Store(true)
				return
			}
			appended.Store(int64(i + 1))
			if i%7 == 0 {
				l.OnDurable(res.LastOffset+1, func(err error) {
					if err != nil {
						t.Error(err)
					}
				})
			}
		}
	}()
	for r := 0; r < 2; r++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			off := int64(0)
			seen := 0
			for seen < n && !failed.Load() {
				sl, err := l.Read(off, 2000)
				if err != nil {
					t.Error(err)
					return
				}
				if sl.Size == 0 {
					continue
				}
				data, err := sl.Bytes(nil)
				if err != nil {
					t.Error(err)
					return
				}
				for len(data) > 0 {
					b, rest, err := kbatch.Next(data)
					if err != nil {
						t.Error(err)
						return
					}
					if !bytes.Equal(b, batches[seen]) {
						t.Errorf("reader: batch %d differs", seen)
						return
					}
					seen++
					off = kbatch.BaseOffset(b) + int64(kbatch.LastOffsetDelta(b)) + 1
					data = rest
				}
			}
		}()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		for appended.Load() < n && !failed.Load() {
			if err := l.Flush(); err != nil {
				t.Error(err)
				return
			}
			if err := l.WaitDurable(l.LogEndOffset()); err != nil {
				t.Error(err)
				return
			}
		}
	}()
	wg.Wait()
	if err := l.WaitDurable(l.LogEndOffset()); err != nil {
		t.Fatal(err)
	}
}

func TestLogLowerEpochBatchDoesNotCorruptCache(t *testing.T) {
	fs := NewMemFS()
	l := openLog(t, fs, Config{})
	defer l.Close()
	for _, e := range []struct {
		base  int64
		epoch int32
	}{{0, 3}, {5, 5}, {10, 4}, {15, 5}, {20, 6}} {
		if _, err := l.AppendVerbatim(testBatch(t, e.base, e.epoch, 1, 2, 5)); err != nil {
			t.Fatal(err)
		}
	}
	want := []EpochEntry{{3, 0}, {5, 5}, {6, 20}}
	got := l.EpochCache().Entries()
	if len(got) != len(want) {
		t.Fatalf("entries %+v", got)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("entries %+v, want %+v", got, want)
		}
	}
	if e, off, _ := l.EndOffsetForEpoch(4); e != 3 || off != 5 {
		t.Fatalf("epoch 4: %d %d", e, off)
	}
	if e, off, _ := l.EndOffsetForEpoch(6); e != 6 || off != 22 {
		t.Fatalf("epoch 6: %d %d", e, off)
	}
}

func TestLogTruncateRebuildsProducerState(t *testing.T) {
	fs := NewMemFS()
	l := openLog(t, fs, Config{SegmentBytes: 300})
	defer l.Close()
	if _, err := l.AppendVerbatim(pidBatch(t, 0, 7, 0, 0, 3, true)); err != nil {
		t.Fatal(err)
	}
	if _, err := l.AppendVerbatim(pidBatch(t, 3, 8, 0, 0, 1, false)); err != nil {
		t.Fatal(err)
	}
	if _, err := l.AppendVerbatim(markerBatch(t, 4, 7, 0, kbatch.ControlAbort)); err != nil {
		t.Fatal(err)
	}
	if lso := l.LastStableOffset(); lso != 5 {
		t.Fatalf("LSO %d", lso)
	}
	if got, _ := l.AbortedTransactions(0, 5, nil); len(got) != 1 {
		t.Fatalf("aborted %+v", got)
	}
	// Cut the marker: the transaction is open again.
	if err := l.Truncate(4); err != nil {
		t.Fatal(err)
	}
	if lso := l.LastStableOffset(); lso != 0 {
		t.Fatalf("LSO %d after truncating the marker", lso)
	}
	if got, _ := l.AbortedTransactions(0, 5, nil); len(got) != 0 {
		t.Fatalf("aborted after truncation %+v", got)
	}
	if p := l.Producers(); len(p) != 2 {
		t.Fatalf("producers %+v", p)
	}
	// Cut producer 8's batch as well: its state goes.
	if err := l.Truncate(3); err != nil {
		t.Fatal(err)
	}
	if p := l.Producers(); len(p) != 1 || p[0].ProducerID != 7 {
		t.Fatalf("producers %+v", p)
	}
}

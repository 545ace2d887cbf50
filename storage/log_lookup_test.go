package storage

import (
	"context"
	"errors"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/verbatim-kafka/verbatim/budget"
	"github.com/verbatim-kafka/verbatim/kbatch"
	"github.com/verbatim-kafka/verbatim/kbatch/kbatchtest"
)

// gzipBatch encodes n records at base (timestamps ts, ts+1, ...) with gzip.
func gzipBatch(t *testing.T, base, ts int64, n int) []byte {
	t.Helper()
	recs := make([]kbatch.Record, n)
	for i := range recs {
		recs[i] = kbatch.Record{OffsetDelta: int32(i), TimestampDelta: int64(i), Value: make([]byte, 1000)}
	}
	b := kbatch.NewBatch(ts, recs...)
	b.BaseOffset, b.LeaderEpoch, b.Attributes = base, 3, int16(kbatch.CodecGzip)
	return kbatchtest.Encode(t, b)
}

// A verbatim append stores a batch whose compressed payload is not valid
// gzip; lookups that must look into it fail with a CorruptBatchError naming
// its offset, lookups that need not still answer, and the log stays open.
func TestLookupOverUndecodableBatch(t *testing.T) {
	l := openLog(t, NewMemFS(), Config{})
	defer l.Close()
	good := gzipBatch(t, 0, 1000, 3)
	bad := gzipBatch(t, 3, 2000, 3)
	for i := kbatch.HeaderSize + 12; i < len(bad); i++ {
		bad[i] = 0xff
	}
	kbatch.SetCRC(bad)
	if _, err := l.AppendVerbatim(append(append([]byte(nil), good...), bad...)); err != nil {
		t.Fatal(err)
	}
	if r, err := l.OffsetForTimestamp(context.Background(), 1001); err != nil || r.Offset != 1 || r.LeaderEpoch != 3 {
		t.Fatalf("lookup in the good batch: %+v %v", r, err)
	}
	for name, lookup := range map[string]func() error{
		"timestamp": func() error { _, err := l.OffsetForTimestamp(context.Background(), 1500); return err },
		"max":       func() error { _, _, err := l.MaxTimestamp(context.Background()); return err },
	} {
		err := lookup()
		var cb *CorruptBatchError
		if !errors.As(err, &cb) || cb.Offset != 3 || !errors.Is(err, ErrUndecodableBatch) {
			t.Fatalf("%s lookup into the undecodable batch: %v, want a CorruptBatchError at offset 3", name, err)
		}
	}
	if l.Offline() != nil {
		t.Fatalf("an undecodable stored batch took the log offline: %v", l.Offline())
	}
}

// Lookups charge the decode budget before reading their batch: with the
// budget held elsewhere a lookup waits (it does not read or decode), and
// once the budget is free it answers and gives back what it took.
func TestLookupWaitsForDecodeBudget(t *testing.T) {
	bud := budget.New(1 << 20)
	l := openLog(t, NewMemFS(), Config{DecodeBudget: bud})
	defer l.Close()
	if _, err := l.AppendVerbatim(gzipBatch(t, 0, 1000, 10)); err != nil {
		t.Fatal(err)
	}
	if err := bud.Acquire(context.Background(), bud.Limit()); err != nil {
		t.Fatal(err)
	}
	type answer struct {
		r   TimestampOffset
		err error
	}
	done := make(chan answer, 1)
	go func() {
		r, err := l.OffsetForTimestamp(context.Background(), 1005)
		done <- answer{r, err}
	}()
	deadline := time.Now().Add(20 * time.Second)
	for bud.Waiting() != 1 {
		if time.Now().After(deadline) {
			t.Fatal("the lookup never queued for the decode budget")
		}
		time.Sleep(time.Millisecond)
	}
	select {
	case a := <-done:
		t.Fatalf("the lookup answered while the budget was held: %+v", a)
	default:
	}
	// The log is not locked by the waiting lookup: appends go on.
	if _, err := l.AppendVerbatim(gzipBatch(t, 10, 3000, 1)); err != nil {
		t.Fatal(err)
	}
	bud.Release(bud.Limit())
	a := <-done
	if a.err != nil || a.r.Offset != 5 || a.r.Timestamp != 1005 {
		t.Fatalf("lookup after the budget was freed: %+v %v", a.r, a.err)
	}
	if n := bud.InUse(); n != 0 {
		t.Fatalf("%d budget bytes still held after the lookup", n)
	}
	// A lookup whose context ends while waiting gives up with its error.
	if err := bud.Acquire(context.Background(), bud.Limit()); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel()
	if _, _, err := l.MaxTimestamp(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("MaxTimestamp with the budget held past its deadline: %v", err)
	}
	bud.Release(bud.Limit())
}

// OnOffline is called once when the partition goes offline.
func TestOnOfflineCalledOnce(t *testing.T) {
	fs := NewMemFS()
	var mu sync.Mutex
	var calls []error
	l := openLog(t, fs, Config{Flush: FlushAlways, OnOffline: func(err error) {
		mu.Lock()
		calls = append(calls, err)
		mu.Unlock()
	}})
	defer l.Close()
	fs.SetFault(func(op Op, name string) Fault {
		if op == OpSync {
			return Fault{Err: syscall.EIO}
		}
		return Fault{}
	})
	for i := range 3 {
		_, _ = l.AppendLeader(testBatch(t, 0, 1, 100, 1, 10), 1, 1)
		_ = l.WaitDurable(int64(i + 1))
	}
	fs.SetFault(nil)
	if l.Offline() == nil { // under the log's lock, after OnOffline ran
		t.Fatal("failed syncs did not take the log offline")
	}
	mu.Lock()
	defer mu.Unlock()
	if len(calls) != 1 || !errors.Is(calls[0], ErrOffline) {
		t.Fatalf("OnOffline calls: %v, want one with ErrOffline", calls)
	}
}

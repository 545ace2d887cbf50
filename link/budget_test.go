package link

import (
	"context"
	"testing"

	"github.com/verbatim-kafka/verbatim/kbatch"
	"github.com/verbatim-kafka/verbatim/kbatch/kbatchtest"
)

// batches encodes n batches of 10 records from offset base on.
func batches(t *testing.T, base int64, n int) []byte {
	t.Helper()
	var set []byte
	for i := range n {
		recs := make([]kbatch.Record, 10)
		for j := range recs {
			recs[j] = kbatch.Record{OffsetDelta: int32(j), Value: []byte("v")}
		}
		b := kbatch.NewBatch(1000, recs...)
		b.BaseOffset = base + int64(i)*10
		enc := kbatchtest.Encode(t, b)
		set = append(set, enc...)
	}
	return set
}

// A copy's deliveries are charged whole (a partial trailing batch too: its
// buffer is held) until the destination's log end passes their last whole
// batch, whatever sizes the appends had; a delivery with no whole batch at
// or after the offset charges nothing; the copy's end releases the rest.
func TestFetchBudgetLedger(t *testing.T) {
	b := newFetchBudget(1 << 20)
	l := newLedger(b)
	set := batches(t, 0, 3) // offsets 0-29
	partial := append(batches(t, 30, 1), batches(t, 40, 1)[:20]...)

	l.delivered(0, set)
	if got := b.inUse(); got != int64(len(set)) {
		t.Fatalf("after a delivery: %d in use, want %d", got, len(set))
	}
	l.appended(20) // two of the three batches appended: still held
	if got := b.inUse(); got != int64(len(set)) {
		t.Fatalf("log end 20 of 30: %d in use, want %d", got, len(set))
	}
	l.delivered(30, partial) // offsets 30-39 whole, a cut batch after it
	l.appended(30)
	if got := b.inUse(); got != int64(len(partial)) {
		t.Fatalf("log end 30: %d in use, want the second delivery's %d", got, len(partial))
	}
	l.delivered(40, batches(t, 30, 1)) // nothing at or after 40: the copy asks again
	l.delivered(40, nil)
	if got := b.inUse(); got != int64(len(partial)) {
		t.Fatalf("deliveries without a batch to append charged: %d in use", got)
	}
	l.close()
	if got := b.inUse(); got != 0 {
		t.Fatalf("after the copy ended: %d in use", got)
	}
	var none *ledger // a Source outside the buffer
	none.delivered(0, set)
	none.appended(30)
	none.close()
}

// A request waits for room in the buffer: a full buffer keeps it waiting
// (until its context ends), and releasing bytes lets it go with the room
// there is.
func TestFetchBudgetRoom(t *testing.T) {
	b := newFetchBudget(4 << 20)
	if room, err := b.room(context.Background()); err != nil || room != 4<<20 {
		t.Fatalf("empty buffer: room %d, %v", room, err)
	}
	b.take(4<<20 - 100)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := b.room(ctx); err == nil {
		t.Fatal("a request went out with 100 bytes of room")
	}
	got := make(chan int64, 1)
	go func() {
		room, _ := b.room(context.Background())
		got <- room
	}()
	b.give(2 << 20)
	if room := <-got; room != 2<<20+100 {
		t.Fatalf("after a release: room %d, want %d", room, 2<<20+100)
	}
	small := newFetchBudget(1000) // smaller than minFetchRoom: its whole size is enough
	if room, err := small.room(context.Background()); err != nil || room != 1000 {
		t.Fatalf("small buffer: room %d, %v", room, err)
	}
}

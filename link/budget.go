package link

// The link's fetch buffer: the bytes its sessions delivered to copies and
// the destination has not appended yet are bounded, so storage pushes back
// on the fetchers. Without it a link of many partitions fetches at the
// source's speed while the appends fall behind, and the fetched responses
// pile up in memory (1,000 partitions held over 1 GB, and the collector,
// held under the serve's memory limit, ran without pause).

import (
	"context"
	"sync"

	"github.com/verbatim-kafka/verbatim/kbatch"
	"github.com/verbatim-kafka/verbatim/mirror"
)

const (
	// defaultBufferBytes is a link's fetch buffer: two full responses, so
	// one is fetched while the other is appended.
	defaultBufferBytes = 64 << 20
	// minFetchRoom is the least room a request is sent with (Kafka
	// answers at least one whole batch anyway).
	minFetchRoom = 1 << 20
)

// fetchBudget counts the bytes delivered and not yet appended.
type fetchBudget struct {
	limit   int64
	mu      sync.Mutex
	used    int64
	changed chan struct{} // closed when used falls
}

func newFetchBudget(limit int64) *fetchBudget {
	return &fetchBudget{limit: limit, changed: make(chan struct{})}
}

// room waits until at least minFetchRoom bytes (or the whole limit, when
// smaller) are free and returns how many are.
func (b *fetchBudget) room(ctx context.Context) (int64, error) {
	for {
		b.mu.Lock()
		free, ch := b.limit-b.used, b.changed
		b.mu.Unlock()
		if free >= min(minFetchRoom, b.limit) {
			return free, nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return 0, ctx.Err()
		}
	}
}

func (b *fetchBudget) take(n int64) {
	b.mu.Lock()
	b.used += n
	b.mu.Unlock()
}

func (b *fetchBudget) give(n int64) {
	if n == 0 {
		return
	}
	b.mu.Lock()
	b.used -= n
	close(b.changed)
	b.changed = make(chan struct{})
	b.mu.Unlock()
}

func (b *fetchBudget) inUse() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.used
}

// ledger is one copy's share of the budget: what was delivered to it, by
// the offset its destination must reach for the bytes to be appended.
// Bytes are released by the destination's progress (not by matching
// sizes, so a chunk fetched twice or cut differently cannot leak), and
// all of them when the copy ends.
type ledger struct {
	b  *fetchBudget
	mu sync.Mutex
	q  []charge // by end offset
}

type charge struct {
	end int64 // the destination holds the bytes once its log end is here
	n   int64
}

func newLedger(b *fetchBudget) *ledger { return &ledger{b: b} }

// delivered charges records fetched from offset: the whole record set
// (its buffer is held), until the log end passes its last whole batch.
// A set without a whole batch at or after offset charges nothing: the copy
// fetches it again.
func (l *ledger) delivered(offset int64, records []byte) {
	if l == nil || len(records) == 0 {
		return
	}
	end := int64(-1)
	for set := records; len(set) > 0; {
		b, rest, err := kbatch.Next(set)
		if err != nil || b == nil || len(b) < kbatch.HeaderSize {
			break
		}
		end = mirror.LastOffset(b) + 1
		set = rest
	}
	if end <= offset {
		return
	}
	n := int64(len(records))
	l.b.take(n)
	l.mu.Lock()
	l.q = append(l.q, charge{end: end, n: n})
	l.mu.Unlock()
}

// appended releases what the destination holds now that its log ends at
// end.
func (l *ledger) appended(end int64) {
	if l == nil {
		return
	}
	var n int64
	l.mu.Lock()
	i := 0
	for i < len(l.q) && l.q[i].end <= end {
		n += l.q[i].n
		i++
	}
	l.q = l.q[i:]
	l.mu.Unlock()
	l.b.give(n)
}

// close releases everything (the copy ended).
func (l *ledger) close() {
	if l == nil {
		return
	}
	var n int64
	l.mu.Lock()
	for _, c := range l.q {
		n += c.n
	}
	l.q = nil
	l.mu.Unlock()
	l.b.give(n)
}

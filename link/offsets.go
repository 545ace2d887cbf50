package link

// Coalescing the copies' ListOffsets. Every partition copy asks its
// source leader for offsets when it starts (the high watermark it catches
// up to, the log start it forwards), one partition at a time. A broker
// serves one request of a connection at a time, so a thousand copies
// starting together over the cluster's one admin connection to a broker
// waited for two thousand round trips in turn. An offsetBatcher sends
// what was asked while a request was out as the next request, all
// partitions in one (the group commit of a log: no timer, and a lone ask
// is sent at once).

import (
	"context"
	"sync"

	"github.com/verbatim-kafka/verbatim/client"
)

// offsetAsk is one caller's question and, once done is closed, its answer.
type offsetAsk struct {
	q    client.OffsetQuery
	ans  client.OffsetAnswer
	err  error
	done chan struct{}
}

// offsetSend asks one broker for qs in one request: the answers and the
// per-partition errors in qs's order, or the request's own failure.
type offsetSend func(ctx context.Context, qs []client.OffsetQuery) ([]client.OffsetAnswer, []error, error)

// offsetBatcher coalesces the ListOffsets to one broker.
type offsetBatcher struct {
	send offsetSend

	mu      sync.Mutex
	pending []*offsetAsk
	busy    bool // a goroutine is sending; it takes pending when its request ends
}

// ask queues q and waits for its answer or ctx. A caller that gives up
// leaves its question in the request, which answers it to no one.
func (b *offsetBatcher) ask(ctx context.Context, q client.OffsetQuery) (client.OffsetAnswer, error) {
	k := &offsetAsk{q: q, done: make(chan struct{})}
	b.mu.Lock()
	b.pending = append(b.pending, k)
	if !b.busy {
		b.busy = true
		go b.run()
	}
	b.mu.Unlock()
	select {
	case <-k.done:
		return k.ans, k.err
	case <-ctx.Done():
		return client.OffsetAnswer{}, ctx.Err()
	}
}

// run sends requests until nothing is pending.
func (b *offsetBatcher) run() {
	for {
		b.mu.Lock()
		batch := b.next()
		if len(batch) == 0 {
			b.busy = false
			b.mu.Unlock()
			return
		}
		b.mu.Unlock()
		qs := make([]client.OffsetQuery, len(batch))
		for i, k := range batch {
			qs[i] = k.q
		}
		// The request is every asker's, so no one caller's context
		// bounds it; closing the source fails its connections.
		ctx, cancel := context.WithTimeout(context.Background(), requestTimeout)
		as, errs, err := b.send(ctx, qs)
		cancel()
		for i, k := range batch {
			if err != nil {
				k.err = err
			} else {
				k.ans, k.err = as[i], errs[i]
			}
			close(k.done)
		}
	}
}

// next takes the pending questions for one request: each partition once
// (Kafka refuses a partition named twice), the rest left for the next.
// REQUIRES: b.mu.
func (b *offsetBatcher) next() []*offsetAsk {
	var batch, rest []*offsetAsk
	seen := make(map[client.TopicPartition]bool, len(b.pending))
	for _, k := range b.pending {
		if seen[k.q.TopicPartition] {
			rest = append(rest, k)
			continue
		}
		seen[k.q.TopicPartition] = true
		batch = append(batch, k)
	}
	b.pending = rest
	return batch
}

// offsetBatchers is one offsetBatcher per broker address.
type offsetBatchers struct {
	send func(ctx context.Context, addr string, qs []client.OffsetQuery) ([]client.OffsetAnswer, []error, error)

	mu sync.Mutex
	by map[string]*offsetBatcher
}

func newOffsetBatchers(send func(ctx context.Context, addr string, qs []client.OffsetQuery) ([]client.OffsetAnswer, []error, error)) *offsetBatchers {
	return &offsetBatchers{send: send, by: map[string]*offsetBatcher{}}
}

// ask is tp's offset at ts on the broker at addr, in a request shared
// with the partitions asked about meanwhile.
func (o *offsetBatchers) ask(ctx context.Context, addr string, tp client.TopicPartition, ts int64) (client.OffsetAnswer, error) {
	o.mu.Lock()
	b := o.by[addr]
	if b == nil {
		b = &offsetBatcher{send: func(ctx context.Context, qs []client.OffsetQuery) ([]client.OffsetAnswer, []error, error) {
			return o.send(ctx, addr, qs)
		}}
		o.by[addr] = b
	}
	o.mu.Unlock()
	return b.ask(ctx, client.OffsetQuery{TopicPartition: tp, Timestamp: ts})
}

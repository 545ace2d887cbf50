package link

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/verbatim-kafka/verbatim/client"
)

// fakeOffsets answers every partition with offset partition*100+ts (and
// partition 99 with a partition error), holding each request until
// release, and records what each request asked.
type fakeOffsets struct {
	mu      sync.Mutex
	reqs    [][]client.OffsetQuery
	started chan struct{}
	release chan struct{}
	fail    error // the request's own failure
}

func (f *fakeOffsets) send(_ context.Context, addr string, qs []client.OffsetQuery) ([]client.OffsetAnswer, []error, error) {
	f.mu.Lock()
	f.reqs = append(f.reqs, append([]client.OffsetQuery(nil), qs...))
	f.mu.Unlock()
	f.started <- struct{}{}
	<-f.release
	if f.fail != nil {
		return nil, nil, f.fail
	}
	as, errs := make([]client.OffsetAnswer, len(qs)), make([]error, len(qs))
	for i, q := range qs {
		if q.Partition == 99 {
			errs[i] = fmt.Errorf("partition %d on %s: refused", q.Partition, addr)
			continue
		}
		as[i] = client.OffsetAnswer{Offset: int64(q.Partition)*100 + q.Timestamp}
	}
	return as, errs, nil
}

func newFakeOffsets() *fakeOffsets {
	return &fakeOffsets{started: make(chan struct{}, 100), release: make(chan struct{}, 100)}
}

type offsetResult struct {
	q   client.OffsetQuery
	ans client.OffsetAnswer
	err error
}

// askAll asks qs concurrently and returns their results on a channel.
func askAll(o *offsetBatchers, addr string, qs []client.OffsetQuery) chan offsetResult {
	out := make(chan offsetResult, len(qs))
	for _, q := range qs {
		go func() {
			a, err := o.ask(context.Background(), addr, q.TopicPartition, q.Timestamp)
			out <- offsetResult{q, a, err}
		}()
	}
	return out
}

// TestOffsetBatcherCoalesces: asks that arrive while a request is out go
// in the next request together, each answered with its own partition's
// answer; a partition asked twice at once goes in separate requests
// (Kafka refuses a partition named twice).
func TestOffsetBatcherCoalesces(t *testing.T) {
	f := newFakeOffsets()
	o := newOffsetBatchers(f.send)
	first := askAll(o, "b1", []client.OffsetQuery{{TopicPartition: client.TopicPartition{Topic: "t", Partition: 0}, Timestamp: client.Latest}})
	<-f.started // the first request is out
	var qs []client.OffsetQuery
	for p := int32(1); p <= 50; p++ {
		qs = append(qs, client.OffsetQuery{TopicPartition: client.TopicPartition{Topic: "t", Partition: p}, Timestamp: client.Latest})
	}
	qs = append(qs, client.OffsetQuery{TopicPartition: client.TopicPartition{Topic: "t", Partition: 7}, Timestamp: client.Earliest})
	rest := askAll(o, "b1", qs)
	// Let every ask queue behind the first request.
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
		b := o.by["b1"]
		b.mu.Lock()
		n := len(b.pending)
		b.mu.Unlock()
		if n == len(qs) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d asks queued", n, len(qs))
		}
	}
	for range 3 {
		f.release <- struct{}{}
	}
	check := func(r offsetResult) {
		t.Helper()
		if want := int64(r.q.Partition)*100 + r.q.Timestamp; r.err != nil || r.ans.Offset != want {
			t.Errorf("%s/%d at %d: %+v %v, want offset %d", r.q.Topic, r.q.Partition, r.q.Timestamp, r.ans, r.err, want)
		}
	}
	check(<-first)
	for range qs {
		check(<-rest)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.reqs) != 3 || len(f.reqs[0]) != 1 || len(f.reqs[1]) != 50 || len(f.reqs[2]) != 1 {
		sizes := []int{}
		for _, r := range f.reqs {
			sizes = append(sizes, len(r))
		}
		t.Fatalf("requests of %v partitions, want [1 50 1]: the 50 partitions asked meanwhile in one, t/7's second ask in the next", sizes)
	}
	// Whichever of t/7's asks queued first went in the second request.
	ts7 := map[int64]bool{f.reqs[2][0].Timestamp: true}
	for _, q := range f.reqs[1] {
		if q.Partition == 7 {
			ts7[q.Timestamp] = true
		}
	}
	if q := f.reqs[2][0]; q.Partition != 7 || !ts7[client.Earliest] || !ts7[client.Latest] {
		t.Fatalf("third request %+v, second %+v: want t/7 at LATEST in one and at EARLIEST in the other", q, f.reqs[1])
	}
}

// TestOffsetBatcherErrors: a partition's error is its asker's alone; a
// request's failure is every asker's in it; a caller that gives up
// returns at once and the others are still answered; each broker has its
// own requests.
func TestOffsetBatcherErrors(t *testing.T) {
	f := newFakeOffsets()
	o := newOffsetBatchers(f.send)
	tp := func(p int32) client.TopicPartition { return client.TopicPartition{Topic: "t", Partition: p} }
	ctx, cancel := context.WithCancel(context.Background())
	gaveUp := make(chan error, 1)
	go func() {
		_, err := o.ask(ctx, "b1", tp(1), client.Latest)
		gaveUp <- err
	}()
	<-f.started
	res := askAll(o, "b1", []client.OffsetQuery{{TopicPartition: tp(99), Timestamp: client.Latest}, {TopicPartition: tp(2), Timestamp: client.Latest}})
	other := askAll(o, "b2", []client.OffsetQuery{{TopicPartition: tp(3), Timestamp: client.Latest}})
	<-f.started // b2's own request, not behind b1's
	cancel()
	if err := <-gaveUp; !errors.Is(err, context.Canceled) {
		t.Fatalf("the caller that gave up: %v", err)
	}
	f.release <- struct{}{}
	f.release <- struct{}{}
	if r := <-other; r.err != nil || r.ans.Offset != 299 {
		t.Fatalf("b2's t/3: %+v", r)
	}
	<-f.started
	f.release <- struct{}{}
	for range 2 {
		r := <-res
		switch r.q.Partition {
		case 99:
			if r.err == nil {
				t.Errorf("t/99 answered %+v, want its partition error", r.ans)
			}
		case 2:
			if r.err != nil || r.ans.Offset != 199 {
				t.Errorf("t/2: %+v %v", r.ans, r.err)
			}
		}
	}
	f.fail = errors.New("connection reset")
	res = askAll(o, "b1", []client.OffsetQuery{{TopicPartition: tp(4), Timestamp: client.Latest}})
	<-f.started
	f.release <- struct{}{}
	if r := <-res; r.err == nil || r.err.Error() != "connection reset" {
		t.Fatalf("t/4 after a failed request: %+v %v", r.ans, r.err)
	}
}

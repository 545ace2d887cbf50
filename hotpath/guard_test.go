package hotpath

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/verbatim-kafka/verbatim/storage"
)

// recordingGuard logs its calls into a shared trace; refuse makes Begin
// fail.
type recordingGuard struct {
	name   string
	log    *fakeLog
	trace  *[]string
	mu     *sync.Mutex
	refuse bool
}

var errRefused = errors.New("refused")

func (g *recordingGuard) Begin() error {
	g.mu.Lock()
	defer g.mu.Unlock()
	*g.trace = append(*g.trace, fmt.Sprintf("begin %s leo=%d", g.name, g.log.LogEndOffset()))
	if g.refuse {
		return errRefused
	}
	return nil
}

func (g *recordingGuard) End(res *storage.AppendResult, err error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	*g.trace = append(*g.trace, fmt.Sprintf("end %s first=%d err=%v", g.name, res.FirstOffset, err))
}

// A guard runs immediately around its own append, in queue order, for
// appends written inline and by the owner alike; a refusal fails the
// append unwritten and skips End.
func TestQueueGuardBracketsEachAppend(t *testing.T) {
	f := &fakeLog{gate: make(chan struct{})}
	p := NewPartition(f, QueueConfig{Depth: 16, MaxCoalesce: 16})
	defer p.Close()
	appends := verbatimAppends(t, 4, false)
	var trace []string
	var mu sync.Mutex
	for i, a := range appends {
		a.Guard = &recordingGuard{name: fmt.Sprint(i), log: f, trace: &trace, mu: &mu, refuse: i == 2}
	}
	// The third append is refused, so the fourth (based at 6) finds the
	// log end at 4.
	queueWhileBlocked(t, p, f.gate, NewGroup(), appends)
	want := []string{
		"begin 0 leo=0", "end 0 first=0 err=<nil>",
		"begin 1 leo=2", "end 1 first=2 err=<nil>",
		"begin 2 leo=4",
		"begin 3 leo=4", "end 3 first=6 err=<nil>",
	}
	if fmt.Sprint(trace) != fmt.Sprint(want) {
		t.Fatalf("guard calls\n%q\nwant\n%q", trace, want)
	}
	if f.calls != 3 {
		t.Fatalf("%d appends written, want 3 (the refused one unwritten)", f.calls)
	}
	if !errors.Is(appends[2].Err, errRefused) {
		t.Fatalf("refused append: %v", appends[2].Err)
	}
}

// Group.Reset makes a group reusable even after a round that was never
// completed (a submit that failed after Add).
func TestGroupReset(t *testing.T) {
	var g Group
	g.Reset()
	g.Add(1)
	g.Reset() // the append was never submitted
	f := &fakeLog{}
	p := NewPartition(f, QueueConfig{})
	defer p.Close()
	a := &Append{Set: clientBatch(t, 1, 1)}
	g.Add(1)
	if err := p.Submit(context.Background(), &g, a); err != nil {
		t.Fatal(err)
	}
	g.Wait()
	g.Reset()
	select {
	case <-g.Done():
		t.Fatal("a reset group signalled")
	default:
	}
	if a.Err != nil {
		t.Fatal(a.Err)
	}
}

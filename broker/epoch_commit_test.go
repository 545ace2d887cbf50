package broker

import (
	"sync"
	"testing"
)

// TestLeaderEpochGroupCommit: many partitions raising their leader
// epochs at once (a link's first appends) each return only once a
// metadata write covers their raise, and every raise survives a restart.
func TestLeaderEpochGroupCommit(t *testing.T) {
	dir := t.TempDir()
	b := startBroker(t, dir, nil)
	createTopic(t, b, "e", 64, nil)
	tp := b.srv.Topic("e")
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for _, p := range tp.Partitions() {
		wg.Add(1)
		go func(p *Partition) {
			defer wg.Done()
			if err := b.srv.SetLeaderEpochAtLeast(p, 10+p.Index); err != nil {
				errs <- err
			}
		}(p)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	b.stop()
	b = startBroker(t, dir, nil)
	for _, p := range b.srv.Topic("e").Partitions() {
		if got := p.LeaderEpoch(); got != 10+p.Index {
			t.Fatalf("partition %d: leader epoch %d after restart, want %d", p.Index, got, 10+p.Index)
		}
	}
}

package groupcoord

// Writes to __consumer_offsets, in the shape of etcd raft's Ready/Advance:
// a request mutates the in-memory state under c.mu and queues the records
// that make the change durable together with an advance function (what to
// do once the append has succeeded or failed, including the answer); a
// driver appends the queued records with c.mu released, in queue order,
// and then runs each advance under c.mu. No lock of the coordinator is held
// while the log appends, so the log may call back into the coordinator.
//
// Appends happen in the order their writes were queued, which is the
// order the state changed in, so a replay of the log rebuilds the state
// the coordinator had. Exactly one goroutine drives at a time (driving),
// without a lock held across the append: whoever queues a write and finds
// no driver becomes the driver until the queue is empty.

import (
	"time"

	"github.com/verbatim-kafka/verbatim/coordlog"
)

type write struct {
	g     *group
	part  int32
	recs  []coordlog.Record
	batch coordlog.Batch
	now   time.Time
	// advance runs under c.mu with the outcome of the append.
	advance func(err error)
	// done is closed once advance has run.
	done chan struct{}
}

// queue adds a write of recs for g; called with c.mu held. advance may be
// nil (nothing to do either way).
func (c *Coordinator) queue(g *group, recs []coordlog.Record, how coordlog.Batch, now time.Time, advance func(err error)) *write {
	w := &write{g: g, part: c.PartitionFor(g.id), recs: recs, batch: how, now: now, advance: advance, done: make(chan struct{})}
	g.inflight++
	c.outbox = append(c.outbox, w)
	return w
}

// lastQueued is the newest queued write, nil if there is none; called with
// c.mu held.
func (c *Coordinator) lastQueued() *write {
	if len(c.outbox) == 0 {
		return nil
	}
	return c.outbox[len(c.outbox)-1]
}

// queuedSince is the newest write queued after the queue held n writes
// ahead of it, or nil; called with c.mu held. A request notes
// len(c.outbox) before it changes state and waits for queuedSince after.
func (c *Coordinator) queuedSince(n int) *write {
	if len(c.outbox) > n {
		return c.outbox[len(c.outbox)-1]
	}
	return nil
}

// run runs fn under c.mu with the time of the request, then appends what
// it queued and returns once that is appended and advanced.
func (c *Coordinator) run(fn func(now time.Time)) {
	now := c.clock.Now()
	c.mu.Lock()
	n := len(c.outbox)
	fn(now)
	w := c.queuedSince(n)
	c.mu.Unlock()
	c.await(w)
}

// await drives the queue and returns once w (and so every write queued
// before it) is appended and advanced; w nil returns at once. Called
// without c.mu.
func (c *Coordinator) await(w *write) {
	if w == nil {
		return
	}
	c.drive()
	<-w.done
}

// drive appends queued writes until the queue is empty, unless another
// goroutine already does. Called without c.mu.
func (c *Coordinator) drive() {
	c.mu.Lock()
	if c.driving {
		c.mu.Unlock()
		return
	}
	c.driving = true
	for len(c.outbox) > 0 {
		w := c.outbox[0]
		c.outbox[0] = nil
		c.outbox = c.outbox[1:]
		c.mu.Unlock()
		err := c.log.Append(coordlog.OffsetsTopic, w.part, w.recs, w.batch, w.now)
		c.mu.Lock()
		w.g.inflight--
		if w.advance != nil {
			w.advance(err)
		}
		close(w.done)
	}
	c.driving = false
	c.mu.Unlock()
}

// writeFailed logs a write of the group's records that failed (what: the
// change it carried), once: at ERROR, since it is a storage error, with
// the group's __consumer_offsets partition.
func (c *Coordinator) writeFailed(what, groupID string, err error) {
	c.lg.Error("group coordinator write failed", "what", what, "topic", coordlog.OffsetsTopic, "partition", c.PartitionFor(groupID), "group", groupID, "err", err)
}

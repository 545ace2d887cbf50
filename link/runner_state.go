package link

// A runner's changes to its persisted link meta: a partition's failure and
// its clearing, pause and resume. Each is applied to a copy and saved; on a
// cluster a save that lost a compare-and-swap is applied again to the
// stored state.

import (
	"context"
	"errors"

	"github.com/verbatim-kafka/verbatim/broker"
)

// update applies fn to a copy of the persisted state, persists it and
// makes it current.
func (r *runner) update(fn func(lm *linkMeta)) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.updateLocked(fn)
}

// On a cluster a save that conflicts with another broker's change
// re-reads the stored state and applies fn to it again.
func (r *runner) updateLocked(fn func(lm *linkMeta)) error {
	for attempt := 0; ; attempt++ {
		next := r.meta.clone()
		fn(next)
		err := r.m.store.save(next)
		if err == nil {
			r.meta = next
			return nil
		}
		if !errors.Is(err, errConflict) || attempt == casRetries {
			return err
		}
		cur, lerr := r.m.store.loadFresh(r.name, true)
		if lerr != nil {
			return lerr
		}
		r.meta = cur
	}
}

// failPartition puts a partition in FAILED with reason (persisted) and
// ends its copy: link-sync calls it for a source topic deleted or
// re-created.
func (r *runner) failPartition(topic string, partition int32, reason string) {
	r.fail(topic, partition, failure{Reason: reason, Divergence: -1})
	r.mu.Lock()
	var pr *partRun
	if ps := r.parts[topic]; int(partition) < len(ps) {
		pr = ps[partition]
	}
	r.mu.Unlock()
	if pr != nil {
		pr.halt()
	}
}

// fail persists a partition's failure.
func (r *runner) fail(topic string, partition int32, f failure) {
	err := r.update(func(lm *linkMeta) {
		tm := lm.topic(topic)
		if tm.Failed == nil {
			tm.Failed = map[int32]failure{}
		}
		tm.Failed[partition] = f
	})
	if err != nil {
		r.log.Error("persisting a partition's failure", "topic", topic, "partition", partition, "err", err)
	}
	r.log.Warn("mirror partition failed", "topic", topic, "partition", partition, "reason", f.Reason)
}

// clearFailure forgets a partition's failure (persisted).
func (r *runner) clearFailure(topic string, partition int32) error {
	return r.clearFailures([]broker.LinkPartition{{Topic: topic, Partition: partition}})
}

// clearFailures forgets the failures of ps in one persisted update, and
// writes nothing when none of them has one (every copy's start clears
// its partition's failure: a link starting a thousand copies must not
// rewrite its meta file a thousand times).
func (r *runner) clearFailures(ps []broker.LinkPartition) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	failed := false
	for _, p := range ps {
		if tm := r.meta.Topics[p.Topic]; tm != nil {
			if _, ok := tm.Failed[p.Partition]; ok {
				failed = true
				break
			}
		}
	}
	if !failed {
		return nil
	}
	return r.updateLocked(func(lm *linkMeta) {
		for _, p := range ps {
			if tm := lm.Topics[p.Topic]; tm != nil {
				delete(tm.Failed, p.Partition)
			}
		}
	})
}

// setPaused pauses or resumes topic (persisted); pausing ends its copies,
// resuming starts them again (failures an operator must clear except
// divergence are cleared too).
func (r *runner) setPaused(ctx context.Context, topic string, pause bool) error {
	err := r.update(func(lm *linkMeta) {
		tm := lm.topic(topic)
		tm.Paused = pause
		if !pause {
			for p, f := range tm.Failed {
				if f.Divergence < 0 {
					delete(tm.Failed, p)
				}
			}
		}
	})
	if err != nil {
		return err
	}
	r.mu.Lock()
	ps := append([]*partRun(nil), r.parts[topic]...)
	r.mu.Unlock()
	if pause {
		for _, pr := range ps {
			pr.halt()
		}
		return nil
	}
	r.poke()
	return nil
}

package broker

// Topic creations in a batch (a link's discovery of a source's topics:
// link_data.go's CreatePullTopics) and the opening of new partitions'
// logs, which both single-topic and batch creations share.

import (
	"fmt"
	"sync"
	"sync/atomic"
)

// topicCreate is one topic of createTopics.
type topicCreate struct {
	name       string
	partitions int32
	cfg        *TopicConfig
	// id is the topic id to keep (a mirror's source's); zero: a fresh one.
	id [16]byte
}

// createTopics creates every topic of cs it can, each checked as
// createTopicWithID checks one (also against those before it in cs), with
// one metadata write for all: ts[i] is topic i created, errs[i] its
// refusal. A failed write fails every topic it would have created. In
// cluster mode each topic is its own store write, as createTopic's.
func (c *cluster) createTopics(cs []topicCreate) (ts []*Topic, errs []error) {
	ts, errs = make([]*Topic, len(cs)), make([]error, len(cs))
	for i, tc := range cs {
		errs[i] = validateTopicName(tc.name)
	}
	if c.remote != nil {
		for i, tc := range cs {
			if errs[i] == nil {
				ts[i], errs[i] = c.remote.createTopic(tc.name, tc.partitions, tc.cfg, false, tc.id, placement{})
			}
		}
		return ts, errs
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	n := c.cloneSnap()
	var parts []*Partition
	for i, tc := range cs {
		if errs[i] != nil {
			continue
		}
		t, err := c.newTopicLocked(n, tc.name, tc.partitions, tc.cfg, tc.id)
		if err != nil {
			errs[i] = err
			continue
		}
		n.byName[t.Name], n.byID[t.ID] = t, t
		ts[i] = t
		parts = append(parts, t.Partitions()...)
	}
	if len(parts) == 0 {
		return ts, errs
	}
	if err := c.persistLocked(n); err != nil {
		for i := range ts {
			if ts[i] != nil {
				ts[i], errs[i] = nil, fmt.Errorf("%w: persisting topic metadata: %v", errStorage, err)
			}
		}
		return ts, errs
	}
	c.openLogs(parts)
	c.snap.Store(n)
	return ts, errs
}

// openLogWorkers bounds the logs opened at once: a new log's segment
// costs a directory sync, which the file system commits together for
// concurrent ones (a thousand partitions created at once).
const openLogWorkers = 8

// openLogs attaches logs to new partitions, a few at a time; a failure
// leaves that partition offline (KAFKA_STORAGE_ERROR) rather than failing
// the request.
func (c *cluster) openLogs(parts []*Partition) {
	if c.openLog == nil {
		return
	}
	var next atomic.Int64
	var wg sync.WaitGroup
	for w := 0; w < min(len(parts), openLogWorkers); w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := int(next.Add(1)) - 1; i < len(parts); i = int(next.Add(1)) - 1 {
				p := parts[i]
				if err := c.openLog(p); err != nil {
					c.log.Error("partition offline: its log does not open", "topic", p.Topic.Name, "partition", p.Index, "err", err)
				}
			}
		}()
	}
	wg.Wait()
}

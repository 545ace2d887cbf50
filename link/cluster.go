package link

// Links on a replicated cluster (docs/cluster.md "Cluster links on a
// cluster"). Every broker runs the link manager and every link; what each
// broker does of a link follows the cluster:
//
//   - the definitions and per-topic state are the cluster store's records
//     (state.go: read with a version, written only over it, re-read and
//     re-applied on a conflict), so a link created, paused or failed
//     through one broker is every broker's;
//   - a partition's copy runs on the broker that leads the destination
//     partition (clusterHost.LinkLeads) and moves with the leadership: a
//     copy that loses it ends without a failure, the new leader's starts
//     from its own log end (a prefix of the source's: every replica holds
//     the source's bytes);
//   - the cluster-wide work (discovery, topic creation, partition growth,
//     source deletion and re-creation, config sync) runs on the link
//     coordinator: the controller's broker (clusterHost.LinkCoordinator);
//     a group's offsets are synced by the broker coordinating the group;
//   - the manager follows the cluster (follow): after each snapshot the
//     broker applied it starts and stops links as the index says, adopts
//     other brokers' changes to a link's state (a pause ends the copies
//     here too, a resume starts them), and starts or ends copies as
//     leaderships move.

import (
	"context"
	"errors"
	"io/fs"
	"time"
)

// clusterHost is what a link needs of a broker that is one of a
// cluster's (broker/link_cluster.go); a Host that does not implement it,
// or reports LinkClustered false, is a single node.
type clusterHost interface {
	LinkClustered() bool
	// LinkLeads reports whether this broker leads the destination
	// partition.
	LinkLeads(topic string, partition int32) bool
	// LinkCoordinator reports whether this broker runs the links'
	// cluster-wide work.
	LinkCoordinator() bool
	// ClusterApplied is closed once the broker applied its next cluster
	// snapshot.
	ClusterApplied() <-chan struct{}
	// ReadLinkMetaVersion, WriteLinkMetaIf and RemoveLinkMetaIf are the
	// versioned link meta records (broker.ErrLinkMetaConflict).
	ReadLinkMetaVersion(ctx context.Context, name string, fresh bool) ([]byte, int64, error)
	WriteLinkMetaIf(ctx context.Context, name string, data []byte, version int64) (int64, error)
	RemoveLinkMetaIf(ctx context.Context, name string, version int64) error
}

// clusterOf returns h's cluster side, nil on a single node.
func clusterOf(h Host) clusterHost {
	if c, ok := h.(clusterHost); ok && c.LinkClustered() {
		return c
	}
	return nil
}

// leads reports whether this broker runs topic's partition's copy: its
// destination leader (always on a single node).
func (m *Manager) leads(topic string, partition int32) bool {
	return m.cluster == nil || m.cluster.LinkLeads(topic, partition)
}

// coordinator reports whether this broker does the links' cluster-wide
// work (always on a single node).
func (m *Manager) coordinator() bool {
	return m.cluster == nil || m.cluster.LinkCoordinator()
}

// followEvery bounds how often the manager re-reads the cluster (the
// snapshots of a busy cluster come much faster) and how long it waits
// without one.
const (
	followMinGap = 100 * time.Millisecond
	followMaxGap = 2 * time.Second
)

// follow runs until ctx ends: after each cluster snapshot applied (at
// most every followMinGap, at least every followMaxGap) it brings the
// running links in line with the cluster (reconcile).
func (m *Manager) follow(ctx context.Context) {
	defer close(m.followDone)
	for {
		ch := m.cluster.ClusterApplied()
		m.reconcile()
		t := time.NewTimer(followMaxGap)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-ch:
		case <-t.C:
		}
		t.Stop()
		select {
		case <-ctx.Done():
			return
		case <-time.After(followMinGap):
		}
	}
}

// reconcile starts the links the index names that do not run here,
// stops those it no longer names, adopts the stored state of the others
// when another broker changed it, and starts or ends copies where the
// leadership moved.
func (m *Manager) reconcile() {
	names, err := m.store.names()
	if err != nil {
		m.log.Warn("reading the cluster links' index", "err", err)
		return
	}
	want := make(map[string]bool, len(names))
	for _, n := range names {
		want[n] = true
	}
	// New links' runners are made outside the lock (making one may dial
	// the source's bootstrap addresses), then installed if still absent.
	m.mu.Lock()
	var missing []string
	for _, n := range names {
		if m.links[n] == nil {
			missing = append(missing, n)
		}
	}
	m.mu.Unlock()
	made := map[string]*runner{}
	for _, n := range missing {
		lm, err := m.store.load(n)
		if errors.Is(err, fs.ErrNotExist) {
			continue // its file is written first: a half-made creation
		}
		if err != nil {
			m.log.Warn("loading a cluster link", "link", n, "err", err)
			continue
		}
		r, err := newRunner(m, lm)
		if err != nil {
			m.log.Error("a cluster link does not start on this broker", "link", n, "err", err)
			continue
		}
		made[n] = r
	}
	var start, stop, unused []*runner
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		for _, r := range made {
			r.discard()
		}
		return
	}
	// The index is read again under the lock: a link created or deleted
	// through this broker meanwhile is not undone.
	if cur, err := m.store.names(); err == nil {
		want = make(map[string]bool, len(cur))
		for _, n := range cur {
			want[n] = true
		}
	}
	for n, r := range m.links {
		if !want[n] {
			delete(m.links, n)
			stop = append(stop, r)
		}
	}
	for n, r := range made {
		if m.links[n] != nil || !want[n] {
			unused = append(unused, r)
			continue
		}
		m.links[n] = r
		start = append(start, r)
	}
	running := make([]*runner, 0, len(m.links))
	for _, r := range m.links {
		running = append(running, r)
	}
	m.mu.Unlock()
	for _, r := range unused {
		r.discard()
	}
	for _, r := range stop {
		m.log.Info("cluster link deleted through another broker; stopped here", "link", r.name)
		r.stop()
	}
	for _, r := range start {
		m.log.Info("cluster link started on this broker", "link", r.name)
		r.start()
	}
	for _, r := range running {
		r.followCluster()
	}
}

// followCluster adopts the link's stored state when another broker
// changed it, ends the copies of partitions this broker no longer leads
// or whose topic is paused now, and asks for a round when this broker
// gained a leadership, the state changed (a resume, a failure cleared, a
// topic the coordinator created and recorded) or a topic grew.
func (r *runner) followCluster() {
	changed := false
	r.mu.Lock()
	have := r.meta.version
	r.mu.Unlock()
	// Decoded only when its version moved (snapshots come often).
	if b, v, err := r.m.store.read(linkFile(r.name), false); err == nil && v > have {
		if lm, err := decodeMeta(r.name, b, v); err == nil {
			r.mu.Lock()
			if lm.version > r.meta.version {
				r.meta, changed = lm, true
			}
			r.mu.Unlock()
		}
	} else if err != nil && !errors.Is(err, fs.ErrNotExist) {
		r.log.Warn("reading the link's state", "err", err)
	}
	r.mu.Lock()
	var halt []*partRun
	need := changed
	for t, ps := range r.parts {
		tm := r.meta.Topics[t]
		paused := tm != nil && tm.Paused
		if info, ok := r.m.host.LinkTopic(t); ok && int(info.Partitions) > len(ps) && !r.stopped[t] {
			need = true // the coordinator grew it: adopt the new partitions
		}
		for _, pr := range ps {
			leads := r.m.leads(t, pr.partition)
			gained := leads && !pr.led
			pr.led = leads
			switch running := pr.running(); {
			case running && (!leads || paused):
				halt = append(halt, pr)
			case !running && gained && !paused && !r.stopped[t]:
				if f, failed := failureOf(tm, pr.partition); !failed || f.Retry {
					need = true
				}
			}
		}
	}
	r.mu.Unlock()
	for _, pr := range halt {
		go pr.halt() // waits for the copy: not in the manager's loop
	}
	if need {
		r.poke()
	}
}

func failureOf(tm *topicMeta, partition int32) (failure, bool) {
	if tm == nil {
		return failure{}, false
	}
	f, ok := tm.Failed[partition]
	return f, ok
}

package broker

// Fetching from the closest replica (KIP-392; owner: the follower-fetch
// work, see cluster_config.go), cluster mode only, with
// replica.selector.class set to Kafka's RackAwareReplicaSelector
// (ClusterConfig.RackAwareReplicaSelector):
//
//   - On the leader, a consumer's Fetch v11+ with a RackID is answered,
//     for each partition, with the preferred read replica the selector
//     picks instead of records: among the leader and the ISR members
//     whose log (as the leader last saw it) holds the fetch offset and
//     whose broker has the request's listener, those in the consumer's
//     rack; the leader if it is one of them, else the one with the
//     highest log end (ties: the one caught up most recently); the leader
//     when none is in the rack. The leader itself is never named (-1),
//     as Kafka answers. The answer carries the leader's high watermark,
//     last stable offset and log start, no records, and is sent at once.
//   - On a follower, a consumer's Fetch v11+ is served from the local
//     replica up to its high watermark (the leader's, as of its last
//     fetch): the CurrentLeaderEpoch check and OFFSET_OUT_OF_RANGE as on
//     the leader, against the follower's own log. Without the selector a
//     follower answers NOT_LEADER_OR_FOLLOWER (Kafka serves v11+
//     consumers on followers whatever the selector).

import (
	"slices"
	"time"

	"github.com/verbatim-kafka/verbatim/clustermeta"
)

// RackAwareReplicaSelector is replica.selector.class's value that turns
// KIP-392's follower fetching on.
const RackAwareReplicaSelector = "org.apache.kafka.common.replica.RackAwareReplicaSelector"

// consumerFetchCheck is Fetch's cluster-mode check for a consumer's
// Fetch v11+ (not a follower's) when the selector is on: nil and -1 when
// this broker serves the read (it leads p, or follows it: then from its
// replica up to its high watermark); preferred >= 0 names the replica to
// read from instead (the leader answers no records).
func (op *fetchOp) consumerFetchCheck(p *Partition, currentEpoch int32, offset int64) (preferred int32, err error) {
	rs := p.repl.Load()
	if rs == nil {
		return -1, errNotLeader(p, "this broker does not host it")
	}
	if err := checkLeaderEpoch(p, currentEpoch); err != nil {
		return -1, err
	}
	if !rs.leader || op.req.Rack == "" {
		return -1, nil
	}
	return rs.lead.preferredReadReplica(op.s.clusterSnapshot(), op.req.Rack, listenerName(op.r.Listener), offset), nil
}

// pointTo answers fp with the preferred read replica id and the leader's
// offsets, no records (Kafka skips the read).
func (op *fetchOp) pointTo(fp *fetchPart, id int32) int {
	h, err := partitionHandle(fp.p)
	if err != nil {
		fp.resp.ErrorCode, _ = dataErrorToKafka(err)
		return 0
	}
	l := h.log
	hw := highWatermark(h)
	r := &fp.resp
	r.HighWatermark, r.LastStableOffset, r.LogStartOffset = hw, min(l.LastStableOffset(), hw), l.LogStartOffset()
	r.PreferredReadReplica = id
	return 0
}

// followerReadsOn reports whether consumers may read from followers.
func (s *Server) followerReadsOn() bool {
	return s.cm != nil && s.cm.cfg.RackAwareReplicaSelector
}

// readReplica is one candidate of the selector.
type readReplica struct {
	id       int32
	leo      int64
	caughtUp time.Time
	rack     string
}

// preferredReadReplica is RackAwareReplicaSelector's choice for a
// consumer in rack fetching offset on listener: -1 when it is the leader.
func (ls *leaderState) preferredReadReplica(snap *clustermeta.Snapshot, rack, listener string, offset int64) int32 {
	if snap == nil {
		return -1
	}
	rackOf := func(id int32) (string, bool) {
		b, ok := snap.Brokers[id]
		if !ok {
			return "", false
		}
		_, has := b.Endpoint(listener)
		return b.Rack, has
	}
	self := ls.s.cfg.NodeID
	if r, ok := rackOf(self); ok && r == rack {
		return -1
	}
	var cands []readReplica
	ls.mu.Lock()
	for id, f := range ls.followers {
		if id == self || !slices.Contains(ls.st.ISR, id) || f.leo < offset {
			continue
		}
		if r, ok := rackOf(id); ok && r == rack {
			cands = append(cands, readReplica{id: id, leo: f.leo, caughtUp: f.caughtUp, rack: r})
		}
	}
	ls.mu.Unlock()
	best := -1
	for i, c := range cands {
		if best < 0 || c.leo > cands[best].leo || c.leo == cands[best].leo && c.caughtUp.After(cands[best].caughtUp) ||
			c.leo == cands[best].leo && c.caughtUp.Equal(cands[best].caughtUp) && c.id < cands[best].id {
			best = i
		}
	}
	if best < 0 {
		return -1
	}
	return cands[best].id
}

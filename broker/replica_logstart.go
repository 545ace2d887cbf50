package broker

// Log start offsets across the replicas (owner: the replication work; see
// cluster_config.go), as Kafka replicates them:
//   - Every follower fetch carries the follower's log start
//     (LogStartOffset, Fetch v5+); the leader records it with the
//     follower's progress (replica_leader.go followerFetched).
//   - The low watermark (Kafka's Partition.lowWatermarkIfLeader) is the
//     least log start of the leader and of every assigned follower whose
//     broker is registered (alive), whether in the ISR or not; a follower
//     that has not fetched in this leader epoch counts as -1 (unknown).
//   - A client's DeleteRecords on the leader moves the leader's log start
//     at once and answers once the low watermark reaches the requested
//     offset, with the low watermark as LowWatermark, or
//     REQUEST_TIMED_OUT after the request's timeout (Kafka's
//     DelayedDeleteRecords); NOT_LEADER_OR_FOLLOWER when the leadership
//     ended meanwhile. It waits without holding a lock (a deferred reply,
//     as acks=all's), woken by the follower fetches that report a new log
//     start.
//   - A follower takes the leader's log start from each fetch answer,
//     bounded by its high watermark (replica_follower.go Append). To make
//     that prompt, a move of the leader's log start wakes the followers'
//     long polls, and a follower's fetch whose answer moves its log start
//     is answered at once (logStartNews) instead of waiting for MinBytes.
//   - Mirror log-start forwards (a pusher's DeleteRecords with the mirror
//     tag, a writer registration, the cluster link's LinkForwardLogStart)
//     answer at the leader's log start without waiting (see
//     docs/cluster.md "Log start and DeleteRecords").

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// lowWatermark is the partition's low watermark (see above), or an error
// once the leadership ended; ch is closed at the next change that may
// move it.
func (ls *leaderState) lowWatermark() (low int64, ch <-chan struct{}, err error) {
	if ls.h == nil {
		return -1, nil, fmt.Errorf("%w: %s: %v", errStorage, ls.p.Dir(), errNoLog)
	}
	snap := ls.s.clusterSnapshot()
	low = ls.h.log.LogStartOffset()
	ls.mu.Lock()
	defer ls.mu.Unlock()
	if ls.resigned {
		return -1, nil, errNotLeader(ls.p, "the leadership ended")
	}
	for r, f := range ls.followers {
		if snap != nil {
			if _, alive := snap.Brokers[r]; !alive {
				continue
			}
		}
		low = min(low, f.logStart)
	}
	return low, ls.changed, nil
}

// awaitLowWatermark waits until the low watermark reaches offset and
// returns it; REQUEST_TIMED_OUT at deadline (checked once at least), or
// the error that ended the wait.
func (ls *leaderState) awaitLowWatermark(ctx context.Context, offset int64, deadline time.Time) (int64, error) {
	var timeout <-chan time.Time
	for {
		low, ch, err := ls.lowWatermark()
		switch {
		case err != nil:
			return -1, err
		case low >= offset:
			return low, nil
		}
		if timeout == nil {
			d := time.Until(deadline)
			if d <= 0 {
				return low, errDeleteTimedOut(ls.p, offset, low)
			}
			t := time.NewTimer(d)
			defer t.Stop()
			timeout = t.C
		}
		select {
		case <-ch:
		case <-timeout:
			low, _, err := ls.lowWatermark()
			if err == nil && low >= offset {
				return low, nil
			}
			return low, errDeleteTimedOut(ls.p, offset, low)
		case <-ctx.Done():
			return low, kafkaErr(kerr.RequestTimedOut, "the broker is shutting down")
		}
	}
}

func errDeleteTimedOut(p *Partition, offset, low int64) error {
	return kafkaErr(kerr.RequestTimedOut, fmt.Sprintf("the log start of %s moved to %d on the leader, but its replicas' low watermark is %d after the request's timeout", p.Dir(), offset, low))
}

// logStartNews reports whether a follower's fetch answer (the leader's
// log start in fp.resp, hw the leader's high watermark) moves the
// follower's log start: it takes min(leader's log start, its own high
// watermark), which is at least min(log start, hw, its fetch offset).
// Once it took that, the same fetch is not news again.
func logStartNews(fp *fetchPart, hw int64) bool {
	return fp.fetcherLogStart >= 0 && fp.fetcherLogStart < min(fp.resp.LogStartOffset, hw, fp.fetchOffset)
}

// pendingDelete is one partition of a DeleteRecords waiting for its low
// watermark: its answer is resp.Topics[ti].Partitions[pi].
type pendingDelete struct {
	ti, pi    int
	ls        *leaderState
	requested int64
}

// delayedDeleteRecords is a DeleteRecords answered once every pending
// partition's low watermark reached its requested offset, or at the
// deadline (Kafka's DelayedDeleteRecords).
type delayedDeleteRecords struct {
	s        *Server
	client   clientInfo // for the failure lines
	resp     *kmsg.DeleteRecordsResponse
	pending  []pendingDelete
	deadline time.Time
}

// Await implements DeferredReply. The pending partitions answer
// REQUEST_TIMED_OUT with the low watermark of the delete until they
// complete (as Kafka's initial status); one whose leadership ended
// answers that error with low watermark -1.
func (d *delayedDeleteRecords) Await(ctx context.Context) (Reply, error) {
	for _, pd := range d.pending {
		op := &d.resp.Topics[pd.ti].Partitions[pd.pi]
		low, err := pd.ls.awaitLowWatermark(ctx, pd.requested, d.deadline)
		if err == nil {
			op.ErrorCode, op.LowWatermark = 0, low
			continue
		}
		op.ErrorCode, _ = dataErrorToKafka(err)
		if !errors.Is(err, kerr.RequestTimedOut) {
			op.LowWatermark = -1
		}
		d.s.logDataFailure("delete records", d.resp.Topics[pd.ti].Topic, op.Partition, op.ErrorCode, err, d.client, "offset", pd.requested)
	}
	return d.resp, nil
}

// replicatedDelete is a client's DeleteRecords answer on a partition this
// broker leads in cluster mode: the low watermark, and whether the answer
// must wait for it to reach requested (nil: not led here, answer low as
// it is).
func replicatedDelete(p *Partition, requested, low int64) (int64, *leaderState) {
	rs := p.repl.Load()
	if rs == nil || !rs.leader {
		return low, nil
	}
	lw, _, err := rs.lead.lowWatermark()
	if err != nil {
		// The leadership ended after the delete: the wait answers it.
		return low, rs.lead
	}
	if lw >= requested {
		return lw, nil
	}
	return lw, rs.lead
}

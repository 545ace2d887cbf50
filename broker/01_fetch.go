package broker

// Fetch (key 1), versions 4-17 (Kafka 4.x serves 4 and up).
//
// Behaviour:
//   - Records are the stored batches, byte for byte, read from storage
//     (storage.Log.Read: from the batch holding the fetch offset, up to the
//     partition's max bytes from one segment; the first batch is returned
//     whole even when larger, KIP-74). The request's MaxBytes, capped by
//     fetch.max.bytes (Config.FetchMaxBytes, 55 MiB), bounds the total; a partition after the first with data gets only whole batches
//     that fit.
//   - Long polling: with less than MinBytes available the answer waits
//     until an append to one of the fetched partitions brings enough, or
//     MaxWaitMs passes (bounded by the request timeout). Errors and
//     diverging epochs answer at once.
//   - Isolation: read_uncommitted reads up to the high watermark (the log
//     end on this single node, or under --flush always the durable offset:
//     partition_log.go highWatermark); read_committed up to the last stable
//     offset, with the aborted transactions overlapping the returned range.
//   - Errors per partition: UNKNOWN_TOPIC_OR_PARTITION / UNKNOWN_TOPIC_ID
//     (v13+), OFFSET_OUT_OF_RANGE outside [log start, log end],
//     FENCED_LEADER_EPOCH / UNKNOWN_LEADER_EPOCH for CurrentLeaderEpoch
//     (v9+, KIP-320), KAFKA_STORAGE_ERROR for an offline log.
//   - DivergingEpoch (v12+, KIP-595/KIP-320): when LastFetchedEpoch is
//     given and the log's end offset for that epoch is below the fetch
//     offset (or the log's epoch is lower), the partition answers the
//     diverging epoch and end offset instead of records.
//   - Incremental fetch sessions (KIP-227): fetch_sessions.go.
//   - Replica fetches (ReplicaID/ReplicaState >= 0) are served as consumer
//     fetches on a single node, which has no followers. In cluster mode
//     (replica_leader.go) only the leader answers fetches
//     (NOT_LEADER_OR_FOLLOWER elsewhere, after the CurrentLeaderEpoch
//     check); a follower's fetch reads up to the log end, records the
//     follower's progress (a broker that is not a replica, or a stale
//     broker epoch: NOT_LEADER_OR_FOLLOWER) and its log start
//     (LogStartOffset, replica_logstart.go), and moves the high watermark
//     and the ISR; a follower's fetch whose answer moves its log start is
//     answered at once. With replica.selector.class Kafka's
//     RackAwareReplicaSelector (replica_readreplica.go, KIP-392), a
//     consumer's v11+ fetch with a rack is pointed by the leader to an
//     in-sync replica in its rack (PreferredReadReplica), and followers
//     serve consumers' v11+ fetches up to their high watermark.
//
// Authorization (with the authorizer on, authorize.go): READ on the topic;
// follower fetches CLUSTER_ACTION on CLUSTER; refused partitions
// TOPIC_AUTHORIZATION_FAILED.
//
// Deviations from Apache Kafka: a partially fitting trailing batch is left
// out rather than sent cut (clients drop it anyway); no quotas
// (ThrottleMillis 0); a preferred read replica only in cluster mode
// with the rack-aware selector (-1 otherwise). Records are read into
// pooled buffers and written with one vectored write (fetch_reply.go has
// the measurement against sendfile).

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/verbatim-kafka/verbatim/kbatch"
	"github.com/verbatim-kafka/verbatim/storage"
)

func init() { register(kmsg.Fetch.Int16(), 4, 17, handleFetch) }

// fetchPart is one partition of a fetch, resolved.
type fetchPart struct {
	name string
	id   [16]byte
	part int32
	p    *Partition // nil when resolution failed (errCode set)

	errCode            int16
	fetchOffset        int64
	maxBytes           int32
	currentLeaderEpoch int32
	lastFetchedEpoch   int32
	// fetcherLogStart is a follower's own log start (LogStartOffset,
	// v5+; -1: not sent); logStartNews is set by a read whose answer
	// moves it (replica_logstart.go).
	fetcherLogStart int64
	logStartNews    bool

	sp *sessPart // session entry, nil when sessionless

	// pooled holds resp.RecordBatches (fetch_reply.go).
	pooled *[]byte

	// result
	resp kmsg.FetchResponseTopicPartition
}

// fetchOp is one fetch request being answered.
type fetchOp struct {
	s       *Server
	req     *kmsg.FetchRequest
	plan    sessionPlan
	parts   []*fetchPart
	started time.Time
	client  clientInfo // for the failure lines
	// r is the request, for the authorizer (fetchAuthorized).
	r *Request
	// replicaID and replicaEpoch are a follower's (ReplicaState, or
	// ReplicaID before v15); replicaID -1 for a consumer.
	replicaID    int32
	replicaEpoch int64
}

func handleFetch(ctx context.Context, s *Server, r *Request) (Reply, error) {
	req := r.Msg.(*kmsg.FetchRequest)
	now := time.Now()
	op := &fetchOp{s: s, req: req, started: now, client: clientOf(r), r: r, replicaID: req.ReplicaID, replicaEpoch: -1}
	if req.Version >= 15 {
		op.replicaID, op.replicaEpoch = req.ReplicaState.ID, req.ReplicaState.Epoch
	}
	op.plan = s.fetchSessions.begin(req, now)
	if op.plan.errCode != 0 {
		resp := req.ResponseKind().(*kmsg.FetchResponse)
		resp.ErrorCode = op.plan.errCode
		return resp, nil
	}
	op.resolve()
	if op.read() || req.MaxWaitMillis <= 0 {
		return op.response(), nil
	}
	return Defer(op), nil
}

// resolve builds the partition list: the session's partitions (after
// applying the request) or the request's own.
func (op *fetchOp) resolve() {
	s, req := op.s, op.req
	if sess := op.plan.sess; sess != nil {
		sps := sess.apply(req, &op.plan)
		if len(sps) > 0 || op.plan.newSession {
			for _, sp := range sps {
				fp := &fetchPart{name: sp.key.name, id: sp.key.id, part: sp.key.part, sp: sp,
					fetchOffset: sp.fetchOffset, maxBytes: sp.maxBytes, fetcherLogStart: sp.fetcherLogStart,
					currentLeaderEpoch: sp.currentLeaderEpoch, lastFetchedEpoch: sp.lastFetchedEpoch}
				op.bind(s, fp)
				op.parts = append(op.parts, fp)
			}
			return
		}
		// An incremental fetch that leaves its session without partitions
		// closes it and is served sessionless (Kafka's FetchManager).
		s.fetchSessions.end(sess, false)
		op.plan = sessionPlan{}
	}
	for _, t := range req.Topics {
		for _, p := range t.Partitions {
			fp := &fetchPart{name: t.Topic, id: t.TopicID, part: p.Partition,
				fetchOffset: p.FetchOffset, maxBytes: p.PartitionMaxBytes, fetcherLogStart: p.LogStartOffset,
				currentLeaderEpoch: p.CurrentLeaderEpoch, lastFetchedEpoch: p.LastFetchedEpoch}
			op.bind(s, fp)
			op.parts = append(op.parts, fp)
		}
	}
}

// bind resolves fp's topic and partition.
func (op *fetchOp) bind(s *Server, fp *fetchPart) {
	var t *Topic
	if op.req.Version >= 13 {
		if t = s.cluster.topicByID(fp.id); t == nil {
			fp.errCode = kerr.UnknownTopicID.Code
			return
		}
		fp.name = t.Name
	} else {
		t = s.cluster.topic(fp.name)
	}
	if s.acl != nil && !op.fetchAuthorized(fp.name) {
		fp.errCode = kerr.TopicAuthorizationFailed.Code
		return
	}
	if t == nil {
		fp.errCode = kerr.UnknownTopicOrPartition.Code
		return
	}
	fp.id = t.ID
	if fp.p = t.Partition(fp.part); fp.p == nil {
		fp.errCode = kerr.UnknownTopicOrPartition.Code
	}
}

// read reads every partition and reports whether the fetch is ready to be
// answered (enough bytes, or an error or divergence to report).
func (op *fetchOp) read() bool {
	remaining := int64(min(op.req.MaxBytes, op.s.cfg.FetchMaxBytes)) // Kafka's fetch.max.bytes
	if remaining <= 0 {
		remaining = 1 // KIP-74: the first batch is returned whole anyway
	}
	var total int64
	urgent := false
	for _, fp := range op.parts {
		first := total == 0
		n := op.readPartition(fp, remaining, first)
		total += int64(n)
		remaining -= int64(n)
		if fp.resp.ErrorCode != 0 || fp.resp.DivergingEpoch.Epoch >= 0 || fp.resp.PreferredReadReplica >= 0 || fp.logStartNews {
			urgent = true
		}
	}
	return urgent || total >= int64(op.req.MinBytes)
}

// readPartition fills fp.resp and returns the record bytes it holds.
func (op *fetchOp) readPartition(fp *fetchPart, remaining int64, first bool) int {
	r := &fp.resp
	fp.release()
	fp.logStartNews = false
	*r = kmsg.NewFetchResponseTopicPartition()
	r.Partition = fp.part
	r.HighWatermark, r.LastStableOffset, r.LogStartOffset = -1, -1, -1
	r.PreferredReadReplica = -1
	// Empty, not null: librdkafka refuses a null record set (Kafka sends
	// an empty one).
	r.RecordBatches = []byte{}
	if fp.errCode != 0 {
		r.ErrorCode = fp.errCode
		return 0
	}
	p := fp.p
	// Errors carry no offsets, as Kafka answers them.
	fail := func(err error) int {
		r.ErrorCode, _ = dataErrorToKafka(err)
		if codeLevel(r.ErrorCode) == slog.LevelError {
			// Storage errors only: a consumer's out-of-range offset or
			// stale epoch is its routine, not ours.
			op.s.logDataFailure("fetch", p.Topic.Name, p.Index, r.ErrorCode, err, op.client, "offset", fp.fetchOffset)
		}
		r.HighWatermark, r.LastStableOffset, r.LogStartOffset = -1, -1, -1
		r.RecordBatches, r.AbortedTransactions = []byte{}, nil
		return 0
	}
	outOfRange := func() int {
		return fail(kafkaErr(kerr.OffsetOutOfRange, ""))
	}
	var follower *leaderState // a follower's fetch (cluster mode)
	if op.s.cfg.Cluster != nil {
		cur := int32(-1)
		if op.req.Version >= 9 {
			cur = fp.currentLeaderEpoch
		}
		if op.replicaID < 0 && op.req.Version >= 11 && op.s.followerReadsOn() {
			// KIP-392 (replica_readreplica.go).
			preferred, err := op.consumerFetchCheck(p, cur, fp.fetchOffset)
			if err != nil {
				return fail(err)
			}
			if preferred >= 0 {
				return op.pointTo(fp, preferred)
			}
		} else {
			ls, err := op.s.fetchLeaderCheck(p, cur, op.replicaID, op.replicaEpoch, fp.fetchOffset, fp.fetcherLogStart)
			if err != nil {
				return fail(err)
			}
			follower = ls
		}
	}
	h, err := partitionHandle(p)
	if err != nil {
		return fail(err)
	}
	l := h.log
	if op.req.Version >= 9 {
		if err := checkLeaderEpoch(p, fp.currentLeaderEpoch); err != nil {
			return fail(err)
		}
	}
	leo := l.LogEndOffset()
	hw := highWatermark(h)
	lso := min(l.LastStableOffset(), hw)
	r.HighWatermark, r.LastStableOffset, r.LogStartOffset = hw, lso, l.LogStartOffset()
	if op.req.Version >= 12 && fp.lastFetchedEpoch >= 0 {
		epoch, end, err := l.EndOffsetForEpoch(fp.lastFetchedEpoch)
		if err != nil {
			return fail(err)
		}
		if epoch == storage.UndefinedEpoch || end == storage.UndefinedEpochOffset {
			return outOfRange()
		}
		if epoch < fp.lastFetchedEpoch || end < fp.fetchOffset {
			r.DivergingEpoch.Epoch, r.DivergingEpoch.EndOffset = epoch, end
			return 0
		}
	}
	upper := hw
	if follower != nil {
		fp.logStartNews = logStartNews(fp, hw)
		upper = leo // followers replicate up to the log end
		if op.s.leaderThrottled(follower, p, op.replicaID) {
			return 0 // over the leader's replication throttle (replica_throttle.go)
		}
	} else if op.req.IsolationLevel == 1 {
		upper = lso
		r.AbortedTransactions = []kmsg.FetchResponseTopicPartitionAbortedTransaction{}
	}
	limit := int64(fp.maxBytes)
	if remaining < limit {
		limit = remaining
	}
	if limit <= 0 && !first {
		if fp.fetchOffset < r.LogStartOffset || fp.fetchOffset > leo {
			return outOfRange()
		}
		return 0
	}
	if limit <= 0 {
		limit = 1
	}
	sl, err := l.Read(fp.fetchOffset, int(limit))
	if err != nil {
		if errors.Is(err, storage.ErrOffsetOutOfRange) {
			return outOfRange()
		}
		return fail(err)
	}
	if sl.Size == 0 || sl.BaseOffset >= upper {
		return 0
	}
	pb := getFetchBuf(sl.Size)
	buf, err := sl.Bytes((*pb)[:0])
	*pb = buf
	fp.pooled = pb
	if err != nil {
		// The segment went away under the read (retention, truncation):
		// an empty answer makes the client fetch again.
		return 0
	}
	// Whole batches below the isolation bound, and within limit unless
	// this is the first data of the response (KIP-74).
	keep, last := 0, int64(-1)
	for it := kbatch.Batches(buf); it.Next(); {
		b := it.Batch()
		if kbatch.BaseOffset(b) >= upper || (keep > 0 || !first) && int64(keep+len(b)) > limit {
			break
		}
		last = kbatch.BaseOffset(b) + int64(kbatch.LastOffsetDelta(b))
		keep += len(b)
	}
	if keep == 0 {
		fp.release()
		return 0
	}
	r.RecordBatches = buf[:keep]
	if follower != nil {
		op.s.leaderSent(p, keep)
	}
	if op.req.IsolationLevel == 1 {
		aborted, err := l.AbortedTransactions(fp.fetchOffset, last+1, nil)
		if err != nil {
			return fail(err)
		}
		r.AbortedTransactions = make([]kmsg.FetchResponseTopicPartitionAbortedTransaction, 0, len(aborted))
		for _, a := range aborted {
			at := kmsg.NewFetchResponseTopicPartitionAbortedTransaction()
			at.ProducerID, at.FirstOffset = a.ProducerID, a.FirstOffset
			r.AbortedTransactions = append(r.AbortedTransactions, at)
		}
	}
	return keep
}

// Await is the long poll: it waits for appends to the fetched partitions
// until MinBytes is available or MaxWaitMs has passed.
func (op *fetchOp) Await(ctx context.Context) (Reply, error) {
	wake := make(chan struct{}, 1)
	var ps []*Partition
	for _, fp := range op.parts {
		if fp.p != nil {
			fp.p.addWaiter(wake)
			ps = append(ps, fp.p)
		}
	}
	defer func() {
		for _, p := range ps {
			p.removeWaiter(wake)
		}
	}()
	// An append between the first read and the registration above woke
	// nobody: read again now that appends signal wake (Kafka's
	// tryCompleteElseWatch checks again after watching, for the same
	// reason).
	if op.read() {
		return op.response(), nil
	}
	deadline := op.started.Add(time.Duration(op.req.MaxWaitMillis) * time.Millisecond)
	if d, ok := ctx.Deadline(); ok && d.Add(-100*time.Millisecond).Before(deadline) {
		deadline = d.Add(-100 * time.Millisecond)
	}
	timer := time.NewTimer(time.Until(deadline))
	defer timer.Stop()
	for {
		select {
		case <-wake:
			if op.read() {
				return op.response(), nil
			}
		case <-timer.C:
			op.read()
			return op.response(), nil
		case <-ctx.Done():
			for _, fp := range op.parts {
				fp.release()
			}
			if op.plan.sess != nil {
				op.s.fetchSessions.end(op.plan.sess, false)
			}
			return nil, ctx.Err()
		}
	}
}

// response builds the reply from the last read and updates the session.
func (op *fetchOp) response() *fetchReply {
	resp := op.req.ResponseKind().(*kmsg.FetchResponse)
	reply := &fetchReply{resp: resp}
	sess := op.plan.sess
	if sess != nil {
		resp.SessionID = sess.id
	}
	var cur *kmsg.FetchResponseTopic
	for _, fp := range op.parts {
		if sess != nil && !op.plan.newSession && !op.include(fp) {
			op.remember(fp)
			fp.release()
			continue
		}
		if fp.pooled != nil {
			reply.pooled = append(reply.pooled, fp.pooled)
			fp.pooled = nil
		}
		if sess != nil {
			op.remember(fp)
		}
		op.s.fetchMetrics(op.replicaID >= 0).Error(fp.resp.ErrorCode)
		if n := len(fp.resp.RecordBatches); n > 0 && fp.p != nil {
			if op.replicaID >= 0 {
				op.s.topicMetrics(fp.p.Topic).ReplicationBytesOut.Add(float64(n)) // Kafka's ReplicationBytesOut
			} else {
				op.s.topicMetrics(fp.p.Topic).BytesOut.Add(float64(n))
			}
		}
		if cur == nil || cur.Topic != fp.name || cur.TopicID != fp.id {
			resp.Topics = append(resp.Topics, kmsg.NewFetchResponseTopic())
			cur = &resp.Topics[len(resp.Topics)-1]
			cur.Topic, cur.TopicID = fp.name, fp.id
		}
		cur.Partitions = append(cur.Partitions, fp.resp)
	}
	if sess != nil {
		op.s.fetchSessions.end(sess, true)
	}
	return reply
}

// release returns fp's record buffer to its pool.
func (fp *fetchPart) release() {
	if fp.pooled != nil {
		putFetchBuf(fp.pooled)
		fp.pooled = nil
		fp.resp.RecordBatches = []byte{}
	}
}

// include reports whether an incremental response lists fp.
func (op *fetchOp) include(fp *fetchPart) bool {
	r, sp := &fp.resp, fp.sp
	return op.plan.named[sp.key] || len(r.RecordBatches) > 0 || r.ErrorCode != 0 || r.DivergingEpoch.Epoch >= 0 ||
		r.HighWatermark != sp.hw || r.LastStableOffset != sp.lso || r.LogStartOffset != sp.logStart
}

// remember records what the client now knows of fp.
func (op *fetchOp) remember(fp *fetchPart) {
	if sp := fp.sp; sp != nil {
		sp.hw, sp.lso, sp.logStart = fp.resp.HighWatermark, fp.resp.LastStableOffset, fp.resp.LogStartOffset
	}
}

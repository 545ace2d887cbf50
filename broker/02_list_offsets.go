package broker

// ListOffsets (key 2), versions 1-10 (Kafka 4.x serves 1 and up).
//
// Behaviour, per partition (errors never fail the request):
//   - -2 EARLIEST and -4 EARLIEST_LOCAL (v8+, KIP-405; no tiered storage
//     here, so the same): the log start offset, with the leader epoch of
//     the batch holding it (v4+).
//   - -1 LATEST: the high watermark (read_uncommitted; under --flush always
//     the durable offset, see partition_log.go) or the last stable
//     offset (read_committed, v2+), with the partition's current leader
//     epoch, as Kafka answers.
//   - -3 MAX_TIMESTAMP (v7+, KIP-734): the offset and timestamp of the
//     record with the largest timestamp (the first such), or -1/-1 on an
//     empty log.
//   - -5 LATEST_TIERED (v9+, KIP-1005): -1/-1, nothing is tiered.
//   - a timestamp >= 0: the first record with a timestamp at or after it
//     (storage.Log.OffsetForTimestamp, every codec), bounded by the
//     isolation level's last fetchable offset; -1/-1 when none.
//   - MAX_TIMESTAMP and timestamp lookups stream the one batch they look
//     into (kbatch's record reader), charged to --max-decode-bytes with
//     its decoder's memory: concurrent lookups wait for it rather than
//     grow the broker's memory. A stored batch that cannot be decoded
//     (a mirror append stores batches untouched) answers INVALID_RECORD
//     and is logged at ERROR with its offset; a lookup whose request
//     deadline passes while it waits answers REQUEST_TIMED_OUT.
//   - CurrentLeaderEpoch (v4+, KIP-320): FENCED_LEADER_EPOCH /
//     UNKNOWN_LEADER_EPOCH. Unknown topic/partition:
//     UNKNOWN_TOPIC_OR_PARTITION. A special timestamp newer than the
//     request version allows: UNSUPPORTED_VERSION.
//   - Cluster mode: only the leader answers (NOT_LEADER_OR_FOLLOWER
//     elsewhere; Kafka's debugging replica id -2 may ask any replica); the
//     high watermark is the replicated one, and a replica's (replica id
//     >= 0) LATEST is the log end, as Kafka answers followers. A new
//     leader whose high watermark is below the start of its leader epoch
//     answers a consumer's (replica id -1) LATEST, and a timestamp lookup
//     that finds nothing below that limit, with OFFSET_NOT_AVAILABLE
//     (KIP-207), so the end of the log never seems to go back.
//
// Authorization (with the authorizer on, authorize.go): DESCRIBE on the
// topic (TOPIC_AUTHORIZATION_FAILED).
//
// Deviations from Apache Kafka: TimeoutMillis (v10) is not needed (answers
// are immediate); other negative timestamps answer -1/-1. Kafka answers
// an undecodable compressed stream with UNKNOWN_SERVER_ERROR (INVALID_RECORD
// for malformed records inside a valid one); Verbatim answers
// INVALID_RECORD for both, as its produce validation does.

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/verbatim-kafka/verbatim/authz"
	"github.com/verbatim-kafka/verbatim/storage"
)

func init() { register(kmsg.ListOffsets.Int16(), 1, 10, handleListOffsets) }

// Special ListOffsets timestamps.
const (
	tsLatest        = -1
	tsEarliest      = -2
	tsMaxTimestamp  = -3
	tsEarliestLocal = -4
	tsLatestTiered  = -5
)

func handleListOffsets(ctx context.Context, s *Server, r *Request) (Reply, error) {
	req := r.Msg.(*kmsg.ListOffsetsRequest)
	resp := req.ResponseKind().(*kmsg.ListOffsetsResponse)
	for _, rt := range req.Topics {
		ot := kmsg.NewListOffsetsResponseTopic()
		ot.Topic = rt.Topic
		t := s.cluster.topic(rt.Topic)
		denied := !s.authorized(r, authz.OpDescribe, authz.ResourceTopic, rt.Topic)
		for _, rp := range rt.Partitions {
			op := kmsg.NewListOffsetsResponseTopicPartition()
			op.Partition = rp.Partition
			p := t.Partition(rp.Partition)
			if denied {
				op.ErrorCode = kerr.TopicAuthorizationFailed.Code
			} else if p == nil {
				op.ErrorCode = kerr.UnknownTopicOrPartition.Code
			} else if err := s.listOffsetLeader(ctx, p, req, &rp, &op); err != nil {
				if ctx.Err() != nil && (errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled)) {
					err = kafkaErr(kerr.RequestTimedOut, "the lookup waited for decode memory past the request deadline")
				}
				op.ErrorCode, _ = dataErrorToKafka(err)
				op.Timestamp, op.Offset, op.LeaderEpoch = -1, -1, -1
				s.logListOffsetsFailure(p, rp.Timestamp, op.ErrorCode, err, clientOf(r))
			}
			ot.Partitions = append(ot.Partitions, op)
		}
		resp.Topics = append(resp.Topics, ot)
	}
	return resp, nil
}

// listOffsetLeader is listOffset on the partition's leader in cluster
// mode (NOT_LEADER_OR_FOLLOWER elsewhere, FENCED_LEADER_EPOCH /
// UNKNOWN_LEADER_EPOCH first); Kafka's debugging replica id (-2) may ask
// any replica, and a follower (replica id >= 0) asking LATEST gets the
// log end, not the high watermark, as Kafka answers replicas (its
// fetcher's out-of-range handling truncates to it).
func (s *Server) listOffsetLeader(ctx context.Context, p *Partition, req *kmsg.ListOffsetsRequest, rp *kmsg.ListOffsetsRequestTopicPartition, op *kmsg.ListOffsetsResponseTopicPartition) error {
	if s.cfg.Cluster != nil && req.ReplicaID != -2 {
		cur := int32(-1)
		if req.Version >= 4 {
			cur = rp.CurrentLeaderEpoch
		}
		rs, err := s.leaderCheck(p, cur)
		if err != nil {
			return err
		}
		if req.ReplicaID >= 0 && rp.Timestamp == tsLatest {
			l, err := partitionLog(p)
			if err != nil {
				return err
			}
			op.Offset, op.LeaderEpoch = l.LogEndOffset(), p.LeaderEpoch()
			return nil
		}
		if req.ReplicaID == -1 && belowEpochStart(p, rs) {
			// A new leader whose high watermark has not reached the start
			// of its epoch may be behind what the old leader acknowledged
			// (KIP-207): no latest offset, and no timestamp lookup
			// answered "none" from that lagging limit, until it caught up.
			if rp.Timestamp == tsLatest {
				return errOffsetNotAvailable(p)
			}
			if err := listOffset(ctx, p, req.Version, req.IsolationLevel, rp, op); err != nil || rp.Timestamp < 0 || op.Offset != -1 {
				return err
			}
			return errOffsetNotAvailable(p)
		}
	}
	return listOffset(ctx, p, req.Version, req.IsolationLevel, rp, op)
}

// belowEpochStart reports whether rs leads p with a high watermark below
// the log end the leadership began at.
func belowEpochStart(p *Partition, rs *replState) bool {
	if rs == nil || rs.lead == nil || rs.lead.h == nil {
		return false
	}
	return highWatermark(rs.lead.h) < rs.lead.epochStart
}

func errOffsetNotAvailable(p *Partition) error {
	return kafkaErr(kerr.OffsetNotAvailable, fmt.Sprintf("the leader of %s has not caught up to the start of its leader epoch yet", p.Dir()))
}

func listOffset(ctx context.Context, p *Partition, version int16, isolation int8, rp *kmsg.ListOffsetsRequestTopicPartition, op *kmsg.ListOffsetsResponseTopicPartition) error {
	h, err := partitionHandle(p)
	if err != nil {
		return err
	}
	l := h.log
	if version >= 4 {
		if err := checkLeaderEpoch(p, rp.CurrentLeaderEpoch); err != nil {
			return err
		}
	}
	fetchable := highWatermark(h)
	if isolation == 1 {
		fetchable = min(fetchable, l.LastStableOffset())
	}
	epochAt := func(off int64) int32 {
		if e, ok := l.EpochCache().EpochForOffset(off); ok {
			return e
		}
		return -1
	}
	ts := rp.Timestamp
	switch {
	case ts == tsMaxTimestamp && version < 7, ts == tsEarliestLocal && version < 8, ts == tsLatestTiered && version < 9:
		return kafkaErr(kerr.UnsupportedVersion, "this timestamp needs a newer ListOffsets version")
	case ts == tsEarliest || ts == tsEarliestLocal:
		start := l.LogStartOffset()
		op.Offset, op.LeaderEpoch = start, epochAt(start)
	case ts == tsLatest:
		op.Offset, op.LeaderEpoch = fetchable, p.LeaderEpoch()
	case ts == tsMaxTimestamp:
		m, found, err := l.MaxTimestamp(ctx)
		if err != nil {
			return err
		}
		if found {
			op.Timestamp, op.Offset, op.LeaderEpoch = m.Timestamp, m.Offset, m.LeaderEpoch
		}
	case ts >= 0:
		m, err := l.OffsetForTimestamp(ctx, ts)
		switch {
		case errors.Is(err, storage.ErrNoTimestampMatch):
		case err != nil:
			return err
		case m.Offset < fetchable:
			op.Timestamp, op.Offset, op.LeaderEpoch = m.Timestamp, m.Offset, m.LeaderEpoch
		}
	}
	return nil
}

// logListOffsetsFailure logs a partition's failed lookup: an undecodable
// stored batch at ERROR with its offset (the data is bad, not the
// request), anything else by its code (faultlog.go).
func (s *Server) logListOffsetsFailure(p *Partition, ts int64, code int16, err error, c clientInfo) {
	var cb *storage.CorruptBatchError
	if errors.As(err, &cb) {
		s.logFault(slog.LevelError, "list offsets/undecodable", "list offsets failed: a stored batch cannot be decoded", p.Topic.Name, p.Index, c,
			"offset", cb.Offset, "timestamp", ts, "error_code", codeName(code), "err", err.Error())
		return
	}
	s.logDataFailure("list offsets", p.Topic.Name, p.Index, code, err, c, "timestamp", ts)
}

package broker

// Produce (key 0), versions 3-13 served; 0-2 advertised but refused, as
// Kafka 4.x does (KAFKA-18659: librdkafka enables compression only when it
// sees Produce v0 advertised).
//
// Behaviour:
//   - The body is decoded by the hot path's kmsg-free decoder: record sets
//     alias the request frame and are validated and stamped in place
//     (hotpath.Validate), then appended by storage.
//   - acks 0 (no response), 1 (answered once written to the page cache)
//     and -1 (with --flush always: answered only once storage reports the
//     offsets durable, through its group commit; otherwise as acks=1, which
//     is what a single in-sync replica means). Other values:
//     INVALID_REQUIRED_ACKS for every partition. In cluster mode only the
//     partition's leader takes writes (NOT_LEADER_OR_FOLLOWER elsewhere)
//     and acks=-1 needs min.insync.replicas in the ISR
//     (NOT_ENOUGH_REPLICAS) and is answered once the high watermark passes
//     the append (replica_leader.go).
//   - Normal mode (ordinary producers), Kafka's leader rules: exactly one
//     batch with base offset 0, no control batches, timestamp bounds
//     (message.timestamp.before/after.max.ms), LogAppendTime stamping,
//     keys required on compacted topics, max.message.bytes; offsets and the
//     partition leader epoch are assigned by storage in place.
//   - Idempotent producers: storage keeps Kafka's producer state, so
//     sequence gaps give OUT_OF_ORDER_SEQUENCE_NUMBER, stale epochs
//     INVALID_PRODUCER_EPOCH, and a duplicate of one of the producer's last
//     five batches is acknowledged with its original offsets.
//   - Errors are per partition, with ErrorMessage (v8+) and per-record
//     errors where Kafka gives them (timestamps, missing keys); one bad
//     partition never fails the request. v13 addresses topics by id
//     (UNKNOWN_TOPIC_ID when unknown).
//   - Mirror produce (docs/protocol.md): flexible versions (v9+) carrying
//     the request-level tagged field wireext.MirrorTag (MirrorProduce,
//     decoded with the partition-level fields in the hot path's single
//     pass over the body) write to mirror.mode=push
//     topics through the hot path's verbatim mode and storage's verbatim
//     append: batches keep every byte. ExpectedLogEndOffset must equal the
//     log end (else OFFSET_OUT_OF_RANGE, unless the set is an identical
//     retry of stored batches: success with the original offsets).
//     CurrentLeaderEpoch (partition tag) fences stale senders
//     (FENCED_LEADER_EPOCH / UNKNOWN_LEADER_EPOCH); only the partition's
//     registered writer (the WriterEpoch the broker assigned and the
//     registrant's WriterID, mirror_writer.go) writes: an older or other
//     writer is PRODUCER_FENCED, an epoch never assigned
//     INVALID_PRODUCER_EPOCH, and once a
//     mirror stop began mirror produces get POLICY_VIOLATION. After an append the
//     partition's leader epoch is kept ahead of every stored batch epoch
//     (KIP-1279: raised to the batch epoch + 10 when one comes within 3).
//   - The topic's WASM policies (mirror.policies, docs/policies.md; the
//     defaults on mirror topics) judge each record set after the hot path's
//     checks, at the moment of the append (log end, epoch cache and open
//     transactions as the append finds them: produce_guard.go); a
//     rejection refuses the partition's whole set with the policy's error.
//   - One pipeline for normal and mirror produce: validate, submit to the
//     partition's queue (whose writer runs the append's guard: mirror
//     writer fencing, expected log end, policies), answer from the
//     connection writer once the appends completed (Await), so pipelined
//     requests on one connection overlap in the queue, mirror produces
//     included. The request's state is pooled (produceOp).
//   - An ordinary producer writing to a mirror topic, or a mirror produce
//     to an ordinary topic, gets POLICY_VIOLATION (non-retriable in the
//     Java producer and librdkafka) and nothing is appended.
//   - Transactional produce (produce_txn_verify.go): a transactional batch
//     sent with a transactional id is verified against the transaction
//     coordinator as Kafka 4.x does (transaction.partition.verification
//     on): a partition not in the producer's ongoing transaction gets
//     INVALID_TXN_STATE, a stale epoch INVALID_PRODUCER_EPOCH, an unknown
//     id INVALID_PRODUCER_ID_MAPPING, and a transaction being completed
//     NOT_ENOUGH_REPLICAS (retriable); nothing is appended.
//   - The coordinators' topics (__consumer_offsets, __transaction_state)
//     refuse every client produce with INVALID_TOPIC_EXCEPTION ("Cannot
//     append to internal topic"), as Kafka's ReplicaManager does.
//   - Compressed batches (normal mode) are decompressed and every record
//     walked, as Kafka's LogValidator does, streaming through pooled
//     decoders whose working memory is charged to the decode budget
//     (--max-decode-bytes); max.decompressed.message.bytes (per record,
//     INVALID_RECORD) and max.decompressed.batch.bytes (per batch,
//     MESSAGE_TOO_LARGE) bound what they may inflate to.
//
// Authorization (with the authorizer on, authorize.go): WRITE on each
// topic; transactional batches WRITE on the transactional id; mirror
// produces the mirror permission too (produce_authz.go).
//
// Deviations from Apache Kafka:
//   - A compressed payload that is not valid for its codec gets
//     INVALID_RECORD (non-retriable); Kafka 4.4 answers UNKNOWN_SERVER_ERROR
//     (its decompressor's exception is not an InvalidRecordException).
//     CORRUPT_MESSAGE would make the Java producer resend the batch until
//     its delivery timeout (docs/compat.md).
//   - Kafka skips the transaction verification when the partition
//     already holds an open transaction of that producer and epoch;
//     Verbatim always asks its (local) coordinator, so a batch sent after
//     EndTxn began is refused (NOT_ENOUGH_REPLICAS) instead of joining the
//     transaction being completed.
//   - Kafka lets a client whose client id is "__admin_client" append to
//     the internal topics; Verbatim refuses it too (the coordinators'
//     in-memory state would not see such records until a restart).
//   - No quotas: ThrottleMillis is always 0.

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/verbatim-kafka/verbatim/hotpath"
	"github.com/verbatim-kafka/verbatim/storage"
	"github.com/verbatim-kafka/verbatim/wireext"
)

func init() {
	register(kmsg.Produce.Int16(), 0, hotpath.ProduceMaxVersion, handleProduce,
		advertisedButRefusedBelow(hotpath.ProduceMinVersion), rawBody())
}

// mirrorProduceFeature is the ApiVersions supported feature a pusher must
// see before sending mirror produces.
func mirrorProduceFeature() kmsg.ApiVersionsResponseSupportedFeature {
	f := kmsg.NewApiVersionsResponseSupportedFeature()
	f.Name = wireext.FeatureMirrorProduce
	f.MinVersion, f.MaxVersion = wireext.FeatureMirrorProduceMinVersion, wireext.FeatureMirrorProduceMaxVersion
	return f
}

var producePool = sync.Pool{New: func() any { return new(hotpath.ProduceRequest) }}

func handleProduce(ctx context.Context, s *Server, r *Request) (Reply, error) {
	req := producePool.Get().(*hotpath.ProduceRequest)
	defer producePool.Put(req)
	if err := req.Decode(r.Body, r.Version); err != nil {
		return nil, err
	}
	var mreq *wireext.MirrorProduce
	if req.HasMirror {
		mreq = &req.Mirror
	}
	op := getProduceOp(r.Version, req.Acks, len(req.Topics), req.NumPartitions())
	op.s, op.client, op.mirror = s, clientOf(r), mreq != nil
	op.timeoutMs = req.TimeoutMs // acks=all in cluster mode (replica_leader.go)
	acksOK := req.Acks == 0 || req.Acks == 1 || req.Acks == -1
	durable := req.Acks == -1 && s.flushPolicy() == storage.FlushAlways
	now := r.Received.UnixMilli()
	if r.Received.IsZero() {
		now = time.Now().UnixMilli()
	}
	op.startMs = now
	var refusal error // request-wide (authorization: produce_authz.go)
	if s.acl != nil {
		refusal = s.produceRequestRefusal(r, req)
	}
	for ti := range req.Topics {
		rt := &req.Topics[ti]
		out := &op.resp.Topics[ti]
		out.Name, out.ID = rt.Name, rt.ID
		out.Partitions = resize(out.Partitions, len(rt.Partitions))
		var t *Topic
		var topicErr *kerr.Error
		if r.Version >= 13 {
			if t = s.cluster.topicByID(rt.ID); t == nil {
				topicErr = kerr.UnknownTopicID
			}
		} else if t = s.cluster.topic(string(rt.Name)); t == nil {
			topicErr = kerr.UnknownTopicOrPartition
		}
		if s.acl != nil && (t != nil || topicErr == kerr.UnknownTopicOrPartition) {
			var name string
			if t != nil {
				name = t.Name
			} else {
				name = string(rt.Name)
			}
			if !s.produceTopicAuthorized(r, name) {
				topicErr = kerr.TopicAuthorizationFailed
			}
		}
		for i := range rt.Partitions {
			rp := &rt.Partitions[i]
			var mp *wireext.MirrorPartition
			if rp.HasMirror {
				mp = &rp.Mirror
			}
			pr := &out.Partitions[i]
			*pr = hotpath.NewPartitionResponse(rp.Index, 0)
			switch {
			case !acksOK:
				pr.ErrorCode = kerr.InvalidRequiredAcks.Code // logged once below
				continue
			case refusal != nil:
				setProduceError(pr, refusal, nil)
				op.noteFailure(string(rt.Name), rp.Index, pr.ErrorCode, refusal, nil)
				continue
			case topicErr != nil:
				pr.ErrorCode = topicErr.Code
				op.noteFailure(string(rt.Name), rp.Index, pr.ErrorCode, nil, nil)
				continue
			}
			p := t.Partition(rp.Index)
			if p == nil {
				pr.ErrorCode = kerr.UnknownTopicOrPartition.Code
				op.noteFailure(t.Name, rp.Index, pr.ErrorCode, nil, nil)
				continue
			}
			if log, err := s.produceOne(ctx, op, p, pr, r.Version, req.TransactionalID, rp.Records, mreq, mp, now, durable); err != nil {
				setProduceError(pr, err, log)
				op.noteFailure(t.Name, rp.Index, pr.ErrorCode, err, rp.Records)
			}
		}
	}
	if !acksOK {
		s.logFaultKey(slog.LevelWarn, "produce/acks", "produce refused: acks must be 0, 1 or -1", "", -1, op.client, "acks", req.Acks)
	}
	// Answered by the connection writer once every submitted append has
	// completed (Await), in request order.
	return op, nil
}

// resize returns s with length n, reusing its backing array when it is
// large enough.
func resize[T any](s []T, n int) []T {
	if cap(s) < n {
		return make([]T, n)
	}
	return s[:n]
}

// setProduceError fills a partition's error code, message and per-record
// errors.
func setProduceError(pr *hotpath.ProducePartitionResponse, err error, l *storage.Log) {
	code, msg := dataErrorToKafka(err)
	pr.ErrorCode, pr.ErrorMessage, pr.BaseOffset, pr.LogAppendTimeMs = code, msg, -1, -1
	var he *hotpath.Error
	if errors.As(err, &he) {
		pr.RecordErrors = he.Records
	}
	if l != nil {
		pr.LogStartOffset = l.LogStartOffset()
	}
}

// produceOne checks one partition's record set (topic rules, validation,
// the mirror fields, transaction verification) and submits it to the
// partition's queue; the checks that need the log as the append finds it
// run in the append's guard (produce_guard.go). mreq is the request's
// MirrorProduce value and mp the partition's MirrorPartition, each nil
// when absent. An error refuses the partition; log is its log when known.
func (s *Server) produceOne(ctx context.Context, op *produceOp, p *Partition, pr *hotpath.ProducePartitionResponse, version int16, txnID, set []byte,
	mreq *wireext.MirrorProduce, mp *wireext.MirrorPartition, now int64, durable bool) (log *storage.Log, err error) {
	var lead *leaderState
	if s.cfg.Cluster != nil {
		// Only the leader takes writes; acks=all needs the ISR
		// (replica_leader.go).
		if lead, err = s.produceLeaderCheck(p, op.acks); err != nil {
			return nil, err
		}
	}
	h, err := partitionHandle(p)
	if err != nil {
		return nil, err
	}
	if isInternalTopic(p.Topic.Name) {
		// Only the coordinators write their topics (Kafka's
		// ReplicaManager refuses clients the same way).
		return h.log, kafkaErr(kerr.InvalidTopicException, "Cannot append to internal topic "+p.Topic.Name)
	}
	cfg := p.Topic.Config()
	mirror := mreq != nil
	switch {
	case cfg.MirrorPull:
		// Neither clients nor pushers: the link writes it in process.
		if mirror {
			return h.log, errPullTopic(p.Topic.Name, cfg)
		}
		return h.log, kafkaErr(kerr.PolicyViolation, fmt.Sprintf("topic %s is a mirror topic (mirror.mode=pull, mirror.link=%s): only its cluster link writes to it", p.Topic.Name, cfg.MirrorLink))
	case cfg.MirrorPush && !mirror:
		return h.log, kafkaErr(kerr.PolicyViolation, fmt.Sprintf("topic %s is a mirror topic (mirror.mode=push): only mirror produces (docs/protocol.md) may write to it", p.Topic.Name))
	case !cfg.MirrorPush && mirror:
		return h.log, kafkaErr(kerr.PolicyViolation, fmt.Sprintf("topic %s is not a mirror topic: mirror produces need mirror.mode=push", p.Topic.Name))
	}
	if mp != nil {
		if err := checkLeaderEpoch(p, mp.CurrentLeaderEpoch); err != nil {
			return h.log, err
		}
		if !mirror && mp.ExpectedLogEndOffset != -1 {
			return h.log, kafkaErr(kerr.InvalidRequest, "ExpectedLogEndOffset is only allowed in mirror produces")
		}
	}
	if mirror {
		if mp == nil {
			return h.log, kafkaErr(kerr.InvalidRequest, msgNoExpectedLogEnd)
		}
		pa := op.add()
		vr, err := prepareMirrorAppend(s, p, h.log, set, writerOf(mreq), mp.ExpectedLogEndOffset, mp.SourceHighWatermark, now, durable, &pa.a, &pa.guard)
		if err != nil {
			op.pend = op.pend[:len(op.pend)-1]
			return h.log, err
		}
		pa.p, pa.log, pa.pr, pa.appendTime, pa.records = p, h.log, pr, -1, vr.Records
		pa.guard.lead = lead
		return h.log, op.submit(h, pa)
	}
	// The options live in the pooled op (a local would go to the heap:
	// Validate's parameter escapes), and are cleared once used so the op
	// does not keep the request's context.
	op.opts = hotpath.Options{Mode: hotpath.Normal, Topic: hotpathConfig(cfg), ProduceVersion: version, NowMs: now,
		Decode: s.decode, Ctx: ctx} // compressed batches: decompression charged to the decode budget
	var vr hotpath.Result
	err = hotpath.Validate(set, &op.opts, &vr)
	op.opts = hotpath.Options{}
	if err != nil {
		return h.log, err
	}
	if err := s.verifyTxnProduce(txnID, p, set); err != nil {
		return h.log, err
	}
	pa := op.add()
	pa.p, pa.log, pa.pr, pa.appendTime, pa.records = p, h.log, pr, vr.LogAppendTimeMs, vr.Records
	pa.a = hotpath.Append{Set: set, LeaderEpoch: p.LeaderEpoch(), NowMs: now, Durable: durable}
	switch {
	case hasPolicyOverride(cfg):
		// An ordinary topic with mirror.policies: judged as sent
		// (docs/policies.md), against the log the append finds.
		pa.guard = produceGuard{s: s, p: p, log: h.log, set: set}
		pa.a.Guard = &pa.guard
	default:
		pa.guard = produceGuard{}
	}
	if lead != nil {
		// Cluster mode: written only while the leadership holds.
		pa.guard.p, pa.guard.lead = p, lead
		pa.a.Guard = &pa.guard
	}
	return h.log, op.submit(h, pa)
}

// prepareMirrorAppend fills a with the verbatim mirror append of set by
// writer w stating the log end expect (and the source high watermark
// sourceHW the writer fetched it under, 0 unknown) at the request's time
// nowMs (the segment roll's clock), admitted by guard: the checks every
// mirror append makes before it is queued (ExpectedLogEndOffset given,
// verbatim validation) and the guard that admits it when it is written
// (writer fencing and the expected log end under the partition's append
// lock, then the topic's policies: produce_guard.go), whose settleMirror
// applies the KIP-1279 epoch rule once it completed. A pusher's wire
// mirror produce (produceOne) and a cluster link's in-process append
// (link_data.go) both go through it, so they are one write path; set is
// appended as given, never copied.
func prepareMirrorAppend(s *Server, p *Partition, l *storage.Log, set []byte, w mirrorWriter, expect, sourceHW, nowMs int64, durable bool,
	a *hotpath.Append, guard *produceGuard) (hotpath.Result, error) {
	var vr hotpath.Result
	if expect < 0 {
		return vr, kafkaErr(kerr.InvalidRequest, msgNoExpectedLogEnd)
	}
	if err := hotpath.Validate(set, &verbatimOptions, &vr); err != nil {
		return vr, err
	}
	*guard = produceGuard{s: s, p: p, log: l, set: set, mirror: true,
		writer: w, expected: expect, last: vr.LastOffset, maxEpoch: vr.MaxLeaderEpoch, sourceHW: sourceHW}
	*a = hotpath.Append{Set: set, Verbatim: true, LeaderEpoch: p.LeaderEpoch(), NowMs: nowMs, Durable: durable, Guard: guard}
	return vr, nil
}

// verbatimOptions are the validation options of every mirror append: verbatim
// mode needs nothing else (no topic limits, clock or decode budget). Validate
// only reads them; a package value keeps them off the heap, where a local
// went, since Validate's parameter escapes through normal mode.
var verbatimOptions = hotpath.Options{Mode: hotpath.Verbatim}

// hasPolicyOverride reports whether an ordinary topic binds policies with
// mirror.policies.
func hasPolicyOverride(cfg *TopicConfig) bool {
	_, ok := cfg.overrides[cfgMirrorPolicies]
	return ok
}

// hotpathConfig is what the hot path's validation needs of a topic config.
func hotpathConfig(c *TopicConfig) hotpath.TopicConfig {
	return hotpath.TopicConfig{
		Compacted:            c.CleanupPolicyCompact,
		LogAppendTime:        c.LogAppendTime,
		TimestampBeforeMaxMs: c.TimestampBeforeMaxMs,
		TimestampAfterMaxMs:  c.TimestampAfterMaxMs,
		MaxMessageBytes:      c.MaxMessageBytes,

		MaxDecompressedRecordBytes: c.MaxDecompressedMessageBytes,
		MaxDecompressedBatchBytes:  c.MaxDecompressedBatchBytes,
	}
}

// checkLeaderEpoch compares a client's view of the leader epoch with the
// partition's (KIP-320 for fetches, KIP-359's idea for produce); -1 is no
// check.
func checkLeaderEpoch(p *Partition, epoch int32) error {
	if epoch < 0 {
		return nil
	}
	cur := p.LeaderEpoch()
	switch {
	case epoch > cur:
		return kafkaErr(kerr.UnknownLeaderEpoch, fmt.Sprintf("leader epoch %d is newer than the partition's %d", epoch, cur))
	case epoch < cur:
		return kafkaErr(kerr.FencedLeaderEpoch, fmt.Sprintf("leader epoch %d is older than the partition's %d", epoch, cur))
	}
	return nil
}

// msgNoExpectedLogEnd refuses a mirror produce whose partition carries no
// usable MirrorPartition value.
var msgNoExpectedLogEnd = fmt.Sprintf("mirror produce without ExpectedLogEndOffset (partition tag %d)", wireext.MirrorTag)

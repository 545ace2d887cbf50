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
//     INVALID_REQUIRED_ACKS for every partition.
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
//     (FENCED_LEADER_EPOCH / UNKNOWN_LEADER_EPOCH); a writer (WriterEpoch,
//     then WriterID as tie-breaker, mirror_writer.go) below the highest
//     the partition has seen is PRODUCER_FENCED, and once a
//     mirror stop began mirror produces get POLICY_VIOLATION. After an append the
//     partition's leader epoch is kept ahead of every stored batch epoch
//     (KIP-1279: raised to the batch epoch + 10 when one comes within 3).
//   - The topic's WASM policies (mirror.policies, docs/policies.md; the
//     defaults on mirror topics) judge each record set after the hot path's
//     checks and before the append; a rejection refuses the partition's
//     whole set with the policy's error.
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
//
// Deviations from Apache Kafka:
//   - Compressed batches on CreateTime topics are checked against the
//     timestamp bounds from their header (BaseTimestamp, MaxTimestamp)
//     without decompressing each record (hot path option ExactTimestamps
//     off); uncompressed batches are checked record by record as Kafka does.
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

type produceReply struct{ *hotpath.ProduceResponse }

func (r produceReply) IsFlexible() bool { return r.Version >= 9 }

func handleProduce(_ context.Context, s *Server, r *Request) (Reply, error) {
	req := producePool.Get().(*hotpath.ProduceRequest)
	defer producePool.Put(req)
	if err := req.Decode(r.Body, r.Version); err != nil {
		return nil, err
	}
	var mreq *wireext.MirrorProduce
	if req.HasMirror {
		mreq = &req.Mirror
	}
	op := &produceOp{
		resp: &hotpath.ProduceResponse{Version: r.Version, Topics: make([]hotpath.ProduceTopicResponse, len(req.Topics))},
		acks: req.Acks,
		// Appends are referenced by the partition queues: the slice
		// never grows past its capacity.
		pend: make([]pendingAppend, 0, req.NumPartitions()),
	}
	acksOK := req.Acks == 0 || req.Acks == 1 || req.Acks == -1
	durable := req.Acks == -1 && s.flushPolicy() == storage.FlushAlways
	now := time.Now().UnixMilli()
	for ti := range req.Topics {
		rt := &req.Topics[ti]
		out := &op.resp.Topics[ti]
		out.Name, out.ID = rt.Name, rt.ID
		out.Partitions = make([]hotpath.ProducePartitionResponse, len(rt.Partitions))
		var t *Topic
		var topicErr *kerr.Error
		if r.Version >= 13 {
			if t = s.cluster.topicByID(rt.ID); t == nil {
				topicErr = kerr.UnknownTopicID
			}
		} else if t = s.cluster.topic(string(rt.Name)); t == nil {
			topicErr = kerr.UnknownTopicOrPartition
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
				pr.ErrorCode = kerr.InvalidRequiredAcks.Code
				continue
			case topicErr != nil:
				pr.ErrorCode = topicErr.Code
				continue
			}
			p := t.Partition(rp.Index)
			if p == nil {
				pr.ErrorCode = kerr.UnknownTopicOrPartition.Code
				continue
			}
			res, err := s.produceOne(op, p, pr, r.Version, req.TransactionalID, rp.Records, mreq, mp, now, durable)
			if err != nil {
				setProduceError(pr, err, res.log)
				continue
			}
			if res.submitted {
				continue // answered once the queue completes it
			}
			pr.BaseOffset, pr.LogAppendTimeMs, pr.LogStartOffset = res.base, res.appendTime, res.logStart
			if durable && res.upTo > 0 {
				op.waits = append(op.waits, durableWait{pr: pr, log: res.log, upTo: res.upTo})
			}
		}
	}
	if len(op.pend) == 0 && len(op.waits) == 0 {
		if req.Acks == 0 {
			return nil, nil
		}
		return produceReply{op.resp}, nil
	}
	op.registerWaits()
	return Defer(op), nil
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

// produceOp is a produce request whose appends are in the partition
// queues (and, for acks=-1 under --flush always, waiting for the group
// commit). The connection writer resolves it in request order.
type produceOp struct {
	resp *hotpath.ProduceResponse
	acks int16
	pend []pendingAppend
	// waits are mirror appends (written synchronously) whose answer
	// waits for durability.
	waits []durableWait
	done  chan durableResult
}

// pendingAppend is one partition's append submitted to its queue.
type pendingAppend struct {
	a          hotpath.Append
	g          *hotpath.Group
	p          *Partition
	log        *storage.Log
	pr         *hotpath.ProducePartitionResponse
	appendTime int64
}

// durableWait is one mirror partition whose acks=-1 answer waits for
// durability.
type durableWait struct {
	pr   *hotpath.ProducePartitionResponse
	log  *storage.Log
	upTo int64
}

type durableResult struct {
	i   int
	err error
}

func (op *produceOp) registerWaits() {
	if len(op.waits) == 0 {
		return
	}
	op.done = make(chan durableResult, len(op.waits))
	for i := range op.waits {
		op.waits[i].log.OnDurable(op.waits[i].upTo, func(err error) { op.done <- durableResult{i, err} })
	}
}

// Await waits for the queued appends and the durability of mirror appends,
// then fills their partition answers. A partition whose write or sync
// fails is answered with its error (KAFKA_STORAGE_ERROR for I/O).
func (op *produceOp) Await(ctx context.Context) (Reply, error) {
	for i := range op.pend {
		pa := &op.pend[i]
		select {
		case <-pa.g.Done():
		case <-ctx.Done():
			return nil, fmt.Errorf("waiting for appends: %w", ctx.Err())
		}
		if pa.a.Err != nil {
			setProduceError(pa.pr, pa.a.Err, pa.log)
			continue
		}
		ar := &pa.a.Result
		pa.pr.BaseOffset, pa.pr.LogStartOffset, pa.pr.LogAppendTimeMs = ar.FirstOffset, ar.LogStartOffset, pa.appendTime
		if ar.Duplicate {
			pa.pr.LogAppendTimeMs = -1
		} else {
			pa.p.notifyAppend()
		}
	}
	for range op.waits {
		select {
		case r := <-op.done:
			if r.err != nil {
				setProduceError(op.waits[r.i].pr, r.err, nil)
			}
		case <-ctx.Done():
			return nil, fmt.Errorf("waiting for durability: %w", ctx.Err())
		}
	}
	if op.acks == 0 {
		return nil, nil
	}
	return produceReply{op.resp}, nil
}

// produced is the outcome of one partition's produce when it was answered
// without the queue's completion (refusals and mirror appends).
type produced struct {
	log        *storage.Log
	submitted  bool
	base       int64
	appendTime int64
	logStart   int64
	// upTo is the offset below which the appended data must be durable
	// before acks=-1 is answered (0: nothing to wait for).
	upTo int64
}

// produceOne validates one partition's record set and submits it to the
// partition's queue (normal mode) or appends it (mirror mode). mreq is the
// request's MirrorProduce value and mp the partition's MirrorPartition,
// each nil when absent.
func (s *Server) produceOne(op *produceOp, p *Partition, pr *hotpath.ProducePartitionResponse, version int16, txnID, set []byte,
	mreq *wireext.MirrorProduce, mp *wireext.MirrorPartition, now int64, durable bool) (produced, error) {
	h, err := partitionHandle(p)
	if err != nil {
		return produced{}, err
	}
	out := produced{log: h.log}
	if isInternalTopic(p.Topic.Name) {
		// Only the coordinators write their topics (Kafka's
		// ReplicaManager refuses clients the same way).
		return out, kafkaErr(kerr.InvalidTopicException, "Cannot append to internal topic "+p.Topic.Name)
	}
	cfg := p.Topic.Config()
	mirror := mreq != nil
	switch {
	case cfg.MirrorPush && !mirror:
		return out, kafkaErr(kerr.PolicyViolation, fmt.Sprintf("topic %s is a mirror topic (mirror.mode=push): only mirror produces (docs/protocol.md) may write to it", p.Topic.Name))
	case !cfg.MirrorPush && mirror:
		return out, kafkaErr(kerr.PolicyViolation, fmt.Sprintf("topic %s is not a mirror topic: mirror produces need mirror.mode=push", p.Topic.Name))
	}
	if mp != nil {
		if err := checkLeaderEpoch(p, mp.CurrentLeaderEpoch); err != nil {
			return out, err
		}
		if !mirror && mp.ExpectedLogEndOffset != -1 {
			return out, kafkaErr(kerr.InvalidRequest, "ExpectedLogEndOffset is only allowed in mirror produces")
		}
	}
	if mirror {
		return s.appendMirror(p, h, set, writerOf(mreq), mp, out)
	}
	opts := hotpath.Options{Mode: hotpath.Normal, Topic: hotpathConfig(cfg), ProduceVersion: version, NowMs: now}
	var vr hotpath.Result
	if err := hotpath.Validate(set, &opts, &vr); err != nil {
		return out, err
	}
	if err := s.verifyTxnProduce(txnID, p, set); err != nil {
		return out, err
	}
	if _, ok := cfg.overrides[cfgMirrorPolicies]; ok {
		// An ordinary topic with mirror.policies: judged as sent
		// (docs/policies.md).
		if err := s.judgePolicies(p, h.log, set, h.log.LogEndOffset()); err != nil {
			return out, err
		}
	}
	// One group per append: a group signals once per round, and appends
	// written inline complete before the next partition is submitted.
	op.pend = append(op.pend, pendingAppend{p: p, log: h.log, pr: pr, appendTime: vr.LogAppendTimeMs, g: hotpath.NewGroup(),
		a: hotpath.Append{Set: set, LeaderEpoch: p.LeaderEpoch(), NowMs: now, Durable: durable}})
	pa := &op.pend[len(op.pend)-1]
	pa.g.Add(1)
	if err := h.queue.Submit(context.Background(), pa.g, &pa.a); err != nil {
		op.pend = op.pend[:len(op.pend)-1]
		return out, fmt.Errorf("%w: %v", storage.ErrClosed, err)
	}
	out.submitted = true
	return out, nil
}

// hotpathConfig is what the hot path's validation needs of a topic config.
func hotpathConfig(c *TopicConfig) hotpath.TopicConfig {
	return hotpath.TopicConfig{
		Compacted:            c.CleanupPolicyCompact,
		LogAppendTime:        c.LogAppendTime,
		TimestampBeforeMaxMs: c.TimestampBeforeMaxMs,
		TimestampAfterMaxMs:  c.TimestampAfterMaxMs,
		MaxMessageBytes:      c.MaxMessageBytes,
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

// appendMirror is the verbatim append of a mirror produce. It goes through
// the partition's queue (one writer per partition) and waits for the write
// under the partition's append lock, so the writer-epoch fencing
// (mirror_state.go), the expected-log-end check, the append and the
// leader-epoch bookkeeping are one step.
func (s *Server) appendMirror(p *Partition, h *logHandle, set []byte, writer mirrorWriter, mp *wireext.MirrorPartition, out produced) (produced, error) {
	if mp == nil || mp.ExpectedLogEndOffset < 0 {
		return out, kafkaErr(kerr.InvalidRequest, msgNoExpectedLogEnd)
	}
	var vr hotpath.Result
	if err := hotpath.Validate(set, &hotpath.Options{Mode: hotpath.Verbatim}, &vr); err != nil {
		return out, err
	}
	p.data.appendMu.Lock()
	defer p.data.appendMu.Unlock()
	if err := s.checkMirrorWriter(p, writer); err != nil {
		return out, err
	}
	l := h.log
	leo := l.LogEndOffset()
	mismatch := func() error {
		return kafkaErr(kerr.OffsetOutOfRange, fmt.Sprintf("mirror: expected log end %d, log end is %d", mp.ExpectedLogEndOffset, leo))
	}
	if mp.ExpectedLogEndOffset != leo && vr.LastOffset >= leo {
		// Only an identical retry of stored batches may disagree with the
		// log end; anything reaching past the end is refused unwritten.
		return out, mismatch()
	}
	if vr.LastOffset >= leo {
		// The topic's policies (docs/policies.md) judge what is new; an
		// identical retry of stored batches was judged when first
		// appended.
		if err := s.judgePolicies(p, l, set, leo); err != nil {
			return out, err
		}
	}
	g := hotpath.NewGroup()
	a := hotpath.Append{Set: set, Verbatim: true}
	g.Add(1)
	if err := h.queue.Submit(context.Background(), g, &a); err != nil {
		return out, fmt.Errorf("%w: %v", storage.ErrClosed, err)
	}
	g.Wait()
	if a.Err != nil {
		if mp.ExpectedLogEndOffset != leo && errors.Is(a.Err, storage.ErrOffsetBelowLogEnd) {
			return out, mismatch()
		}
		return out, a.Err
	}
	ar := a.Result
	out.base, out.logStart, out.appendTime = ar.FirstOffset, ar.LogStartOffset, -1
	if !ar.AlreadyPresent {
		p.notifyAppend()
	}
	out.upTo = ar.LastOffset + 1
	// The validation summary has the set's largest batch epoch: the set
	// is not walked again.
	if cur, want := p.LeaderEpoch(), storage.MirrorLeaderEpoch(p.LeaderEpoch(), vr.MaxLeaderEpoch); want != cur {
		if err := s.SetLeaderEpochAtLeast(p, want); err != nil {
			// The batches are stored; the epoch catches up on the next
			// append. Report the failure so the pusher retries.
			return out, err
		}
	}
	return out, nil
}

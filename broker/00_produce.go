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
//     the request-level tagged field 22082 write to mirror.mode=push
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
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/verbatim-kafka/verbatim/hotpath"
	"github.com/verbatim-kafka/verbatim/kbatch"
	"github.com/verbatim-kafka/verbatim/storage"
)

func init() {
	register(kmsg.Produce.Int16(), 0, hotpath.ProduceMaxVersion, handleProduce,
		advertisedButRefusedBelow(hotpath.ProduceMinVersion), rawBody())
}

// mirrorTag is the tag of Verbatim's mirror produce fields
// (docs/protocol.md), request level and partition level.
const mirrorTag = 22082

// mirrorProduceFeatureName is the ApiVersions supported feature a pusher
// must see before sending mirror produces.
const mirrorProduceFeatureName = "verbatim.mirror.produce"

func mirrorProduceFeature() kmsg.ApiVersionsResponseSupportedFeature {
	f := kmsg.NewApiVersionsResponseSupportedFeature()
	f.Name, f.MinVersion, f.MaxVersion = mirrorProduceFeatureName, 0, 1
	return f
}

// mirrorRequest is the request-level MirrorProduce field.
type mirrorRequest struct {
	Version     int16
	WriterEpoch int32
	// WriterID breaks writer-epoch ties (feature version 1, its tagged
	// field 0; zero when absent), mirror_writer.go.
	WriterID [16]byte
}

// mirrorPartition is the partition-level field.
type mirrorPartition struct {
	present              bool
	Version              int16
	ExpectedLogEndOffset int64
	CurrentLeaderEpoch   int32
}

var producePool = sync.Pool{New: func() any { return new(produceState) }}

// produceState is the reusable per-request decoding state.
type produceState struct {
	req   hotpath.ProduceRequest
	parts []mirrorPartition
}

type produceReply struct{ *hotpath.ProduceResponse }

func (r produceReply) IsFlexible() bool { return r.Version >= 9 }

func handleProduce(_ context.Context, s *Server, r *Request) (Reply, error) {
	st := producePool.Get().(*produceState)
	defer producePool.Put(st)
	req := &st.req
	if err := req.Decode(r.Body, r.Version); err != nil {
		return nil, err
	}
	var mreq *mirrorRequest
	st.parts = st.parts[:0]
	if r.Version >= 9 {
		var err error
		if mreq, st.parts, err = scanProduceTags(r.Body, r.Version, st.parts); err != nil {
			return nil, err
		}
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
	pi := 0
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
			var mp mirrorPartition
			if pi < len(st.parts) {
				mp = st.parts[pi]
			}
			pi++
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
			res, err := s.produceOne(op, p, pr, r.Version, req.TransactionalID, rp.Records, mreq, &mp, now, durable)
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
// partition's queue (normal mode) or appends it (mirror mode).
func (s *Server) produceOne(op *produceOp, p *Partition, pr *hotpath.ProducePartitionResponse, version int16, txnID, set []byte,
	mreq *mirrorRequest, mp *mirrorPartition, now int64, durable bool) (produced, error) {
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
	if mp.present {
		if err := checkLeaderEpoch(p, mp.CurrentLeaderEpoch); err != nil {
			return out, err
		}
		if !mirror && mp.ExpectedLogEndOffset != -1 {
			return out, kafkaErr(kerr.InvalidRequest, "ExpectedLogEndOffset is only allowed in mirror produces")
		}
	}
	if mirror {
		return s.appendMirror(p, h, set, mreq.writer(), mp, out)
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

// appendMirror is the verbatim append of a mirror produce. It goes through
// the partition's queue (one writer per partition) and waits for the write
// under the partition's append lock, so the writer-epoch fencing
// (mirror_state.go), the expected-log-end check, the append and the
// leader-epoch bookkeeping are one step.
func (s *Server) appendMirror(p *Partition, h *logHandle, set []byte, writer mirrorWriter, mp *mirrorPartition, out produced) (produced, error) {
	if !mp.present || mp.ExpectedLogEndOffset < 0 {
		return out, kafkaErr(kerr.InvalidRequest, "mirror produce without ExpectedLogEndOffset (partition tag 22082)")
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
	maxEpoch := int32(-1)
	for b := set; len(b) >= kbatch.HeaderSize; {
		if e := kbatch.LeaderEpoch(b); e > maxEpoch {
			maxEpoch = e
		}
		b = b[kbatch.LogOverhead+int(kbatch.Length(b)):]
	}
	if cur, want := p.LeaderEpoch(), storage.MirrorLeaderEpoch(p.LeaderEpoch(), maxEpoch); want != cur {
		if err := s.SetLeaderEpochAtLeast(p, want); err != nil {
			// The batches are stored; the epoch catches up on the next
			// append. Report the failure so the pusher retries.
			return out, err
		}
	}
	return out, nil
}

// scanProduceTags walks a flexible (v9+) Produce body that hotpath's
// decoder accepted and extracts Verbatim's mirror fields: the request-level
// MirrorProduce (nil when absent) and, per partition in request order, the
// partition-level field. Other tags are skipped, as the protocol requires.
func scanProduceTags(body []byte, version int16, parts []mirrorPartition) (*mirrorRequest, []mirrorPartition, error) {
	rd := tagReader{b: body}
	rd.skip(rd.compactLen()) // transactional id
	rd.skip(2 + 4)           // acks, timeout
	nt := rd.compactLen()
	for t := 0; t < nt && !rd.bad; t++ {
		if version >= 13 {
			rd.skip(16)
		} else {
			rd.skip(rd.compactLen())
		}
		np := rd.compactLen()
		for i := 0; i < np && !rd.bad; i++ {
			rd.skip(4)
			rd.skip(rd.compactLen()) // records
			var mp mirrorPartition
			rd.tags(func(tag uint64, v []byte) error {
				if tag != mirrorTag {
					return nil
				}
				return mp.decode(v)
			})
			parts = append(parts, mp)
		}
		rd.tags(nil)
	}
	var mreq *mirrorRequest
	rd.tags(func(tag uint64, v []byte) error {
		if tag != mirrorTag {
			return nil
		}
		mreq = new(mirrorRequest)
		return mreq.decode(v)
	})
	if rd.err != nil {
		return nil, parts, fmt.Errorf("%w: %v", hotpath.ErrMalformedRequest, rd.err)
	}
	if rd.bad {
		return nil, parts, fmt.Errorf("%w: truncated tagged fields", hotpath.ErrMalformedRequest)
	}
	return mreq, parts, nil
}

func (m *mirrorRequest) decode(v []byte) error {
	rd := tagReader{b: v}
	m.Version = int16(rd.uint(2))
	m.WriterEpoch = int32(rd.uint(4))
	rd.tags(m.decodeTag)
	if rd.bad || rd.err != nil || m.Version < 0 {
		return errors.New("malformed MirrorProduce request field (tag 22082)")
	}
	return nil
}

func (m *mirrorPartition) decode(v []byte) error {
	rd := tagReader{b: v}
	m.Version = int16(rd.uint(2))
	m.ExpectedLogEndOffset = int64(rd.uint(8))
	m.CurrentLeaderEpoch = int32(rd.uint(4))
	rd.tags(nil)
	if rd.bad || m.Version < 0 {
		return errors.New("malformed MirrorProduce partition field (tag 22082)")
	}
	m.present = true
	return nil
}

// tagReader is a sticky-error reader for the flexible encoding.
type tagReader struct {
	b   []byte
	bad bool
	err error
}

func (r *tagReader) uvarint() uint64 {
	v, n := binary.Uvarint(r.b)
	if n <= 0 || v > 1<<31 {
		r.bad, r.b = true, nil
		return 0
	}
	r.b = r.b[n:]
	return v
}

// compactLen reads a compact length (N+1; 0 = null, returned as 0).
func (r *tagReader) compactLen() int {
	n := int(r.uvarint())
	if n == 0 {
		return 0
	}
	return n - 1
}

func (r *tagReader) skip(n int) {
	if r.bad || n < 0 || n > len(r.b) {
		r.bad, r.b = true, nil
		return
	}
	r.b = r.b[n:]
}

func (r *tagReader) uint(n int) uint64 {
	if r.bad || len(r.b) < n {
		r.bad, r.b = true, nil
		return 0
	}
	var v uint64
	for _, c := range r.b[:n] {
		v = v<<8 | uint64(c)
	}
	r.b = r.b[n:]
	return v
}

// tags reads a tagged-field section, calling fn (if not nil) per field.
func (r *tagReader) tags(fn func(tag uint64, v []byte) error) {
	n := r.uvarint()
	for ; n > 0 && !r.bad; n-- {
		tag := r.uvarint()
		size := int(r.uvarint())
		if r.bad || size > len(r.b) {
			r.bad, r.b = true, nil
			return
		}
		v := r.b[:size:size]
		r.b = r.b[size:]
		if fn != nil && r.err == nil {
			if err := fn(tag, v); err != nil {
				r.err = err
			}
		}
	}
}

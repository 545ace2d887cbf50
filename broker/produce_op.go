package broker

// A produce request's state from decode to the written answer (produceOp,
// pooled) and its appends in the partition queues (pendingAppend): how they
// are submitted, awaited in request order and released. The handler and the
// per-partition checks are in 00_produce.go.

import (
	"context"
	"fmt"
	"sync"

	"github.com/verbatim-kafka/verbatim/hotpath"
	"github.com/verbatim-kafka/verbatim/kbatch"
	"github.com/verbatim-kafka/verbatim/storage"
)

// produceOp is one produce request from decode to the written answer:
// its response, and its appends while they are in the partition queues
// (and, for acks=-1 under --flush always, waiting for the group commit).
// It is the handler's deferred reply; the connection writer resolves it in
// request order and releases it once the answer is written. Pooled: a
// request costs no allocation of its own once the pool is warm.
type produceOp struct {
	resp hotpath.ProduceResponse
	acks int16
	// pend are the submitted appends. The slice never grows past the
	// capacity set before the first submit: the partition queues hold
	// pointers into it.
	pend []pendingAppend
	// waited counts the appends whose completion Await has received;
	// settled is set once no queue references pend any more (Await saw
	// every completion): only then may the op go back to the pool.
	waited  int
	settled bool

	// s, client and mirror are for the failure lines (noteFailure).
	s      *Server
	client clientInfo
	mirror bool
	// startMs and timeoutMs bound an acks=all wait for the ISR (cluster
	// mode, replica_leader.go).
	startMs   int64
	timeoutMs int32
	// opts is produceOne's scratch for a normal append's validation
	// options, zero between uses.
	opts hotpath.Options
}

var produceOps = sync.Pool{New: func() any { return new(produceOp) }}

func getProduceOp(version, acks int16, topics, partitions int) *produceOp {
	op := produceOps.Get().(*produceOp)
	op.resp.Version, op.acks, op.waited, op.settled = version, acks, 0, false
	op.resp.Topics = resize(op.resp.Topics, topics)
	if cap(op.pend) < partitions {
		op.pend = make([]pendingAppend, 0, partitions)
	}
	op.pend = op.pend[:0]
	return op
}

// Release returns op to the pool once its answer has been written (the
// connection writer calls it). An op whose appends may still be queued
// (its Await was cut short) is left to the garbage collector.
func (op *produceOp) Release() {
	if !op.settled {
		return
	}
	for i := range op.pend {
		pa := &op.pend[i]
		pa.a, pa.guard, pa.p, pa.log, pa.pr = hotpath.Append{}, produceGuard{}, nil, nil, nil
	}
	op.pend = op.pend[:0]
	for i := range op.resp.Topics {
		t := &op.resp.Topics[i]
		clear(t.Partitions)
		t.Name, t.Partitions = nil, t.Partitions[:0]
	}
	op.resp.NodeEndpoints = nil
	op.s, op.client = nil, clientInfo{}
	produceOps.Put(op)
}

// Settled and ReleaseWhenSettled keep the request frame, which queued
// appends still read, from being recycled when the connection gives up on
// the answer (frameHolder).
func (op *produceOp) Settled() bool { return op.settled }

func (op *produceOp) ReleaseWhenSettled(release func()) {
	go func() {
		for i := op.waited; i < len(op.pend); i++ {
			<-op.pend[i].g.Done()
		}
		release()
	}()
}

// AppendTo and IsFlexible make the op its own reply (no boxing per
// request); produceReply is the answer Await hands the writer.
func (op *produceOp) AppendTo(dst []byte) []byte { return op.resp.AppendTo(dst) }
func (op *produceOp) IsFlexible() bool           { return op.resp.Version >= 9 }

// produceReply is an awaited op's answer. It is a distinct value so the
// writer releases the op once (as the deferred reply), not twice.
type produceReply struct{ op *produceOp }

func (r produceReply) AppendTo(dst []byte) []byte { return r.op.resp.AppendTo(dst) }
func (r produceReply) IsFlexible() bool           { return r.op.resp.Version >= 9 }

// pendingAppend is one partition's append submitted to its queue. Its
// group and guard are reused with the pooled op.
type pendingAppend struct {
	a          hotpath.Append
	records    int64 // the set's record count, for the metrics
	g          hotpath.Group
	guard      produceGuard
	p          *Partition
	log        *storage.Log
	pr         *hotpath.ProducePartitionResponse
	appendTime int64
}

// Await waits for the queued appends, then fills their partition answers.
// A partition whose write or sync fails is answered with its error
// (KAFKA_STORAGE_ERROR for I/O).
func (op *produceOp) Await(ctx context.Context) (Reply, error) {
	for i := range op.pend {
		pa := &op.pend[i]
		if err := awaitReady(ctx, pa.g.Done()); err != nil {
			return nil, fmt.Errorf("waiting for appends: %w", err)
		}
		op.waited = i + 1
		if err := pa.settle(); err != nil {
			op.noteFailure(pa.p.Topic.Name, pa.p.Index, pa.pr.ErrorCode, err, pa.a.Set)
			continue
		} else if ar := &pa.a.Result; !ar.Duplicate && !ar.AlreadyPresent {
			m := op.s.topicMetrics(pa.p.Topic)
			m.BytesIn.Add(float64(len(pa.a.Set)))
			m.MessagesIn.Add(float64(pa.records))
		}
		if op.acks == -1 && pa.p.repl.Load() != nil {
			// Cluster mode: answered once the ISR has it.
			if err := op.awaitISR(ctx, pa); err != nil {
				setProduceError(pa.pr, err, pa.log)
				op.noteFailure(pa.p.Topic.Name, pa.p.Index, pa.pr.ErrorCode, err, nil)
			}
		}
	}
	op.settled = true
	for ti := range op.resp.Topics {
		for _, pr := range op.resp.Topics[ti].Partitions {
			op.s.apiError(produceKey, pr.ErrorCode)
		}
	}
	if op.acks == 0 {
		return nil, nil
	}
	return produceReply{op}, nil
}

// settle fills the partition answer of a completed append and returns
// the append's error.
func (pa *pendingAppend) settle() error {
	err := pa.a.Err
	if pa.guard.mirror {
		err = pa.guard.settleMirror(err)
	}
	if err != nil {
		setProduceError(pa.pr, err, pa.log)
		return err
	}
	ar := &pa.a.Result
	pa.pr.BaseOffset, pa.pr.LogStartOffset, pa.pr.LogAppendTimeMs = ar.FirstOffset, ar.LogStartOffset, pa.appendTime
	if ar.Duplicate || ar.AlreadyPresent {
		// Nothing new in the log: no fetch to wake, and no append
		// time (a duplicate has its original one, which Kafka does not
		// report either).
		pa.pr.LogAppendTimeMs = -1
		return nil
	}
	pa.p.notifyAppend()
	return nil
}

// noteFailure logs one refused or failed partition of the request, once
// (faultlog.go); set is the partition's record set when known.
func (op *produceOp) noteFailure(topic string, partition int32, code int16, err error, set []byte) {
	if op.mirror && len(set) >= kbatch.HeaderSize {
		op.s.logDataFailure("produce", topic, partition, code, err, op.client, "mirror", true, "offset", kbatch.BaseOffset(set))
		return
	}
	op.s.logDataFailure("produce", topic, partition, code, err, op.client)
}

// submit queues pa, the op's last pending entry, to its partition.
func (op *produceOp) submit(h *logHandle, pa *pendingAppend) error {
	pa.g.Add(1)
	if err := h.queue.Submit(context.Background(), &pa.g, &pa.a); err != nil {
		op.pend = op.pend[:len(op.pend)-1]
		return fmt.Errorf("%w: %v", storage.ErrClosed, err)
	}
	return nil
}

// add takes the next pending entry, with an empty group of its own: a
// group signals once per round, and appends written inline complete
// before the next partition is submitted.
func (op *produceOp) add() *pendingAppend {
	op.pend = op.pend[:len(op.pend)+1]
	pa := &op.pend[len(op.pend)-1]
	pa.g.Reset()
	return pa
}

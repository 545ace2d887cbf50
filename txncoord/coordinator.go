package txncoord

// The transaction coordinator's requests.
//
// Each transactional id has its metadata in memory, guarded by the
// coordinator's mutex, and durably as TxnMetadataKey/Value records in
// __transaction_state (partition = abs(hash(id)) mod partitions), written
// before every answer that depends on them. States and transitions follow
// Kafka's TransactionCoordinator:
//
//	Empty/CompleteCommit/CompleteAbort --AddPartitions/AddOffsets--> Ongoing
//	Ongoing --EndTxn--> PrepareCommit|PrepareAbort --markers written-->
//	CompleteCommit|CompleteAbort
//	Ongoing --timeout or InitProducerId of a new instance--> epoch bump,
//	PrepareAbort -> CompleteAbort (the old producer is fenced)
//
// A transition is decided under the mutex, which then marks the
// transaction busy and is released while the record and markers are
// written (Host); the outcome is applied under the mutex again. A failed
// record write leaves the transaction as it was and is answered
// COORDINATOR_NOT_AVAILABLE.

import (
	"log/slog"
	"math"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/verbatim-kafka/verbatim/coordlog"
)

// transaction.max.timeout.ms
const txnMaxTimeout = 15 * time.Minute

// Host is what the transaction coordinator needs of the broker. Apart
// from Load's Replay (before the coordinator serves), no method is called
// with the coordinator's lock held, so every one may call back into it.
type Host interface {
	// Log stores __transaction_state.
	coordlog.Log
	// PartitionExists reports whether tp can join a transaction
	// (__consumer_offsets counts, created on demand).
	PartitionExists(tp coordlog.TopicPartition) bool
	// CoordinatorEpoch is the epoch written into markers: the leader
	// epoch of partition p of __transaction_state, as in Kafka.
	CoordinatorEpoch(p int32) int32
	// WriteMarker appends a COMMIT or ABORT marker for producer
	// pid/epoch to tp: coordlog.ErrPartitionGone if tp no longer exists,
	// an error with coordlog.ErrFenced if tp has seen a newer producer
	// or coordinator epoch. A marker written to __consumer_offsets also
	// settles the producer's transactional offsets there.
	WriteMarker(tp coordlog.TopicPartition, pid int64, epoch int16, commit bool, coordinatorEpoch int32, now time.Time) error
	// AllocateProducerID returns a producer id never handed out before.
	AllocateProducerID() (int64, error)
	// EnsureProducerIDsAbove makes later allocations return ids above min.
	EnsureProducerIDsAbove(min int64) error
	// MaxLoggedProducerID is the highest producer id in the producer
	// state of any partition, or -1.
	MaxLoggedProducerID() int64
}

// Config is what a Coordinator is built from.
type Config struct {
	Host  Host
	Clock coordlog.Clock
	// Logger gets the coordinator's warnings; nil discards them.
	Logger *slog.Logger
	// PerPartition (cluster mode): the coordinator serves only the
	// partitions given to LoadPartition (partitions.go); false: every
	// transactional id, loaded by Load (a single node).
	PerPartition bool
}

// Coordinator coordinates the transactional ids of the
// __transaction_state partitions this node owns: every one on a single
// node, those it leads in cluster mode (partitions.go).
type Coordinator struct {
	host  Host
	clock coordlog.Clock
	lg    *slog.Logger

	mu   sync.Mutex
	txns map[string]*txnMeta
	// lastPidScan is when Tick last scanned the logs' producer ids.
	lastPidScan time.Time
	// owned are the partitions served (partitions.go; none after
	// Shutdown).
	owned *coordlog.Owned
}

// New returns a coordinator with no transactions; Load recovers them.
func New(cfg Config) *Coordinator {
	lg := cfg.Logger
	if lg == nil {
		lg = slog.New(slog.DiscardHandler)
	}
	return &Coordinator{host: cfg.Host, clock: cfg.Clock, lg: lg, txns: map[string]*txnMeta{},
		owned: coordlog.NewOwned(cfg.PerPartition)}
}

// PartitionFor is the __transaction_state partition of a transactional id.
func (c *Coordinator) PartitionFor(id string) int32 {
	return coordlog.PartitionForKey(id, c.host.PartitionCount(coordlog.TxnStateTopic))
}

// claim marks m busy; called with c.mu held and m not busy.
func (c *Coordinator) claim(m *txnMeta) { m.busy = make(chan struct{}) }

// release ends m's transition; called with c.mu held.
func (c *Coordinator) release(m *txnMeta) {
	close(m.busy)
	m.busy = nil
}

// releaseLocking is release taking c.mu.
func (c *Coordinator) releaseLocking(m *txnMeta) {
	c.mu.Lock()
	c.release(m)
	c.mu.Unlock()
}

// persist writes t's record; called without c.mu.
func (c *Coordinator) persist(t txnData, now time.Time) error {
	return c.host.Append(coordlog.TxnStateTopic, c.PartitionFor(t.id), []coordlog.Record{record(t, now)}, coordlog.Batch{}, now)
}

// persistFailed logs a transaction record persist could not write, once
// (the callers answer with a code only), and returns the code to answer:
// the one the log gave (a storage error is NOT_COORDINATOR, as Kafka's
// TransactionStateManager answers), else COORDINATOR_NOT_AVAILABLE.
func (c *Coordinator) persistFailed(id string, err error) int16 {
	c.lg.Error("transaction state not stored", "topic", coordlog.TxnStateTopic, "partition", c.PartitionFor(id), "transactional_id", id, "err", err)
	return coordlog.CodeOf(err, kerr.CoordinatorNotAvailable.Code)
}

// apply makes t the state of m after its record was written at now;
// called with c.mu held.
func (m *txnMeta) apply(t txnData, now time.Time) {
	m.txnData = t
	m.updateTs = now
}

// InitResult is the answer to InitProducerId.
type InitResult struct {
	Code  int16
	PID   int64
	Epoch int16
}

// InitProducerID is InitProducerId with a transactional id.
func (c *Coordinator) InitProducerID(id string, timeoutMs int32, reqPid int64, reqEpoch int16) InitResult {
	fail := func(e *kerr.Error) InitResult { return InitResult{Code: e.Code, PID: -1, Epoch: -1} }
	if id == "" {
		return fail(kerr.InvalidRequest)
	}
	timeout := time.Duration(timeoutMs) * time.Millisecond
	if timeoutMs <= 0 || timeout > txnMaxTimeout {
		return fail(kerr.InvalidTransactionTimeout)
	}
	now := c.clock.Now()
	c.mu.Lock()
	if e := c.refusal(id); e != nil {
		c.mu.Unlock()
		return fail(e)
	}
	m := c.txns[id]
	if m == nil {
		// A placeholder (no producer id yet) holds the id while its
		// first record is written.
		m = &txnMeta{txnData: txnData{id: id, pid: -1, lastPid: -1, lastEpoch: -1, timeout: timeout, state: txnEmpty,
			parts: map[coordlog.TopicPartition]bool{}}}
		c.claim(m)
		c.txns[id] = m
		t := m.snapshot()
		c.mu.Unlock()
		code := kerr.CoordinatorNotAvailable.Code
		pid, err := c.host.AllocateProducerID()
		if err == nil {
			t.pid = pid
			if err = c.persist(t, now); err != nil {
				code = c.persistFailed(id, err)
			}
		}
		c.mu.Lock()
		defer c.mu.Unlock()
		c.release(m)
		if err != nil {
			if c.txns[id] == m {
				delete(c.txns, id)
			}
			return InitResult{Code: code, PID: -1, Epoch: -1}
		}
		m.apply(t, now)
		return InitResult{PID: t.pid, Epoch: t.epoch}
	}
	if reqPid >= 0 {
		switch {
		case reqPid == m.pid && reqEpoch == m.epoch:
		case reqPid == m.lastPid && reqEpoch == m.lastEpoch && m.state != txnOngoing:
			// A retry of a bump that already happened (KIP-360).
			res := InitResult{PID: m.pid, Epoch: m.epoch}
			c.mu.Unlock()
			return res
		default:
			c.mu.Unlock()
			return fail(kerr.ProducerFenced)
		}
	}
	if m.busy != nil || m.offsetWrites > 0 {
		c.mu.Unlock()
		return fail(kerr.ConcurrentTransactions)
	}
	switch m.state {
	case txnPrepareCommit, txnPrepareAbort, txnPrepareEpochFence:
		c.mu.Unlock()
		return fail(kerr.ConcurrentTransactions)
	}
	ongoing := m.state == txnOngoing
	c.claim(m)
	c.mu.Unlock()
	defer c.releaseLocking(m)
	if ongoing {
		// A new instance fences the old one: abort its transaction
		// with a bumped epoch, then bump again for the new instance.
		if code := c.end(m, false, true, now); code != 0 {
			return InitResult{Code: code, PID: -1, Epoch: -1}
		}
	}
	c.mu.Lock()
	t := m.snapshot()
	c.mu.Unlock()
	if ongoing && t.state != txnCompleteAbort {
		return fail(kerr.ConcurrentTransactions)
	}
	t.lastPid, t.lastEpoch = t.pid, t.epoch
	if t.epoch >= math.MaxInt16-1 {
		pid, err := c.host.AllocateProducerID()
		if err != nil {
			return fail(kerr.CoordinatorNotAvailable)
		}
		t.pid, t.epoch = pid, 0
	} else {
		t.epoch++
	}
	t.timeout = timeout
	t.state = txnEmpty
	t.parts = map[coordlog.TopicPartition]bool{}
	t.startTs = time.Time{}
	if err := c.persist(t, now); err != nil {
		return InitResult{Code: c.persistFailed(id, err), PID: -1, Epoch: -1}
	}
	c.mu.Lock()
	m.apply(t, now)
	c.mu.Unlock()
	return InitResult{PID: t.pid, Epoch: t.epoch}
}

// checkProducer validates pid and epoch against m.
func checkProducer(m *txnMeta, pid int64, epoch int16) int16 {
	if m == nil || m.pid != pid {
		return kerr.InvalidProducerIDMapping.Code
	}
	if m.epoch != epoch {
		return kerr.ProducerFenced.Code
	}
	return 0
}

// AddPartitions is AddPartitionsToTxn (and AddOffsetsToTxn, with the
// group's __consumer_offsets partition); it returns one code per tp.
// verifyOnly is KIP-890's check of a transactional produce: nothing is
// added.
func (c *Coordinator) AddPartitions(id string, pid int64, epoch int16, tps []coordlog.TopicPartition, verifyOnly bool) []int16 {
	codes := make([]int16, len(tps))
	var missing []bool // looked up once the request passed its checks
	for {
		now := c.clock.Now()
		c.mu.Lock()
		m, code := c.addable(id, pid, epoch)
		if code != 0 {
			c.mu.Unlock()
			return setAll(codes, code)
		}
		if verifyOnly {
			for i, tp := range tps {
				if m.state != txnOngoing || !m.parts[tp] {
					codes[i] = kerr.InvalidTxnState.Code
				}
			}
			c.mu.Unlock()
			return codes
		}
		if missing == nil {
			// Looked up without the lock (it may create
			// __consumer_offsets); the checks then run again.
			c.mu.Unlock()
			missing = make([]bool, len(tps))
			for i, tp := range tps {
				missing[i] = !c.host.PartitionExists(tp)
			}
			continue
		}
		return c.add(m, tps, missing, codes, now)
	}
}

// addable checks an AddPartitions against the transaction; called with
// c.mu held.
func (c *Coordinator) addable(id string, pid int64, epoch int16) (*txnMeta, int16) {
	if e := c.refusal(id); e != nil {
		return nil, e.Code
	}
	m := c.txns[id]
	if code := checkProducer(m, pid, epoch); code != 0 {
		return nil, code
	}
	switch m.state {
	case txnPrepareCommit, txnPrepareAbort:
		return nil, kerr.ConcurrentTransactions.Code
	case txnPrepareEpochFence, txnDead:
		return nil, kerr.ProducerFenced.Code
	}
	return m, 0
}

// add adds tps to m's transaction; called with c.mu held, which it
// releases.
func (c *Coordinator) add(m *txnMeta, tps []coordlog.TopicPartition, missing []bool, codes []int16, now time.Time) []int16 {
	bad := false
	for i := range tps {
		if missing[i] {
			codes[i] = kerr.UnknownTopicOrPartition.Code
			bad = true
		}
	}
	if bad {
		c.mu.Unlock()
		for i := range codes {
			if codes[i] == 0 {
				codes[i] = kerr.OperationNotAttempted.Code
			}
		}
		return codes
	}
	if m.state == txnOngoing {
		all := true
		for _, tp := range tps {
			if !m.parts[tp] {
				all = false
			}
		}
		if all {
			c.mu.Unlock()
			return codes
		}
	}
	if m.busy != nil {
		c.mu.Unlock()
		return setAll(codes, kerr.ConcurrentTransactions.Code)
	}
	t := m.snapshot()
	if t.state != txnOngoing {
		t.state = txnOngoing
		t.startTs = now
		t.parts = map[coordlog.TopicPartition]bool{}
	}
	for _, tp := range tps {
		t.parts[tp] = true
	}
	c.claim(m)
	c.mu.Unlock()
	err := c.persist(t, now)
	c.mu.Lock()
	defer c.mu.Unlock()
	c.release(m)
	if err != nil {
		return setAll(codes, c.persistFailed(t.id, err))
	}
	m.apply(t, now)
	return codes
}

// setAll sets every code to code.
func setAll(codes []int16, code int16) []int16 {
	for i := range codes {
		codes[i] = code
	}
	return codes
}

// BeginOffsetCommit checks a TxnOffsetCommit: the transaction of
// pid/epoch must be ongoing with the group's offsets partition tp added.
// On success (code 0) the transaction does not end until done is called,
// so the offsets the caller writes into it are decided by its marker.
func (c *Coordinator) BeginOffsetCommit(id string, pid int64, epoch int16, tp coordlog.TopicPartition) (done func(), code int16) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e := c.refusal(id); e != nil {
		return nil, e.Code
	}
	m := c.txns[id]
	if code := checkProducer(m, pid, epoch); code != 0 {
		return nil, code
	}
	if m.state != txnOngoing || !m.parts[tp] {
		return nil, kerr.InvalidTxnState.Code
	}
	if m.busy != nil {
		return nil, kerr.ConcurrentTransactions.Code
	}
	m.offsetWrites++
	return func() {
		c.mu.Lock()
		m.offsetWrites--
		c.mu.Unlock()
	}, 0
}

// EndTxn is EndTxn.
func (c *Coordinator) EndTxn(id string, pid int64, epoch int16, commit bool) int16 {
	now := c.clock.Now()
	c.mu.Lock()
	if e := c.refusal(id); e != nil {
		c.mu.Unlock()
		return e.Code
	}
	m := c.txns[id]
	if code := checkProducer(m, pid, epoch); code != 0 {
		c.mu.Unlock()
		return code
	}
	if m.busy != nil || m.offsetWrites > 0 {
		c.mu.Unlock()
		return kerr.ConcurrentTransactions.Code
	}
	code := endCode(m.state, commit)
	if m.state != txnOngoing {
		c.mu.Unlock()
		return code
	}
	c.claim(m)
	c.mu.Unlock()
	defer c.releaseLocking(m)
	return c.end(m, commit, false, now)
}

// endCode is the answer to EndTxn(commit) of a transaction in state st
// other than Ongoing.
func endCode(st txnState, commit bool) int16 {
	switch st {
	case txnCompleteCommit:
		if commit {
			return 0
		}
	case txnCompleteAbort:
		if !commit {
			return 0
		}
	case txnPrepareCommit:
		if commit {
			return kerr.ConcurrentTransactions.Code
		}
	case txnPrepareAbort:
		if !commit {
			return kerr.ConcurrentTransactions.Code
		}
	case txnPrepareEpochFence:
		return kerr.ProducerFenced.Code
	}
	return kerr.InvalidTxnState.Code
}

// Shutdown refuses later requests; transitions in flight complete.
func (c *Coordinator) Shutdown() {
	c.mu.Lock()
	c.owned.Close()
	c.mu.Unlock()
}

package storage

import (
	"errors"
	"fmt"
	"sort"

	"github.com/verbatim-kafka/verbatim/kbatch"
)

// Producer-state errors, each the Kafka error a produce response carries.
// Returned errors wrap one of these with the producer id, offsets and
// sequences involved; test with errors.Is.
var (
	ErrInvalidProducerEpoch         = errors.New("storage: INVALID_PRODUCER_EPOCH")
	ErrOutOfOrderSequence           = errors.New("storage: OUT_OF_ORDER_SEQUENCE_NUMBER")
	ErrInvalidTxnState              = errors.New("storage: INVALID_TXN_STATE")
	ErrTransactionCoordinatorFenced = errors.New("storage: TRANSACTION_COORDINATOR_FENCED")
	// ErrUnsupportedControlType: a control batch of a type other than
	// ABORT, COMMIT and MIRROR_PID_RESET appended with validation (Kafka
	// cannot decode it as an end-transaction marker: INVALID_RECORD).
	ErrUnsupportedControlType = errors.New("storage: unsupported control record type")
)

// Kafka's "none" values for producer fields.
const (
	NoProducerEpoch int16 = -1
	NoSequence      int32 = -1
	NoTimestamp     int64 = -1
)

// ProducerBatchesRetained is how many batches per producer are remembered
// for duplicate detection (Kafka's NUM_BATCHES_TO_RETAIN; clients keep at
// most 5 requests in flight).
const ProducerBatchesRetained = 5

// DefaultProducerIDExpirationMs is Kafka's default producer.id.expiration.ms.
const DefaultProducerIDExpirationMs int64 = 86_400_000

// ProducerOrigin says how much a batch is validated, after Kafka's
// AppendOrigin.
type ProducerOrigin uint8

const (
	// OriginClient is a normal produce on the leader: duplicate detection
	// against the last 5 batches, epoch fencing, sequence continuity,
	// transaction state.
	OriginClient ProducerOrigin = iota
	// OriginCoordinator is a batch the broker writes for the transaction
	// coordinator (markers from WriteTxnMarkers): epoch and coordinator
	// epoch checks, no sequence checks, no duplicate detection.
	OriginCoordinator
	// OriginVerbatim is a mirrored batch (Kafka's REPLICATION origin, the
	// follower path) and the replay of the log during recovery: nothing is
	// validated and nothing is refused; state is still tracked exactly.
	OriginVerbatim
)

func (o ProducerOrigin) String() string {
	switch o {
	case OriginClient:
		return "client"
	case OriginCoordinator:
		return "coordinator"
	case OriginVerbatim:
		return "verbatim"
	}
	return "unknown"
}

// BatchMetadata is what producer state keeps of one of a producer's recent
// batches (Kafka's BatchMetadata).
type BatchMetadata struct {
	LastSeq     int32
	LastOffset  int64
	OffsetDelta int32
	Timestamp   int64 // the batch's max timestamp
}

// FirstSeq is the batch's first sequence, with Kafka's wrap-around.
func (b BatchMetadata) FirstSeq() int32 { return decrementSequence(b.LastSeq, b.OffsetDelta) }

// FirstOffset is the batch's base offset.
func (b BatchMetadata) FirstOffset() int64 { return b.LastOffset - int64(b.OffsetDelta) }

// decrementSequence is Kafka's DefaultRecordBatch.decrementSequence.
func decrementSequence(seq, dec int32) int32 {
	if seq < dec {
		return int32(int64(0x7fffffff) - int64(dec-seq) + 1)
	}
	return seq - dec
}

// inSequence is Kafka's rule: next follows last, wrapping at MaxInt32.
func inSequence(last, next int32) bool {
	return int64(next) == int64(last)+1 || (next == 0 && last == 0x7fffffff)
}

// producerEntry is the state of one producer id (Kafka's
// ProducerStateEntry). batches holds up to 5, oldest first.
type producerEntry struct {
	epoch            int16
	coordinatorEpoch int32
	lastTimestamp    int64
	txnFirstOffset   int64 // -1: no ongoing transaction
	nBatches         int
	batches          [ProducerBatchesRetained]BatchMetadata
}

func emptyProducerEntry() producerEntry {
	return producerEntry{epoch: NoProducerEpoch, coordinatorEpoch: -1, lastTimestamp: NoTimestamp, txnFirstOffset: -1}
}

func (e *producerEntry) lastSeq() int32 {
	if e.nBatches == 0 {
		return NoSequence
	}
	return e.batches[e.nBatches-1].LastSeq
}

func (e *producerEntry) lastDataOffset() int64 {
	if e.nBatches == 0 {
		return -1
	}
	return e.batches[e.nBatches-1].LastOffset
}

func (e *producerEntry) lastOffsetDelta() int32 {
	if e.nBatches == 0 {
		return 0
	}
	return e.batches[e.nBatches-1].OffsetDelta
}

// maybeUpdateEpoch switches to epoch, forgetting the batches of the old one.
func (e *producerEntry) maybeUpdateEpoch(epoch int16) {
	if e.epoch != epoch {
		e.nBatches = 0
		e.epoch = epoch
	}
}

func (e *producerEntry) addBatch(epoch int16, b BatchMetadata) {
	e.maybeUpdateEpoch(epoch)
	if e.nBatches == ProducerBatchesRetained {
		copy(e.batches[:], e.batches[1:])
		e.nBatches--
	}
	e.batches[e.nBatches] = b
	e.nBatches++
	e.lastTimestamp = b.Timestamp
}

// duplicateOf finds a retained batch with exactly the sequence range
// [firstSeq, lastSeq] in the same epoch (Kafka's findDuplicateBatch).
func (e *producerEntry) duplicateOf(epoch int16, firstSeq, lastSeq int32) (BatchMetadata, bool) {
	if epoch != e.epoch {
		return BatchMetadata{}, false
	}
	for i := 0; i < e.nBatches; i++ {
		b := e.batches[i]
		if b.FirstSeq() == firstSeq && b.LastSeq == lastSeq {
			return b, true
		}
	}
	return BatchMetadata{}, false
}

// CompletedTxn is a transaction closed by a COMMIT or ABORT marker: its
// first data offset, the marker offset, and the last stable offset right
// after the marker (the first offset of the earliest transaction of
// another producer still open, else LastOffset+1; Kafka's
// lastStableOffset(completedTxn)). Aborted ones go to the segment's
// transaction index (see AbortedTxn).
type CompletedTxn struct {
	ProducerID       int64
	FirstOffset      int64
	LastOffset       int64
	Aborted          bool
	LastStableOffset int64
}

// AbortedTxn returns the transaction index entry of c.
func (c CompletedTxn) AbortedTxn() AbortedTxn {
	return AbortedTxn{ProducerID: c.ProducerID, FirstOffset: c.FirstOffset, LastOffset: c.LastOffset, LastStableOffset: c.LastStableOffset}
}

// PrepareResult is the outcome of a successful Prepare.
type PrepareResult struct {
	// Duplicate is set when a client batch repeats one of the producer's
	// last 5 batches (same epoch, same sequence range). Nothing was staged:
	// the caller must not write the batch and acknowledges it with
	// Original's offsets (Original.FirstOffset(), Original.LastOffset) and
	// timestamp.
	Duplicate bool
	Original  BatchMetadata
}

// txnMeta is an ongoing or unreplicated transaction.
type txnMeta struct {
	producerID  int64
	firstOffset int64
	lastOffset  int64 // -1 while ongoing
}

type stagedKind uint8

const (
	stagedUpdate stagedKind = iota
	stagedReset
)

// stagedOp is one prepared batch waiting for Commit.
type stagedOp struct {
	kind       stagedKind
	producerID int64
	entry      producerEntry // the producer's state after the batch
	startedTxn bool          // entry.txnFirstOffset is a transaction this batch opened
	completed  bool
	txn        CompletedTxn
}

// ProducerStateConfig configures a ProducerState.
type ProducerStateConfig struct {
	// ProducerIDExpirationMs is producer.id.expiration.ms; 0 means Kafka's
	// default (one day).
	ProducerIDExpirationMs int64
}

// ProducerState is the producer state of one partition (Kafka's
// ProducerStateManager): per producer id its epoch, last 5 batches,
// coordinator epoch and ongoing transaction; the ongoing transactions in
// offset order (the first unstable offset, hence the LSO); the completed
// transactions not yet below the high watermark; and the producer snapshot
// files of the partition directory.
//
// Appends are two-phase so that a failed write leaves the state untouched:
// Prepare each batch (validated per its origin against the committed state
// plus what is already staged), write the bytes, then Commit (or Discard
// after a failed write). Prepare and Commit do not allocate for a known
// producer once the staging buffer has grown.
//
// A ProducerState is owned by the partition's single writer and is not
// safe for concurrent use.
type ProducerState struct {
	fsys FS
	dir  string
	cfg  ProducerStateConfig

	producers    map[int64]*producerEntry
	ongoing      []txnMeta // by firstOffset
	unreplicated []txnMeta // completed, marker >= high watermark; by firstOffset

	staged       []stagedOp
	stagedResets int // MIRROR_PID_RESET barriers among staged
	stagedEnd    int64
	stagedAny    bool
	lastMapOff   int64 // next offset after the last batch applied (mapEndOffset)
	lastSnapOff  int64
	snapshots    []int64 // offsets of snapshot files, ascending
	snapBuf      []byte
}

// OpenProducerState creates the producer state of the partition in dir and
// scans dir for snapshot files (without loading them: call
// TruncateAndReload, as Kafka's log loading does). Leftover temporary
// snapshot files from an interrupted write are removed.
func OpenProducerState(fsys FS, dir string, cfg ProducerStateConfig) (*ProducerState, error) {
	if cfg.ProducerIDExpirationMs <= 0 {
		cfg.ProducerIDExpirationMs = DefaultProducerIDExpirationMs
	}
	s := &ProducerState{fsys: fsys, dir: dir, cfg: cfg, producers: make(map[int64]*producerEntry)}
	if fsys != nil {
		offs, err := s.listSnapshots()
		if err != nil {
			return nil, err
		}
		s.snapshots = offs
	}
	return s, nil
}

// lookup returns the state of pid after everything staged so far.
func (s *ProducerState) lookup(pid int64) (producerEntry, bool) {
	for i := len(s.staged) - 1; i >= 0; i-- {
		op := &s.staged[i]
		if op.kind == stagedReset {
			return emptyProducerEntry(), false
		}
		if op.producerID == pid {
			return op.entry, true
		}
	}
	if e := s.producers[pid]; e != nil {
		return *e, true
	}
	return emptyProducerEntry(), false
}

// Prepare validates one batch per origin and stages its effect on producer
// state. h is the batch header as it will be written (offsets assigned);
// ctl is the decoded control record for control batches (see
// ParseControlBatch) and ignored otherwise. Every batch may be passed
// (those without a producer id only move the map end offset). On error
// nothing is staged for this batch (earlier staged batches stay staged).
//
// Control batches: COMMIT/ABORT close the producer's ongoing transaction
// (Commit reports a CompletedTxn; a marker without an ongoing transaction,
// whose data was compacted or trimmed away, completes nothing, as in
// Kafka); MIRROR_PID_RESET (type 7) clears all producer state whatever its
// producer id; an empty control batch changes nothing.
func (s *ProducerState) Prepare(h *kbatch.Header, ctl ControlRecord, origin ProducerOrigin) (PrepareResult, error) {
	if h.IsControl() && ctl.Present && ctl.Type == kbatch.ControlMirrorPidReset {
		s.staged = append(s.staged, stagedOp{kind: stagedReset})
		s.stagedResets++
		s.noteEnd(h)
		return PrepareResult{}, nil
	}
	if h.ProducerID < 0 {
		s.noteEnd(h)
		return PrepareResult{}, nil
	}
	cur, _ := s.lookup(h.ProducerID)
	if h.IsControl() {
		return PrepareResult{}, s.prepareControl(h, ctl, origin, &cur)
	}
	if origin == OriginClient {
		// As in Kafka, duplicates are looked up in the state before this
		// write (committed), not in batches staged alongside.
		if e := s.committedForDuplicates(h.ProducerID); e != nil {
			if dup, ok := e.duplicateOf(h.ProducerEpoch, h.BaseSequence, h.LastSequence()); ok {
				return PrepareResult{Duplicate: true, Original: dup}, nil
			}
		}
	}
	return PrepareResult{}, s.prepareData(h, origin, &cur)
}

// committedForDuplicates returns pid's committed entry, or nil when it has
// none or a staged MIRROR_PID_RESET will clear it.
func (s *ProducerState) committedForDuplicates(pid int64) *producerEntry {
	if s.stagedResets > 0 {
		return nil
	}
	return s.producers[pid]
}

func (s *ProducerState) prepareData(h *kbatch.Header, origin ProducerOrigin, cur *producerEntry) error {
	if h.ProducerEpoch < cur.epoch && origin != OriginVerbatim {
		return fmt.Errorf("%w: producer %d at offset %d has epoch %d, smaller than the last seen epoch %d",
			ErrInvalidProducerEpoch, h.ProducerID, h.BaseOffset, h.ProducerEpoch, cur.epoch)
	}
	if origin == OriginClient {
		if err := checkSequence(h, cur); err != nil {
			return err
		}
	}
	isTxn := h.IsTransactional()
	if cur.txnFirstOffset >= 0 && !isTxn && origin != OriginVerbatim {
		return fmt.Errorf("%w: expected a transactional write from producer %d at offset %d (transaction open since %d)",
			ErrInvalidTxnState, h.ProducerID, h.BaseOffset, cur.txnFirstOffset)
	}
	op := stagedOp{kind: stagedUpdate, producerID: h.ProducerID, entry: *cur}
	op.entry.addBatch(h.ProducerEpoch, BatchMetadata{
		LastSeq:     h.LastSequence(),
		LastOffset:  h.LastOffset(),
		OffsetDelta: h.LastOffsetDelta,
		Timestamp:   h.MaxTimestamp,
	})
	if op.entry.txnFirstOffset < 0 && isTxn {
		op.entry.txnFirstOffset = h.BaseOffset
		op.startedTxn = true
	}
	s.staged = append(s.staged, op)
	s.noteEnd(h)
	return nil
}

// checkSequence is Kafka's leader sequence validation.
func checkSequence(h *kbatch.Header, cur *producerEntry) error {
	first := h.BaseSequence
	if h.ProducerEpoch != cur.epoch {
		if first != 0 && cur.epoch != NoProducerEpoch {
			return fmt.Errorf("%w: invalid sequence %d for new epoch %d of producer %d at offset %d (current epoch %d)",
				ErrOutOfOrderSequence, first, h.ProducerEpoch, h.ProducerID, h.BaseOffset, cur.epoch)
		}
		return nil
	}
	last := cur.lastSeq()
	if cur.epoch == NoProducerEpoch || inSequence(last, first) {
		return nil
	}
	return fmt.Errorf("%w: producer %d at offset %d: sequence %d does not follow %d",
		ErrOutOfOrderSequence, h.ProducerID, h.BaseOffset, first, last)
}

func (s *ProducerState) prepareControl(h *kbatch.Header, ctl ControlRecord, origin ProducerOrigin, cur *producerEntry) error {
	op := stagedOp{kind: stagedUpdate, producerID: h.ProducerID, entry: *cur}
	if !ctl.Present {
		// Compaction removed the marker record: no effect beyond Kafka's
		// registration of the producer id.
		s.staged = append(s.staged, op)
		s.noteEnd(h)
		return nil
	}
	if ctl.Type != kbatch.ControlAbort && ctl.Type != kbatch.ControlCommit {
		if origin != OriginVerbatim {
			return fmt.Errorf("%w: type %d at offset %d", ErrUnsupportedControlType, ctl.Type, h.BaseOffset)
		}
		s.noteEnd(h)
		return nil
	}
	if origin != OriginVerbatim {
		epoch := h.ProducerEpoch
		invalid := epoch < cur.epoch
		if origin == OriginCoordinator && ctl.TransactionVersion >= 2 {
			invalid = epoch <= cur.epoch && !(epoch == cur.epoch && cur.txnFirstOffset < 0)
		}
		if invalid {
			return fmt.Errorf("%w: marker of producer %d at offset %d has epoch %d, last seen epoch %d",
				ErrInvalidProducerEpoch, h.ProducerID, h.BaseOffset, epoch, cur.epoch)
		}
		if cur.coordinatorEpoch > ctl.CoordinatorEpoch {
			return fmt.Errorf("%w: marker of producer %d at offset %d has coordinator epoch %d, current %d",
				ErrTransactionCoordinatorFenced, h.ProducerID, h.BaseOffset, ctl.CoordinatorEpoch, cur.coordinatorEpoch)
		}
	}
	if cur.txnFirstOffset >= 0 {
		op.completed = true
		op.txn = CompletedTxn{
			ProducerID:  h.ProducerID,
			FirstOffset: cur.txnFirstOffset,
			LastOffset:  h.BaseOffset,
			Aborted:     ctl.Type == kbatch.ControlAbort,
		}
	}
	op.entry.maybeUpdateEpoch(h.ProducerEpoch)
	op.entry.txnFirstOffset = -1
	op.entry.coordinatorEpoch = ctl.CoordinatorEpoch
	op.entry.lastTimestamp = ctl.Timestamp
	s.staged = append(s.staged, op)
	s.noteEnd(h)
	return nil
}

func (s *ProducerState) noteEnd(h *kbatch.Header) {
	s.stagedEnd = h.NextOffset()
	s.stagedAny = true
}

// Staged reports how many batch effects are staged.
func (s *ProducerState) Staged() int { return len(s.staged) }

// Discard drops everything staged since the last Commit.
func (s *ProducerState) Discard() {
	s.staged = s.staged[:0]
	s.stagedResets = 0
	s.stagedAny = false
}

// Commit applies everything staged, in order, once the batches are in the
// log, and moves the map end offset past the last staged batch. It appends
// to dst the transactions the staged markers completed, each with the last
// stable offset right after its marker, in marker order: the caller appends
// the aborted ones to the transaction index of the segment holding the
// marker. As in Kafka, all producer updates of the staged batches are
// applied before the completed transactions are resolved (a type-7 reset
// resolves those staged before it first); unlike Kafka's follower, a
// marker's LSO ignores transactions that start above it (see
// lastStableOffsetFor).
func (s *ProducerState) Commit(dst []CompletedTxn) []CompletedTxn {
	mark := len(dst)
	for i := range s.staged {
		op := &s.staged[i]
		if op.kind == stagedReset {
			s.completeTxns(dst[mark:])
			mark = len(dst)
			s.clearProducers()
			continue
		}
		e := s.producers[op.producerID]
		if e == nil {
			e = new(producerEntry)
			s.producers[op.producerID] = e
		}
		*e = op.entry
		if op.startedTxn {
			s.ongoing = insertTxn(s.ongoing, txnMeta{producerID: op.producerID, firstOffset: op.entry.txnFirstOffset, lastOffset: -1})
		}
		if op.completed {
			dst = append(dst, op.txn)
		}
	}
	s.completeTxns(dst[mark:])
	if s.stagedAny {
		s.lastMapOff = s.stagedEnd
	}
	s.staged = s.staged[:0]
	s.stagedResets = 0
	s.stagedAny = false
	return dst
}

// MapEndOffset is the offset after the last batch applied.
func (s *ProducerState) MapEndOffset() int64 { return s.lastMapOff }

// UpdateMapEndOffset sets the map end offset (Kafka calls it on roll with
// the new segment's base offset, before taking a snapshot).
func (s *ProducerState) UpdateMapEndOffset(offset int64) { s.lastMapOff = offset }

// IsEmpty reports whether no producer and no unreplicated transaction is
// tracked.
func (s *ProducerState) IsEmpty() bool { return len(s.producers) == 0 && len(s.unreplicated) == 0 }

// ProducerCount is the number of tracked producer ids.
func (s *ProducerState) ProducerCount() int { return len(s.producers) }

// ProducerInfo describes one producer (DescribeProducers, tests).
type ProducerInfo struct {
	ProducerID            int64
	Epoch                 int16
	LastSequence          int32 // -1 when no batch is retained
	LastTimestamp         int64
	CoordinatorEpoch      int32
	CurrentTxnFirstOffset int64           // -1: no ongoing transaction
	Batches               []BatchMetadata // oldest first
}

func (e *producerEntry) info(pid int64) ProducerInfo {
	return ProducerInfo{
		ProducerID:            pid,
		Epoch:                 e.epoch,
		LastSequence:          e.lastSeq(),
		LastTimestamp:         e.lastTimestamp,
		CoordinatorEpoch:      e.coordinatorEpoch,
		CurrentTxnFirstOffset: e.txnFirstOffset,
		Batches:               append([]BatchMetadata(nil), e.batches[:e.nBatches]...),
	}
}

// Producer returns the committed state of pid.
func (s *ProducerState) Producer(pid int64) (ProducerInfo, bool) {
	e := s.producers[pid]
	if e == nil {
		return ProducerInfo{}, false
	}
	return e.info(pid), true
}

// Producers returns the committed state of every producer, by producer id.
func (s *ProducerState) Producers() []ProducerInfo {
	out := make([]ProducerInfo, 0, len(s.producers))
	for pid, e := range s.producers {
		out = append(out, e.info(pid))
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ProducerID < out[j].ProducerID })
	return out
}

func (s *ProducerState) isExpired(nowMs int64, e *producerEntry) bool {
	return e.txnFirstOffset < 0 && nowMs-e.lastTimestamp >= s.cfg.ProducerIDExpirationMs
}

// RemoveExpiredProducers forgets producers without an ongoing transaction
// whose last timestamp is at least producer.id.expiration.ms before nowMs
// (Kafka's removeExpiredProducers; the timestamps are the batches' max
// timestamps, so time is an input, not the wall clock).
func (s *ProducerState) RemoveExpiredProducers(nowMs int64) {
	for pid, e := range s.producers {
		if s.isExpired(nowMs, e) {
			delete(s.producers, pid)
		}
	}
}

// Reset clears all producer state, as a MIRROR_PID_RESET barrier does,
// and discards anything staged. Snapshots are untouched.
func (s *ProducerState) Reset() {
	s.Discard()
	s.clearProducers()
}

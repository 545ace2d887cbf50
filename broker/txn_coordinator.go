package broker

// The transaction coordinator (transaction protocol version 1, as Kafka
// serves clients when transaction.version is not finalized at 2).
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
// Markers (COMMIT/ABORT control batches carrying the coordinator epoch) are
// written by this broker to every partition of the transaction through
// storage's AppendCoordinator before EndTxn is answered; a partition whose
// marker cannot be written keeps the transaction in Prepare*, retried by
// tick, as Kafka's marker channel retries. On start, Prepare* transactions
// are completed (markers written again where needed; a second marker for
// a producer without an open transaction changes nothing) and Ongoing ones
// are aborted once their timeout has passed since their start.

import (
	"errors"
	"math"
	"regexp"
	"sort"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/verbatim-kafka/verbatim/storage"
)

type txnState int8

// Kafka's TransactionState ids (the value stored in TxnMetadataValue).
const (
	txnEmpty             txnState = 0
	txnOngoing           txnState = 1
	txnPrepareCommit     txnState = 2
	txnPrepareAbort      txnState = 3
	txnCompleteCommit    txnState = 4
	txnCompleteAbort     txnState = 5
	txnDead              txnState = 6
	txnPrepareEpochFence txnState = 7
)

func (s txnState) String() string {
	switch s {
	case txnEmpty:
		return "Empty"
	case txnOngoing:
		return "Ongoing"
	case txnPrepareCommit:
		return "PrepareCommit"
	case txnPrepareAbort:
		return "PrepareAbort"
	case txnCompleteCommit:
		return "CompleteCommit"
	case txnCompleteAbort:
		return "CompleteAbort"
	case txnPrepareEpochFence:
		return "PrepareEpochFence"
	default:
		return "Dead"
	}
}

func parseTxnState(s string) (txnState, bool) {
	for st := txnEmpty; st <= txnPrepareEpochFence; st++ {
		if st.String() == s {
			return st, true
		}
	}
	return 0, false
}

// transaction.max.timeout.ms
const txnMaxTimeout = 15 * time.Minute

type txnMeta struct {
	id        string
	pid       int64
	epoch     int16
	lastPid   int64
	lastEpoch int16
	timeout   time.Duration
	state     txnState
	parts     map[topicPartition]bool
	startTs   time.Time
	updateTs  time.Time
}

type txnCoordinator struct {
	s      *Server
	clock  coordClock
	groups *groupCoordinator

	mu     sync.Mutex
	txns   map[string]*txnMeta
	closed bool
	// lastPidScan is when tick last scanned the logs' producer ids.
	lastPidScan time.Time
}

func newTxnCoordinator(s *Server, clock coordClock, groups *groupCoordinator) *txnCoordinator {
	return &txnCoordinator{s: s, clock: clock, groups: groups, txns: map[string]*txnMeta{}}
}

func isProducerFenceErr(err error) bool {
	return errors.Is(err, storage.ErrInvalidProducerEpoch) || errors.Is(err, storage.ErrTransactionCoordinatorFenced)
}

func (c *txnCoordinator) partitionFor(id string) int32 {
	return partitionForKey(id, c.s.internalPartitionCount(txnStateTopic))
}

// coordinatorEpoch is the epoch written into markers: the leader epoch of
// the transaction's __transaction_state partition, as in Kafka.
func (c *txnCoordinator) coordinatorEpoch(id string) int32 {
	if t := c.s.cluster.topic(txnStateTopic); t != nil {
		if p := t.Partition(c.partitionFor(id)); p != nil {
			return p.LeaderEpoch()
		}
	}
	return 0
}

func (c *txnCoordinator) persist(m *txnMeta, now time.Time) error {
	k := kmsg.NewTxnMetadataKey()
	k.TransactionalID = m.id
	v := kmsg.NewTxnMetadataValue()
	v.ProducerID, v.ProducerEpoch = m.pid, m.epoch
	v.TimeoutMillis = int32(m.timeout.Milliseconds())
	v.State = kmsg.TransactionState(m.state)
	v.LastUpdateTimestamp = now.UnixMilli()
	v.StartTimestamp = -1
	if !m.startTs.IsZero() {
		v.StartTimestamp = m.startTs.UnixMilli()
	}
	byTopic := map[string][]int32{}
	for tp := range m.parts {
		byTopic[tp.topic] = append(byTopic[tp.topic], tp.partition)
	}
	topics := make([]string, 0, len(byTopic))
	for t := range byTopic {
		topics = append(topics, t)
	}
	sort.Strings(topics)
	for _, t := range topics {
		ps := byTopic[t]
		sort.Slice(ps, func(i, j int) bool { return ps[i] < ps[j] })
		vt := kmsg.NewTxnMetadataValueTopic()
		vt.Topic, vt.Partitions = t, ps
		v.Topics = append(v.Topics, vt)
	}
	_, err := c.s.appendInternal(txnStateTopic, c.partitionFor(m.id), []kv{{k.AppendTo(nil), v.AppendTo(nil)}}, internalBatch{}, now)
	if err == nil {
		m.updateTs = now
	}
	return err
}

func (m *txnMeta) snapshot() txnMeta {
	cp := *m
	cp.parts = make(map[topicPartition]bool, len(m.parts))
	for tp := range m.parts {
		cp.parts[tp] = true
	}
	return cp
}

type initResult struct {
	code  int16
	pid   int64
	epoch int16
}

// initProducerID is InitProducerId with a transactional id.
func (c *txnCoordinator) initProducerID(id string, timeoutMs int32, reqPid int64, reqEpoch int16) initResult {
	fail := func(e *kerr.Error) initResult { return initResult{code: e.Code, pid: -1, epoch: -1} }
	if id == "" {
		return fail(kerr.InvalidRequest)
	}
	timeout := time.Duration(timeoutMs) * time.Millisecond
	if timeoutMs <= 0 || timeout > txnMaxTimeout {
		return fail(kerr.InvalidTransactionTimeout)
	}
	now := c.clock.Now()
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return fail(kerr.NotCoordinator)
	}
	m := c.txns[id]
	if m == nil {
		pid, err := c.s.pids.allocate()
		if err != nil {
			return fail(kerr.CoordinatorNotAvailable)
		}
		m = &txnMeta{id: id, pid: pid, epoch: 0, lastPid: -1, lastEpoch: -1, timeout: timeout, state: txnEmpty, parts: map[topicPartition]bool{}}
		if err := c.persist(m, now); err != nil {
			c.s.log.Warn("persisting transaction", "transactional_id", id, "err", err)
			return fail(kerr.CoordinatorNotAvailable)
		}
		c.txns[id] = m
		return initResult{pid: m.pid, epoch: m.epoch}
	}
	if reqPid >= 0 {
		switch {
		case reqPid == m.pid && reqEpoch == m.epoch:
		case reqPid == m.lastPid && reqEpoch == m.lastEpoch && m.state != txnOngoing:
			// A retry of a bump that already happened (KIP-360).
			return initResult{pid: m.pid, epoch: m.epoch}
		default:
			return fail(kerr.ProducerFenced)
		}
	}
	switch m.state {
	case txnPrepareCommit, txnPrepareAbort, txnPrepareEpochFence:
		return fail(kerr.ConcurrentTransactions)
	case txnOngoing:
		// A new instance fences the old one: abort its transaction
		// with a bumped epoch, then bump again for the new instance.
		if code := c.fenceAndAbortLocked(m, now); code != 0 {
			return initResult{code: code, pid: -1, epoch: -1}
		}
		if m.state != txnCompleteAbort {
			return fail(kerr.ConcurrentTransactions)
		}
	}
	old := m.snapshot()
	m.lastPid, m.lastEpoch = m.pid, m.epoch
	if m.epoch >= math.MaxInt16-1 {
		pid, err := c.s.pids.allocate()
		if err != nil {
			return fail(kerr.CoordinatorNotAvailable)
		}
		m.pid, m.epoch = pid, 0
	} else {
		m.epoch++
	}
	m.timeout = timeout
	m.state = txnEmpty
	m.parts = map[topicPartition]bool{}
	m.startTs = time.Time{}
	if err := c.persist(m, now); err != nil {
		*m = old
		c.s.log.Warn("persisting transaction", "transactional_id", id, "err", err)
		return fail(kerr.CoordinatorNotAvailable)
	}
	return initResult{pid: m.pid, epoch: m.epoch}
}

// fenceAndAbortLocked bumps the epoch of an ongoing transaction and aborts
// it (Kafka's epoch fence: timeouts and new instances).
func (c *txnCoordinator) fenceAndAbortLocked(m *txnMeta, now time.Time) int16 {
	if m.epoch < math.MaxInt16-1 {
		m.epoch++
	}
	return c.endLocked(m, false, now)
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

// addPartitions is AddPartitionsToTxn (and AddOffsetsToTxn, with the
// group's __consumer_offsets partition). codes gets one code per tp.
func (c *txnCoordinator) addPartitions(id string, pid int64, epoch int16, tps []topicPartition, verifyOnly bool) []int16 {
	now := c.clock.Now()
	c.mu.Lock()
	defer c.mu.Unlock()
	codes := make([]int16, len(tps))
	setAll := func(code int16) []int16 {
		for i := range codes {
			codes[i] = code
		}
		return codes
	}
	if c.closed {
		return setAll(kerr.NotCoordinator.Code)
	}
	m := c.txns[id]
	if code := checkProducer(m, pid, epoch); code != 0 {
		return setAll(code)
	}
	switch m.state {
	case txnPrepareCommit, txnPrepareAbort:
		return setAll(kerr.ConcurrentTransactions.Code)
	case txnPrepareEpochFence, txnDead:
		return setAll(kerr.ProducerFenced.Code)
	}
	if verifyOnly {
		for i, tp := range tps {
			if m.state != txnOngoing || !m.parts[tp] {
				codes[i] = kerr.InvalidTxnState.Code
			}
		}
		return codes
	}
	bad := false
	for i, tp := range tps {
		if !c.partitionExists(tp) {
			codes[i] = kerr.UnknownTopicOrPartition.Code
			bad = true
		}
	}
	if bad {
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
			return codes
		}
	}
	old := m.snapshot()
	if m.state != txnOngoing {
		m.state = txnOngoing
		m.startTs = now
		m.parts = map[topicPartition]bool{}
	}
	for _, tp := range tps {
		m.parts[tp] = true
	}
	if err := c.persist(m, now); err != nil {
		*m = old
		c.s.log.Warn("persisting transaction", "transactional_id", id, "err", err)
		return setAll(kerr.CoordinatorNotAvailable.Code)
	}
	return codes
}

func (c *txnCoordinator) partitionExists(tp topicPartition) bool {
	t := c.s.cluster.topic(tp.topic)
	if t == nil && tp.topic == offsetsTopic {
		var err error
		if t, err = c.s.internalTopic(offsetsTopic); err != nil {
			return false
		}
	}
	return t != nil && t.Partition(tp.partition) != nil
}

// commitOffsets is TxnOffsetCommit: the transaction of pid/epoch must be
// ongoing with the group's offsets partition added; the offsets are then
// written into it by the group coordinator. The transaction's lock is
// held throughout, so the transaction cannot end between the check and
// the write (which would leave offsets no marker ever decides).
func (c *txnCoordinator) commitOffsets(id string, pid int64, epoch int16, groupID, memberID string, instanceID *string, generation int32, commits []offsetCommit) {
	c.mu.Lock()
	defer c.mu.Unlock()
	code := int16(0)
	m := c.txns[id]
	switch {
	case c.closed:
		code = kerr.NotCoordinator.Code
	default:
		code = checkProducer(m, pid, epoch)
		if code == 0 {
			tp := topicPartition{offsetsTopic, c.groups.partitionFor(groupID)}
			if m.state != txnOngoing || !m.parts[tp] {
				code = kerr.InvalidTxnState.Code
			}
		}
	}
	if code != 0 {
		for i := range commits {
			commits[i].code = code
		}
		return
	}
	c.groups.txnCommitOffsets(groupID, memberID, instanceID, generation, pid, epoch, commits)
}

// endTxn is EndTxn.
func (c *txnCoordinator) endTxn(id string, pid int64, epoch int16, commit bool) int16 {
	now := c.clock.Now()
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return kerr.NotCoordinator.Code
	}
	m := c.txns[id]
	if code := checkProducer(m, pid, epoch); code != 0 {
		return code
	}
	switch m.state {
	case txnOngoing:
		return c.endLocked(m, commit, now)
	case txnCompleteCommit:
		if commit {
			return 0
		}
		return kerr.InvalidTxnState.Code
	case txnCompleteAbort:
		if !commit {
			return 0
		}
		return kerr.InvalidTxnState.Code
	case txnPrepareCommit:
		if commit {
			return kerr.ConcurrentTransactions.Code
		}
		return kerr.InvalidTxnState.Code
	case txnPrepareAbort:
		if !commit {
			return kerr.ConcurrentTransactions.Code
		}
		return kerr.InvalidTxnState.Code
	case txnPrepareEpochFence:
		return kerr.ProducerFenced.Code
	default:
		return kerr.InvalidTxnState.Code
	}
}

// endLocked moves m to Prepare*, persists it, writes the markers and
// completes the transaction.
func (c *txnCoordinator) endLocked(m *txnMeta, commit bool, now time.Time) int16 {
	old := m.snapshot()
	m.state = txnPrepareAbort
	if commit {
		m.state = txnPrepareCommit
	}
	if err := c.persist(m, now); err != nil {
		*m = old
		c.s.log.Warn("persisting transaction", "transactional_id", m.id, "err", err)
		return kerr.CoordinatorNotAvailable.Code
	}
	c.writeMarkersLocked(m, now)
	return 0
}

// writeMarkersLocked writes m's markers to every partition still needing
// one and completes m once none is left.
func (c *txnCoordinator) writeMarkersLocked(m *txnMeta, now time.Time) {
	commit := m.state == txnPrepareCommit
	cepoch := c.coordinatorEpoch(m.id)
	for _, tp := range sortedTPs(m.parts) {
		t := c.s.cluster.topic(tp.topic)
		var p *Partition
		if t != nil {
			p = t.Partition(tp.partition)
		}
		if p == nil {
			// The partition was deleted: Kafka drops its marker.
			delete(m.parts, tp)
			continue
		}
		if err := c.s.writeTxnMarker(p, m.pid, m.epoch, commit, cepoch, now); err != nil {
			if isProducerFenceErr(err) {
				// The partition has seen a newer epoch or coordinator:
				// the marker is obsolete, as Kafka treats it.
				c.s.log.Warn("transaction marker refused as stale", "transactional_id", m.id, "partition", p.Dir(), "err", err)
			} else {
				c.s.log.Warn("writing transaction marker; will retry", "transactional_id", m.id, "partition", p.Dir(), "err", err)
				continue
			}
		}
		if tp.topic == offsetsTopic {
			c.groups.completeTxn(tp.partition, m.pid, commit)
		}
		delete(m.parts, tp)
	}
	if len(m.parts) > 0 {
		return
	}
	old := m.snapshot()
	m.state = txnCompleteAbort
	if commit {
		m.state = txnCompleteCommit
	}
	m.startTs = time.Time{}
	if err := c.persist(m, now); err != nil {
		// Still complete in memory: markers are written. The record is
		// rewritten by the next transition; a restart redoes markers.
		c.s.log.Warn("persisting completed transaction", "transactional_id", m.id, "err", err)
		_ = old
	}
}

func sortedTPs(set map[topicPartition]bool) []topicPartition {
	out := make([]topicPartition, 0, len(set))
	for tp := range set {
		out = append(out, tp)
	}
	sortTPs(out)
	return out
}

// maxLoggedProducerID is the highest producer id in the producer state of
// any partition (mirrored producers included), or -1.
func (s *Server) maxLoggedProducerID() int64 {
	maxPid := int64(-1)
	for _, t := range s.cluster.topics() {
		for _, p := range t.Partitions() {
			if l, err := partitionLog(p); err == nil {
				for _, pi := range l.Producers() {
					maxPid = max(maxPid, pi.ProducerID)
				}
			}
		}
	}
	return maxPid
}

// pidScanInterval is how often the allocator is moved above producer ids
// that appeared in the logs since the last scan (mirrored batches).
const pidScanInterval = 30 * time.Second

// tick aborts timed-out transactions, retries pending markers and keeps
// the producer id allocator above the ids found in the logs. Local ids
// start above every producer id seen in any partition, best effort: the
// MIRROR_PID_RESET barrier is what guarantees no collision.
func (c *txnCoordinator) tick(now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return
	}
	if now.Sub(c.lastPidScan) >= pidScanInterval {
		c.lastPidScan = now
		if err := c.s.pids.ensureAbove(c.s.maxLoggedProducerID()); err != nil {
			c.s.log.Warn("moving the producer id allocator above logged ids", "err", err)
		}
	}
	for _, m := range c.txns {
		switch m.state {
		case txnOngoing:
			if !now.Before(m.startTs.Add(m.timeout)) {
				c.s.log.Info("aborting timed-out transaction", "transactional_id", m.id, "producer_id", m.pid, "timeout", m.timeout)
				c.fenceAndAbortLocked(m, now)
			}
		case txnPrepareCommit, txnPrepareAbort:
			c.writeMarkersLocked(m, now)
		case txnPrepareEpochFence:
			m.state = txnPrepareAbort
			c.writeMarkersLocked(m, now)
		}
	}
}

func (c *txnCoordinator) shutdown() {
	c.mu.Lock()
	c.closed = true
	c.mu.Unlock()
}

// load replays __transaction_state, then completes what a restart
// interrupted (Prepare* -> markers).
func (c *txnCoordinator) load() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if t := c.s.cluster.topic(txnStateTopic); t != nil {
		for _, p := range t.Partitions() {
			l, err := partitionLog(p)
			if err != nil {
				c.s.log.Error("transaction coordinator: state partition offline, its transactions are not loaded", "partition", p.Dir(), "err", err)
				continue
			}
			if err := c.s.replayInternal(l, c.replayRecord); err != nil {
				c.s.log.Error("transaction coordinator: replay of a state partition stopped early", "partition", p.Dir(), "err", err)
			}
		}
	}
	var maxPid int64 = -1
	for _, m := range c.txns {
		maxPid = max(maxPid, m.pid)
	}
	if err := c.s.pids.ensureAbove(max(maxPid, c.s.maxLoggedProducerID())); err != nil {
		return err
	}
	now := c.clock.Now()
	// That was the scan of the logs' producer ids: the periodic one is
	// due pidScanInterval from now, not at the first tick (which would
	// move the allocator at a moment depending on the tick's timing).
	c.lastPidScan = now
	n := 0
	for _, m := range c.txns {
		switch m.state {
		case txnPrepareCommit, txnPrepareAbort:
			c.writeMarkersLocked(m, now)
			n++
		case txnPrepareEpochFence:
			m.state = txnPrepareAbort
			c.writeMarkersLocked(m, now)
			n++
		}
	}
	c.s.log.Info("transaction coordinator loaded", "transactional_ids", len(c.txns), "completed_on_load", n)
	return nil
}

// replayRecord applies one __transaction_state record: the latest value
// of a transactional id wins; a tombstone removes it.
func (c *txnCoordinator) replayRecord(e internalEntry) {
	if e.control || len(e.key) < 2 {
		return
	}
	var k kmsg.TxnMetadataKey
	if k.ReadFrom(e.key) != nil {
		return
	}
	if e.value == nil {
		delete(c.txns, k.TransactionalID)
		return
	}
	var v kmsg.TxnMetadataValue
	if v.ReadFrom(e.value) != nil || v.State < 0 || txnState(v.State) > txnPrepareEpochFence || v.TimeoutMillis < 0 || v.ProducerID < 0 {
		// Not a record this coordinator (or Kafka) writes: skipped,
		// as Kafka skips what it cannot load.
		return
	}
	m := &txnMeta{id: k.TransactionalID, pid: v.ProducerID, epoch: v.ProducerEpoch, lastPid: -1, lastEpoch: -1,
		timeout: time.Duration(v.TimeoutMillis) * time.Millisecond, state: txnState(v.State),
		parts: map[topicPartition]bool{}, updateTs: time.UnixMilli(v.LastUpdateTimestamp)}
	if v.StartTimestamp >= 0 {
		m.startTs = time.UnixMilli(v.StartTimestamp)
	}
	for _, vt := range v.Topics {
		for _, p := range vt.Partitions {
			m.parts[topicPartition{vt.Topic, p}] = true
		}
	}
	c.txns[m.id] = m
}

// txnListing is one ListTransactions entry.
type txnListing struct {
	id    string
	pid   int64
	state string
}

func (c *txnCoordinator) list(states []string, pids []int64, minDuration time.Duration, pattern *regexp.Regexp) ([]txnListing, []string) {
	now := c.clock.Now()
	c.mu.Lock()
	defer c.mu.Unlock()
	want := map[txnState]bool{}
	var unknown []string
	for _, s := range states {
		st, ok := parseTxnState(s)
		if !ok {
			unknown = append(unknown, s)
			continue
		}
		want[st] = true
	}
	if len(states) > 0 && len(want) == 0 {
		return nil, unknown
	}
	pidSet := map[int64]bool{}
	for _, p := range pids {
		pidSet[p] = true
	}
	var out []txnListing
	for _, m := range c.txns {
		if len(want) > 0 && !want[m.state] {
			continue
		}
		if len(pidSet) > 0 && !pidSet[m.pid] {
			continue
		}
		if minDuration >= 0 && (m.state != txnOngoing || now.Sub(m.startTs) < minDuration) {
			continue
		}
		if pattern != nil && !pattern.MatchString(m.id) {
			continue
		}
		out = append(out, txnListing{m.id, m.pid, m.state.String()})
	}
	sortSlice(out, func(a, b txnListing) bool { return a.id < b.id })
	return out, unknown
}

func (c *txnCoordinator) describe(id string, d *kmsg.DescribeTransactionsResponseTransactionState) {
	c.mu.Lock()
	defer c.mu.Unlock()
	m := c.txns[id]
	if m == nil {
		d.ErrorCode = kerr.TransactionalIDNotFound.Code
		d.ProducerID, d.ProducerEpoch, d.StartTimestamp = -1, -1, -1
		return
	}
	d.State = m.state.String()
	d.TimeoutMillis = int32(m.timeout.Milliseconds())
	d.StartTimestamp = -1
	if !m.startTs.IsZero() {
		d.StartTimestamp = m.startTs.UnixMilli()
	}
	d.ProducerID, d.ProducerEpoch = m.pid, m.epoch
	byTopic := map[string][]int32{}
	for tp := range m.parts {
		byTopic[tp.topic] = append(byTopic[tp.topic], tp.partition)
	}
	for _, tp := range sortedTPs(m.parts) {
		if ps, ok := byTopic[tp.topic]; ok {
			dt := kmsg.NewDescribeTransactionsResponseTransactionStateTopic()
			dt.Topic = tp.topic
			dt.Partitions = ps
			sort.Slice(dt.Partitions, func(i, j int) bool { return dt.Partitions[i] < dt.Partitions[j] })
			d.Topics = append(d.Topics, dt)
			delete(byTopic, tp.topic)
		}
	}
}

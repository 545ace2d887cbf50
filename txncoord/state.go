package txncoord

// Transaction metadata and its __transaction_state record
// (TxnMetadataKey/Value).

import (
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/verbatim-kafka/verbatim/coordlog"
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

// txnData is what a transition changes: the state of one transactional
// id as its record says (lastPid/lastEpoch, kept in memory only, are the
// pair before the last bump, for KIP-360 retries).
type txnData struct {
	id        string
	pid       int64
	epoch     int16
	lastPid   int64
	lastEpoch int16
	timeout   time.Duration
	state     txnState
	parts     map[coordlog.TopicPartition]bool
	startTs   time.Time
	updateTs  time.Time
}

type txnMeta struct {
	txnData
	// busy is set while a transition of this transaction is being
	// written (its record, its markers) without the coordinator's lock;
	// it is closed when the transition ends. Requests that would change
	// the transaction meanwhile are answered CONCURRENT_TRANSACTIONS, as
	// Kafka answers while a transition is pending.
	busy chan struct{}
	// offsetWrites counts TxnOffsetCommits being written into the
	// transaction; it does not end while any is.
	offsetWrites int
}

func (m *txnData) snapshot() txnData {
	cp := *m
	cp.parts = make(map[coordlog.TopicPartition]bool, len(m.parts))
	for tp := range m.parts {
		cp.parts[tp] = true
	}
	return cp
}

// record is t's __transaction_state record, stamped now.
func record(t txnData, now time.Time) coordlog.Record {
	k := kmsg.NewTxnMetadataKey()
	k.TransactionalID = t.id
	v := kmsg.NewTxnMetadataValue()
	v.ProducerID, v.ProducerEpoch = t.pid, t.epoch
	v.TimeoutMillis = int32(t.timeout.Milliseconds())
	v.State = kmsg.TransactionState(t.state)
	v.LastUpdateTimestamp = now.UnixMilli()
	v.StartTimestamp = -1
	if !t.startTs.IsZero() {
		v.StartTimestamp = t.startTs.UnixMilli()
	}
	for _, tt := range topicsOf(t.parts) {
		vt := kmsg.NewTxnMetadataValueTopic()
		vt.Topic, vt.Partitions = tt.topic, tt.partitions
		v.Topics = append(v.Topics, vt)
	}
	return coordlog.Record{Key: k.AppendTo(nil), Value: v.AppendTo(nil)}
}

type topicParts struct {
	topic      string
	partitions []int32
}

// topicsOf groups a partition set by topic, both sorted.
func topicsOf(set map[coordlog.TopicPartition]bool) []topicParts {
	var out []topicParts
	for _, tp := range sortedTPs(set) {
		if len(out) == 0 || out[len(out)-1].topic != tp.Topic {
			out = append(out, topicParts{topic: tp.Topic})
		}
		last := &out[len(out)-1]
		last.partitions = append(last.partitions, tp.Partition)
	}
	return out
}

func sortedTPs(set map[coordlog.TopicPartition]bool) []coordlog.TopicPartition {
	out := make([]coordlog.TopicPartition, 0, len(set))
	for tp := range set {
		out = append(out, tp)
	}
	coordlog.SortTPs(out)
	return out
}

// replayRecord applies one __transaction_state record to txns: the latest
// value of a transactional id wins; a tombstone removes it.
func replayRecord(txns map[string]*txnMeta, e coordlog.Entry) {
	if e.Control || len(e.Key) < 2 {
		return
	}
	var k kmsg.TxnMetadataKey
	if k.ReadFrom(e.Key) != nil {
		return
	}
	if e.Value == nil {
		delete(txns, k.TransactionalID)
		return
	}
	var v kmsg.TxnMetadataValue
	if v.ReadFrom(e.Value) != nil || v.State < 0 || txnState(v.State) > txnPrepareEpochFence || v.TimeoutMillis < 0 || v.ProducerID < 0 {
		// Not a record this coordinator (or Kafka) writes: skipped,
		// as Kafka skips what it cannot load.
		return
	}
	m := &txnMeta{txnData: txnData{id: k.TransactionalID, pid: v.ProducerID, epoch: v.ProducerEpoch, lastPid: -1, lastEpoch: -1,
		timeout: time.Duration(v.TimeoutMillis) * time.Millisecond, state: txnState(v.State),
		parts: map[coordlog.TopicPartition]bool{}, updateTs: time.UnixMilli(v.LastUpdateTimestamp)}}
	if v.StartTimestamp >= 0 {
		m.startTs = time.UnixMilli(v.StartTimestamp)
	}
	for _, vt := range v.Topics {
		for _, p := range vt.Partitions {
			m.parts[coordlog.TopicPartition{Topic: vt.Topic, Partition: p}] = true
		}
	}
	txns[m.id] = m
}

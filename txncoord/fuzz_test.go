package txncoord

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/verbatim-kafka/verbatim/coordlog"
)

// FuzzTxnReplayRecord feeds arbitrary __transaction_state records to the
// transaction coordinator's recovery: no panic, and only valid states are
// kept.
func FuzzTxnReplayRecord(f *testing.F) {
	k := kmsg.NewTxnMetadataKey()
	k.TransactionalID = "tx"
	v := kmsg.NewTxnMetadataValue()
	v.ProducerID, v.ProducerEpoch, v.TimeoutMillis, v.State, v.StartTimestamp = 7, 1, 60000, kmsg.TransactionState(txnOngoing), 1
	v.Topics = []kmsg.TxnMetadataValueTopic{{Topic: "t", Partitions: []int32{0, 1}}}
	f.Add(k.AppendTo(nil), v.AppendTo(nil))
	f.Add(k.AppendTo(nil), []byte(nil))
	f.Add([]byte{0, 0, 0, 2, 'a', 'b'}, []byte{0, 0, 0, 0, 0, 0, 0, 0, 0, 1})
	f.Fuzz(func(t *testing.T, key, value []byte) {
		c := &Coordinator{txns: map[string]*txnMeta{}}
		replayRecord(c.txns, coordlog.Entry{Key: key, Value: value})
		for id, m := range c.txns {
			if m.id != id || m.parts == nil || m.state < txnEmpty || m.state > txnPrepareEpochFence || m.pid < 0 {
				t.Fatalf("transaction %q loaded inconsistently: %+v", id, m)
			}
			_ = m.state.String()
			// What was loaded writes back as the record it came from.
			var back kmsg.TxnMetadataValue
			if err := back.ReadFrom(record(m.txnData, m.updateTs).Value); err != nil {
				t.Fatalf("re-encoded record does not decode: %v", err)
			}
		}
	})
}

package broker

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// FuzzGroupReplayRecord feeds arbitrary __consumer_offsets records to the
// group coordinator's recovery: it must never panic, and what it keeps
// must be usable (maps allocated, members indexed by their ids).
func FuzzGroupReplayRecord(f *testing.F) {
	gv := kmsg.NewGroupMetadataValue()
	gv.Version, gv.ProtocolType, gv.Generation = 3, "consumer", 2
	p, l := "range", "m1"
	gv.Protocol, gv.Leader = &p, &l
	m := kmsg.NewGroupMetadataValueMember()
	m.MemberID, m.SessionTimeoutMillis, m.Subscription = "m1", 10000, []byte{0, 1}
	gv.Members = append(gv.Members, m)
	f.Add(groupMetadataKey("g"), gv.AppendTo(nil), false, int64(-1))
	f.Add(offsetCommitKey("g", topicPartition{"t", 0}), offsetCommitValue(offsetEntry{offset: 5, leaderEpoch: 1, metadata: "x"}), false, int64(-1))
	f.Add(offsetCommitKey("g", topicPartition{"t", 1}), offsetCommitValue(offsetEntry{offset: 7}), true, int64(4))
	f.Add(groupMetadataKey("g"), []byte(nil), false, int64(-1))
	f.Add([]byte{0, 2, 0}, []byte{0, 3, 1, 2}, false, int64(-1))
	f.Fuzz(func(t *testing.T, key, value []byte, transactional bool, pid int64) {
		c := &groupCoordinator{groups: map[string]*group{}}
		pending := map[int64]bool{}
		now := time.UnixMilli(1_700_000_000_000)
		e := internalEntry{offset: 0, timestamp: now.UnixMilli(), producerID: pid, transactional: transactional, key: key, value: value}
		c.replayRecord(e, now, pending)
		c.replayRecord(e, now, pending) // replaying twice is harmless
		for id, g := range c.groups {
			if g.id != id || g.members == nil || g.offsets == nil || g.pendingTxn == nil || g.static == nil {
				t.Fatalf("group %q loaded inconsistently: %+v", id, g)
			}
			for mid, m := range g.members {
				if m.id != mid {
					t.Fatalf("member %q indexed as %q", m.id, mid)
				}
			}
			_ = g.selectProtocol()
			_, _ = g.subscribedTopics()
			c.completeTxnLocked(g, pid, true)
		}
	})
}

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
		c := &txnCoordinator{txns: map[string]*txnMeta{}}
		c.replayRecord(internalEntry{key: key, value: value})
		for id, m := range c.txns {
			if m.id != id || m.parts == nil || m.state < txnEmpty || m.state > txnPrepareEpochFence || m.pid < 0 {
				t.Fatalf("transaction %q loaded inconsistently: %+v", id, m)
			}
			_ = m.state.String()
		}
	})
}

package groupcoord

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/verbatim-kafka/verbatim/coordlog"
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
	f.Add(offsetCommitKey("g", coordlog.TopicPartition{Topic: "t", Partition: 0}), offsetCommitValue(OffsetEntry{Offset: 5, LeaderEpoch: 1, Metadata: "x"}), false, int64(-1))
	f.Add(offsetCommitKey("g", coordlog.TopicPartition{Topic: "t", Partition: 1}), offsetCommitValue(OffsetEntry{Offset: 7}), true, int64(4))
	f.Add(groupMetadataKey("g"), []byte(nil), false, int64(-1))
	f.Add([]byte{0, 2, 0}, []byte{0, 3, 1, 2}, false, int64(-1))
	f.Fuzz(func(t *testing.T, key, value []byte, transactional bool, pid int64) {
		groups := map[string]*group{}
		pending := map[int64]bool{}
		now := time.UnixMilli(1_700_000_000_000)
		e := coordlog.Entry{Offset: 0, Timestamp: now.UnixMilli(), ProducerID: pid, Transactional: transactional, Key: key, Value: value}
		replayRecord(groups, e, now, pending)
		replayRecord(groups, e, now, pending) // replaying twice is harmless
		for id, g := range groups {
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
			completeTxn(g, pid, true)
		}
	})
}

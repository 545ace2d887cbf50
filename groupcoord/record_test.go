package groupcoord

import (
	"encoding/hex"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/verbatim-kafka/verbatim/coordlog"
)

// TestGroupRecordBytes pins the __consumer_offsets records (Kafka's
// GroupMetadataKey v2 / GroupMetadataValue v3, OffsetCommitKey v1 /
// OffsetCommitValue v3) to the bytes this broker has always written:
// members sorted by id, each with its subscription to the chosen
// protocol.
func TestGroupRecordBytes(t *testing.T) {
	g := newGroup("g-golden", time.UnixMilli(1_700_000_000_000))
	g.protocolType, g.protocol, g.generation, g.leader = "consumer", "range", 3, "m-1"
	inst := "i-2"
	g.members["m-2"] = &groupMember{id: "m-2", instanceID: &inst, clientID: "c2", clientHost: "/10.0.0.2", rebalanceTimeout: 30 * time.Second, sessionTimeout: 6 * time.Second,
		protocols: []kmsg.JoinGroupRequestProtocol{{Name: "roundrobin", Metadata: []byte{7}}, {Name: "range", Metadata: []byte{3, 4}}}}
	g.members["m-1"] = &groupMember{id: "m-1", clientID: "c1", clientHost: "/10.0.0.1", rebalanceTimeout: 20 * time.Second, sessionTimeout: 10 * time.Second,
		protocols: []kmsg.JoinGroupRequestProtocol{{Name: "range", Metadata: []byte{0, 1, 2}}}, assignment: []byte{9, 9}}
	for _, tc := range []struct{ name, got, want string }{
		{"group key", hex.EncodeToString(groupMetadataKey("g-golden")), "00020008672d676f6c64656e"},
		{"group value", hex.EncodeToString(groupValue(g)), "00030008636f6e73756d657200000003000572616e676500036d2d310000018bcfe568000000000200036d2d31ffff0002633100092f31302e302e302e3100004e20000027100000000300010200000002090900036d2d320003692d320002633200092f31302e302e302e32000075300000177000000002030400000000"},
		{"offset key", hex.EncodeToString(offsetCommitKey("g-golden", coordlog.TopicPartition{Topic: "t", Partition: 5})), "00010008672d676f6c64656e00017400000005"},
		{"offset value", hex.EncodeToString(offsetCommitValue(OffsetEntry{Offset: 123456, LeaderEpoch: 4, Metadata: "md", CommitTs: 1_700_000_000_999})), "0003000000000001e2400000000400026d640000018bcfe56be7"},
	} {
		if tc.got != tc.want {
			t.Errorf("%s:\n got %s\nwant %s", tc.name, tc.got, tc.want)
		}
	}
}

package clustermeta

import (
	"strings"
	"testing"
)

func TestStoredValuesReadableAndChecked(t *testing.T) {
	k := Keys{Prefix: DefaultPrefix}
	id := [16]byte{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}
	// Topic ids are stored in Kafka's Uuid text form.
	v := string(EncodeTopic(TopicRecord{Name: "orders", ID: id, Partitions: 3}))
	if !strings.Contains(v, `"id":"AQIDBAUGBwgJCgsMDQ4PEA"`) {
		t.Fatalf("topic value %s", v)
	}
	if got := FormatUUID(id); got != "AQIDBAUGBwgJCgsMDQ4PEA" {
		t.Fatalf("uuid %s", got)
	}
	if v := string(EncodePartition(PartitionState{Topic: "orders", TopicID: id})); !strings.Contains(v, `"topic_id":"AQIDBAUGBwgJCgsMDQ4PEA"`) {
		t.Fatalf("partition value %s", v)
	}
	if v := string(EncodeBroker(BrokerInfo{NodeID: 1, Epoch: 99})); strings.Contains(v, "99") {
		t.Fatalf("the epoch is stored: %s", v)
	}
	corrupt := []struct {
		key, value string
		decode     func(key string, v []byte) error
	}{
		{"brokers/1", `{"node_id":2}`, func(key string, v []byte) error { _, err := DecodeBroker(k, key, v); return err }},
		{"brokers/x", `{"node_id":1}`, func(key string, v []byte) error { _, err := DecodeBroker(k, key, v); return err }},
		{"brokers/1", `[`, func(key string, v []byte) error { _, err := DecodeBroker(k, key, v); return err }},
		{"topics/a", `{"name":"b","id":"AQIDBAUGBwgJCgsMDQ4PEA"}`, func(key string, v []byte) error { _, err := DecodeTopic(k, key, v); return err }},
		{"topics/a", `{"name":"a","id":"AQID"}`, func(key string, v []byte) error { _, err := DecodeTopic(k, key, v); return err }},
		{"partitions/a/1", `{"topic":"a","partition":2,"topic_id":"AQIDBAUGBwgJCgsMDQ4PEA"}`, func(key string, v []byte) error { _, err := DecodePartition(k, key, v); return err }},
		{"partitions/a/0", `{"topic":"a","partition":0,"topic_id":"AQIDBAUGBwgJCgsMDQ4PEA","leader":-2}`, func(key string, v []byte) error { _, err := DecodePartition(k, key, v); return err }},
		{"partitions/a", `{}`, func(key string, v []byte) error { _, err := DecodePartition(k, key, v); return err }},
		{"producer_ids", `{"next_producer_id":-3}`, func(key string, v []byte) error { _, err := DecodeProducerIDs(key, v); return err }},
		{"cluster_id", `{"cluster_id":""}`, func(key string, v []byte) error { _, err := decodeClusterID(key, v); return err }},
	}
	for _, c := range corrupt {
		key := k.Prefix + c.key
		err := c.decode(key, []byte(c.value))
		if err == nil || !strings.Contains(err.Error(), key) {
			t.Errorf("%s = %s: error %v, want one naming the key", c.key, c.value, err)
		}
	}
}

func TestBuilderLeavesCorruptRecordsOut(t *testing.T) {
	k := Keys{Prefix: DefaultPrefix}
	tr := TopicRecord{Name: "a", ID: [16]byte{1}, Partitions: 2}
	b := NewBuilder(k, "c")
	s := b.Apply(5, []KV{
		{Key: k.Topic("a"), Value: EncodeTopic(tr), CreateRev: 5, ModRev: 5},
		{Key: k.Partition("a", 0), Value: EncodePartition(PartitionState{Topic: "a", TopicID: tr.ID, Leader: 2, ISR: []int32{2}}), CreateRev: 5, ModRev: 5},
		{Key: k.Partition("a", 1), Value: []byte("garbage"), CreateRev: 5, ModRev: 5},
		{Key: k.Broker(1), Value: EncodeBroker(BrokerInfo{NodeID: 1}), CreateRev: 4, ModRev: 5},
	})
	if len(s.Corrupt) != 1 || !strings.Contains(s.Corrupt[0].Error(), k.Partition("a", 1)) {
		t.Fatalf("corrupt %v", s.Corrupt)
	}
	if p, ok := s.Partition("a", 1); !ok || p.Version != 0 || p.Leader != NoLeader {
		t.Fatalf("placeholder %+v", p)
	}
	if p, _ := s.Partition("a", 0); p.Leader != 2 || p.Version != 5 {
		t.Fatalf("partition 0 %+v", p)
	}
	if s.Brokers[1].Epoch != 4 {
		t.Fatalf("broker epoch %d, want its create revision", s.Brokers[1].Epoch)
	}
	s2 := b.Apply(6, []KV{{Key: k.Partition("a", 1), Value: EncodePartition(PartitionState{Topic: "a", TopicID: tr.ID, Partition: 1, Leader: 1}), CreateRev: 5, ModRev: 6}})
	if len(s2.Corrupt) != 0 || s2.Partitions["a"][1].Leader != 1 || len(s.Corrupt) != 1 {
		t.Fatalf("repaired: %v %+v; old snapshot corrupt %v", s2.Corrupt, s2.Partitions["a"], s.Corrupt)
	}
	// The changed topic's slice is a new one: the earlier snapshot keeps its own.
	if &s2.Partitions["a"][0] == &s.Partitions["a"][0] || s.Partitions["a"][1].Leader != NoLeader {
		t.Fatal("the earlier snapshot's slice was written")
	}
}

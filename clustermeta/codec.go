package clustermeta

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
)

// The key layout under the store's prefix (docs/cluster.md "Cluster state
// in etcd"); every value is JSON, topic ids in Kafka's Uuid text form
// (URL-safe base64 without padding) so an operator reads them with
// etcdctl.
const (
	keyClusterID   = "cluster_id"
	keyBrokers     = "brokers/"
	keyTopics      = "topics/"
	keyPartitions  = "partitions/"
	keyProducerIDs = "producer_ids"
	keyController  = "controller/"
)

// Keys names the keys of one cluster's state under its prefix.
type Keys struct{ Prefix string }

// ClusterID is the cluster id's key.
func (k Keys) ClusterID() string { return k.Prefix + keyClusterID }

// Broker is a broker registration's key.
func (k Keys) Broker(id int32) string {
	return k.Prefix + keyBrokers + strconv.FormatInt(int64(id), 10)
}

// Topic is a topic record's key.
func (k Keys) Topic(name string) string { return k.Prefix + keyTopics + name }

// Partitions is the prefix of a topic's partition states.
func (k Keys) Partitions(topic string) string { return k.Prefix + keyPartitions + topic + "/" }

// Partition is one partition state's key.
func (k Keys) Partition(topic string, p int32) string {
	return k.Partitions(topic) + strconv.FormatInt(int64(p), 10)
}

// ProducerIDs is the producer-id allocator's key.
func (k Keys) ProducerIDs() string { return k.Prefix + keyProducerIDs }

// Controller is the controller election's prefix.
func (k Keys) Controller() string { return k.Prefix + keyController }

// FormatUUID is Kafka's text form of a Uuid (Uuid.toString).
func FormatUUID(id [16]byte) string { return base64.RawURLEncoding.EncodeToString(id[:]) }

// ParseUUID reads FormatUUID's form.
func ParseUUID(s string) ([16]byte, error) {
	var id [16]byte
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil || len(b) != 16 {
		return id, fmt.Errorf("%q is not a Kafka Uuid", s)
	}
	copy(id[:], b)
	return id, nil
}

// storedTopic and storedPartition are the values' JSON forms: the
// records with their ids as text (the outer field hides the record's).
type storedTopic struct {
	TopicRecord
	ID string `json:"id"`
}

type storedPartition struct {
	PartitionState
	TopicID string `json:"topic_id"`
}

type storedProducerIDs struct {
	Next int64 `json:"next_producer_id"`
}

type storedClusterID struct {
	ClusterID string `json:"cluster_id"`
}

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err) // the records hold only marshalable fields
	}
	return b
}

// EncodeBroker is a registration's stored value.
func EncodeBroker(b BrokerInfo) []byte { return mustJSON(b) }

// EncodeTopic is a topic record's stored value.
func EncodeTopic(t TopicRecord) []byte {
	return mustJSON(storedTopic{TopicRecord: t, ID: FormatUUID(t.ID)})
}

// EncodePartition is a partition state's stored value.
func EncodePartition(p PartitionState) []byte {
	return mustJSON(storedPartition{PartitionState: p, TopicID: FormatUUID(p.TopicID)})
}

// EncodeProducerIDs and DecodeProducerIDs are the allocator's value: the
// next producer id to hand out.
func EncodeProducerIDs(next int64) []byte { return mustJSON(storedProducerIDs{Next: next}) }
func encodeClusterID(id string) []byte    { return mustJSON(storedClusterID{ClusterID: id}) }

// corrupt is the error of a stored value that does not decode: it names
// the key, so an operator finds what to repair.
func corrupt(key string, err error) error {
	return fmt.Errorf("clustermeta: corrupt value at %s: %w", key, err)
}

func decodeJSON(key string, value []byte, v any) error {
	if err := json.Unmarshal(value, v); err != nil {
		return corrupt(key, err)
	}
	return nil
}

// keyTail is the key's last path element after prefix+dir.
func keyTail(key, prefix, dir string) (string, bool) {
	rest, ok := strings.CutPrefix(key, prefix+dir)
	return rest, ok && rest != ""
}

// DecodeBrokerKey reads the node id of a broker key (brokers/<id>).
func DecodeBrokerKey(k Keys, key string) (int32, error) {
	tail, ok := keyTail(key, k.Prefix, keyBrokers)
	if !ok {
		return 0, corrupt(key, fmt.Errorf("not a broker key"))
	}
	id, err := strconv.ParseInt(tail, 10, 32)
	if err != nil || id < 0 {
		return 0, corrupt(key, fmt.Errorf("broker id %q", tail))
	}
	return int32(id), nil
}

// DecodeBroker reads the registration at key (brokers/<id>); the id in
// the key and in the value must agree.
func DecodeBroker(k Keys, key string, value []byte) (BrokerInfo, error) {
	var b BrokerInfo
	id, err := DecodeBrokerKey(k, key)
	if err != nil {
		return b, err
	}
	if err := decodeJSON(key, value, &b); err != nil {
		return b, err
	}
	if b.NodeID != id {
		return b, corrupt(key, fmt.Errorf("node_id %d in the value", b.NodeID))
	}
	return b, nil
}

// DecodeTopic reads the topic record at key (topics/<name>).
func DecodeTopic(k Keys, key string, value []byte) (TopicRecord, error) {
	var t TopicRecord
	name, ok := keyTail(key, k.Prefix, keyTopics)
	if !ok {
		return t, corrupt(key, fmt.Errorf("not a topic key"))
	}
	var s storedTopic
	if err := decodeJSON(key, value, &s); err != nil {
		return t, err
	}
	if s.Name != name {
		return t, corrupt(key, fmt.Errorf("name %q in the value", s.Name))
	}
	id, err := ParseUUID(s.ID)
	if err != nil {
		return t, corrupt(key, err)
	}
	if s.Partitions < 0 {
		return t, corrupt(key, fmt.Errorf("partitions %d", s.Partitions))
	}
	t = s.TopicRecord
	t.ID = id
	return t, nil
}

// partitionKey splits partitions/<topic>/<n>.
func partitionKey(k Keys, key string) (string, int32, error) {
	tail, ok := keyTail(key, k.Prefix, keyPartitions)
	if !ok {
		return "", 0, corrupt(key, fmt.Errorf("not a partition key"))
	}
	i := strings.LastIndexByte(tail, '/')
	if i <= 0 {
		return "", 0, corrupt(key, fmt.Errorf("not a partition key"))
	}
	n, err := strconv.ParseInt(tail[i+1:], 10, 32)
	if err != nil || n < 0 {
		return "", 0, corrupt(key, fmt.Errorf("partition %q", tail[i+1:]))
	}
	return tail[:i], int32(n), nil
}

// DecodePartition reads the partition state at key
// (partitions/<topic>/<n>).
func DecodePartition(k Keys, key string, value []byte) (PartitionState, error) {
	var p PartitionState
	topic, n, err := partitionKey(k, key)
	if err != nil {
		return p, err
	}
	var s storedPartition
	if err := decodeJSON(key, value, &s); err != nil {
		return p, err
	}
	if s.Topic != topic || s.Partition != n {
		return p, corrupt(key, fmt.Errorf("partition %s-%d in the value", s.Topic, s.Partition))
	}
	id, err := ParseUUID(s.TopicID)
	if err != nil {
		return p, corrupt(key, err)
	}
	if s.Leader < NoLeader || s.LeaderEpoch < 0 || s.PartitionEpoch < 0 {
		return p, corrupt(key, fmt.Errorf("leader %d, leader epoch %d, partition epoch %d", s.Leader, s.LeaderEpoch, s.PartitionEpoch))
	}
	p = s.PartitionState
	p.TopicID = id
	return p, nil
}

// DecodeProducerIDs reads EncodeProducerIDs' value at key.
func DecodeProducerIDs(key string, value []byte) (int64, error) {
	var s storedProducerIDs
	if err := decodeJSON(key, value, &s); err != nil {
		return 0, err
	}
	if s.Next < 0 {
		return 0, corrupt(key, fmt.Errorf("next_producer_id %d", s.Next))
	}
	return s.Next, nil
}

func decodeClusterID(key string, value []byte) (string, error) {
	var s storedClusterID
	if err := decodeJSON(key, value, &s); err != nil {
		return "", err
	}
	if s.ClusterID == "" {
		return "", corrupt(key, fmt.Errorf("empty cluster_id"))
	}
	return s.ClusterID, nil
}

// decodeControllerValue is the node id an election candidate proclaimed.
func decodeControllerValue(key string, value []byte) (int32, error) {
	n, err := strconv.ParseInt(string(value), 10, 32)
	if err != nil || n < 0 {
		return NoLeader, corrupt(key, fmt.Errorf("controller node id %q", value))
	}
	return int32(n), nil
}

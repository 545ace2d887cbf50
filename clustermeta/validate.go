package clustermeta

import (
	"fmt"
	"strings"
)

// The argument checks every Store implementation shares, so the etcd
// store and memstore refuse the same writes.

// CheckNewTopic checks CreateTopic's arguments: a name usable in a key,
// and one state per partition 0..Partitions-1 of this topic.
func CheckNewTopic(t TopicRecord, parts []PartitionState) error {
	if t.Name == "" || strings.ContainsRune(t.Name, '/') {
		return fmt.Errorf("clustermeta: topic name %q", t.Name)
	}
	if t.Partitions < 0 || int(t.Partitions) != len(parts) {
		return fmt.Errorf("clustermeta: topic %s has %d partitions, %d states given", t.Name, t.Partitions, len(parts))
	}
	return checkParts(t, 0, parts)
}

func checkParts(t TopicRecord, first int32, parts []PartitionState) error {
	for i, p := range parts {
		if p.Topic != t.Name || p.TopicID != t.ID || p.Partition != first+int32(i) {
			return fmt.Errorf("clustermeta: state of %s-%d given as partition %d of %s", p.Topic, p.Partition, first+int32(i), t.Name)
		}
	}
	return nil
}

// AddedPartitions checks AddPartitions' arguments against the stored
// record and returns the record to store: the new states continue the
// stored count, and t.Partitions is either the stored count or the new
// one.
func AddedPartitions(stored, t TopicRecord, parts []PartitionState) (TopicRecord, error) {
	if len(parts) == 0 {
		return stored, fmt.Errorf("clustermeta: no partitions to add to %s", t.Name)
	}
	n := stored.Partitions + int32(len(parts))
	if t.Partitions != stored.Partitions && t.Partitions != n {
		return stored, fmt.Errorf("clustermeta: topic %s has %d partitions, %d given with %d new states", t.Name, stored.Partitions, t.Partitions, len(parts))
	}
	if err := checkParts(stored, stored.Partitions, parts); err != nil {
		return stored, err
	}
	stored.Partitions = n
	return stored, nil
}

// CheckCAS checks CASPartitions' states: each an existing partition (a
// version read from the store), each once.
func CheckCAS(states []PartitionState) error {
	seen := make(map[tpKey]bool, len(states))
	for _, p := range states {
		k := tpKey{p.Topic, p.Partition}
		if p.Version <= 0 {
			return fmt.Errorf("clustermeta: state of %s-%d without a version", p.Topic, p.Partition)
		}
		if seen[k] {
			return fmt.Errorf("clustermeta: state of %s-%d given twice", p.Topic, p.Partition)
		}
		seen[k] = true
	}
	return nil
}

// tpKey names one partition.
type tpKey struct {
	Topic     string
	Partition int32
}

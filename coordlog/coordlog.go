package coordlog

import (
	"errors"
	"sort"
	"time"
)

// The coordinators' internal topics and the partition counts they are
// created with. Kafka's defaults are 50 partitions each; a single node
// gains nothing from that many logs, and the count only spreads keys.
const (
	OffsetsTopic            = "__consumer_offsets"
	TxnStateTopic           = "__transaction_state"
	OffsetsTopicPartitions  = 10
	TxnStateTopicPartitions = 10
)

// IsInternalTopic reports whether name is one of the coordinators' topics.
func IsInternalTopic(name string) bool { return name == OffsetsTopic || name == TxnStateTopic }

// TopicPartition names one partition.
type TopicPartition struct {
	Topic     string
	Partition int32
}

// Record is one record of an internal topic; a nil Value is a tombstone.
type Record struct{ Key, Value []byte }

// Batch says how a batch of internal records is written.
type Batch struct {
	// Transactional: the batch belongs to the transaction of
	// ProducerID/ProducerEpoch (TxnOffsetCommit).
	ProducerID    int64
	ProducerEpoch int16
	Transactional bool
}

// Entry is one replayed record of an internal topic with its batch
// context.
type Entry struct {
	Offset        int64
	Timestamp     int64
	ProducerID    int64
	Transactional bool
	// Control: the batch is a transaction marker; Commit tells which.
	Control bool
	Commit  bool
	Key     []byte
	Value   []byte
}

// Log is what a coordinator needs of the broker's storage. A coordinator
// never calls Append with its own lock held, so Append may call back into
// it. PartitionCount may be called under the lock and must neither block
// nor call back; Partitions and Replay are called by Load, before the
// coordinator serves requests.
type Log interface {
	// PartitionCount is the number of partitions the keys of an
	// internal topic are spread over.
	PartitionCount(topic string) int32
	// Append writes recs as one batch to partition p of an internal
	// topic (created on first use). A failure is an error carrying a
	// Kafka code (CodeOf), ErrFenced for a transactional batch of a
	// fenced producer.
	Append(topic string, p int32, recs []Record, b Batch, now time.Time) error
	// Partitions lists the partitions of an existing internal topic,
	// nil when it does not exist yet.
	Partitions(topic string) []int32
	// Replay calls fn for every record and COMMIT/ABORT marker of
	// partition p of an internal topic, in offset order.
	Replay(topic string, p int32, fn func(Entry)) error
}

// Clock is the coordinators' time source. Their state machines read time
// only through it, and their timers are evaluated by tick calls, so tests
// drive them with a manual clock instead of sleeping.
type Clock interface {
	Now() time.Time
}

// WallClock is the real time.
type WallClock struct{}

// Now is time.Now.
func (WallClock) Now() time.Time { return time.Now() }

// TickInterval is how often a running broker evaluates the coordinators'
// timers against the clock.
const TickInterval = 100 * time.Millisecond

// ErrFenced is in the chain of a write the log refused because the
// partition has seen a newer producer epoch or coordinator epoch.
var ErrFenced = errors.New("fenced by a newer producer or coordinator epoch")

// ErrPartitionGone is returned for a marker write to a partition that no
// longer exists (its topic was deleted).
var ErrPartitionGone = errors.New("partition no longer exists")

// CodedError is a failed write answered with a given Kafka error code.
type CodedError struct {
	Code int16
	Err  error
}

func (e *CodedError) Error() string { return e.Err.Error() }
func (e *CodedError) Unwrap() error { return e.Err }

// CodeOf is the Kafka code err carries, or def.
func CodeOf(err error, def int16) int16 {
	var ce *CodedError
	if errors.As(err, &ce) {
		return ce.Code
	}
	return def
}

// javaStringHash is Java's String.hashCode over the UTF-16 code units.
func javaStringHash(s string) int32 {
	var h int32
	for _, r := range s {
		if r >= 0x10000 {
			r -= 0x10000
			h = 31*h + int32(0xD800+(r>>10))
			h = 31*h + int32(0xDC00+(r&0x3FF))
			continue
		}
		h = 31*h + int32(r)
	}
	return h
}

// PartitionForKey is Kafka's Utils.abs(key.hashCode) % n, the partition
// of an internal topic a group id or transactional id maps to.
func PartitionForKey(key string, n int32) int32 {
	h := javaStringHash(key)
	if h == -1<<31 {
		h = 0
	} else if h < 0 {
		h = -h
	}
	return h % n
}

// SortTPs sorts partitions by topic, then partition.
func SortTPs(tps []TopicPartition) {
	sort.Slice(tps, func(i, j int) bool {
		if tps[i].Topic != tps[j].Topic {
			return tps[i].Topic < tps[j].Topic
		}
		return tps[i].Partition < tps[j].Partition
	})
}

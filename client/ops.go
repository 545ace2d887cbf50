package client

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Special ListOffsets timestamps.
const (
	Latest       int64 = -1
	Earliest     int64 = -2
	MaxTimestamp int64 = -3
)

// Isolation levels of Fetch and ListOffsets.
const (
	ReadUncommitted int8 = 0
	ReadCommitted   int8 = 1
)

// OffsetAnswer is one ListOffsets answer.
type OffsetAnswer struct {
	Offset      int64
	Timestamp   int64
	LeaderEpoch int32
}

// ListOffset asks the connection's broker (the partition leader) for one
// partition's offset at ts (Latest, Earliest, MaxTimestamp or a
// timestamp in ms).
func ListOffset(ctx context.Context, cn *Conn, topic string, partition int32, ts int64, isolation int8) (OffsetAnswer, error) {
	as, errs, err := ListOffsets(ctx, cn, isolation, []OffsetQuery{{TopicPartition{topic, partition}, ts}})
	if err != nil {
		return OffsetAnswer{}, err
	}
	return as[0], errs[0]
}

// OffsetQuery is one partition's question in ListOffsets.
type OffsetQuery struct {
	TopicPartition
	Timestamp int64 // Latest, Earliest, MaxTimestamp or a timestamp in ms
}

// TopicEntry is the index in *topics of a request's entry for topic,
// appending a new one (from newEntry) the first time; at remembers the
// indexes. Requests list each topic once with its partitions under it.
func TopicEntry[T any](at map[string]int, topics *[]T, topic string, newEntry func() T) int {
	i, ok := at[topic]
	if !ok {
		i = len(*topics)
		at[topic] = i
		*topics = append(*topics, newEntry())
	}
	return i
}

// ListOffsets asks the connection's broker (the leader of every
// partition in qs) for each partition's offset at its timestamp, in one
// request. qs names each partition at most once: Kafka answers a
// partition named twice INVALID_REQUEST. The answers and the per-partition
// errors are in qs's order; err is the request's own failure (the
// connection, or an answer that leaves out a partition asked for).
func ListOffsets(ctx context.Context, cn *Conn, isolation int8, qs []OffsetQuery) ([]OffsetAnswer, []error, error) {
	req := kmsg.NewPtrListOffsetsRequest()
	req.ReplicaID = -1
	req.IsolationLevel = isolation
	topicAt := map[string]int{}
	for _, q := range qs {
		i := TopicEntry(topicAt, &req.Topics, q.Topic, func() kmsg.ListOffsetsRequestTopic {
			rt := kmsg.NewListOffsetsRequestTopic()
			rt.Topic = q.Topic
			return rt
		})
		rp := kmsg.NewListOffsetsRequestTopicPartition()
		rp.Partition, rp.Timestamp, rp.CurrentLeaderEpoch = q.Partition, q.Timestamp, -1
		req.Topics[i].Partitions = append(req.Topics[i].Partitions, rp)
	}
	resp, err := cn.Request(ctx, req, 9)
	if err != nil {
		return nil, nil, err
	}
	got := map[TopicPartition]*kmsg.ListOffsetsResponseTopicPartition{}
	for _, rt := range resp.(*kmsg.ListOffsetsResponse).Topics {
		for i := range rt.Partitions {
			got[TopicPartition{rt.Topic, rt.Partitions[i].Partition}] = &rt.Partitions[i]
		}
	}
	as, errs := make([]OffsetAnswer, len(qs)), make([]error, len(qs))
	for i, q := range qs {
		p := got[q.TopicPartition]
		if p == nil {
			return nil, nil, fmt.Errorf("ListOffsets %s/%d: malformed answer from %s (the partition is missing)", q.Topic, q.Partition, cn.Addr())
		}
		if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
			errs[i] = fmt.Errorf("ListOffsets %s/%d at %d on %s: %w", q.Topic, q.Partition, q.Timestamp, cn.Addr(), err)
			continue
		}
		as[i] = OffsetAnswer{Offset: p.Offset, Timestamp: p.Timestamp, LeaderEpoch: p.LeaderEpoch}
	}
	return as, errs, nil
}

// EpochEnd is one OffsetForLeaderEpoch answer.
type EpochEnd struct {
	LeaderEpoch int32
	EndOffset   int64
}

// OffsetForLeaderEpoch asks the leader where epoch ends (as a consumer:
// ReplicaID -1).
func OffsetForLeaderEpoch(ctx context.Context, cn *Conn, topic string, partition int32, epoch int32) (EpochEnd, error) {
	req := kmsg.NewPtrOffsetForLeaderEpochRequest()
	req.ReplicaID = -1
	rt := kmsg.NewOffsetForLeaderEpochRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewOffsetForLeaderEpochRequestTopicPartition()
	rp.Partition, rp.CurrentLeaderEpoch, rp.LeaderEpoch = partition, -1, epoch
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := cn.Request(ctx, req, 4)
	if err != nil {
		return EpochEnd{}, err
	}
	r := resp.(*kmsg.OffsetForLeaderEpochResponse)
	if len(r.Topics) != 1 || len(r.Topics[0].Partitions) != 1 {
		return EpochEnd{}, fmt.Errorf("OffsetForLeaderEpoch %s/%d: malformed answer from %s", topic, partition, cn.Addr())
	}
	p := r.Topics[0].Partitions[0]
	if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
		return EpochEnd{}, fmt.Errorf("OffsetForLeaderEpoch %s/%d epoch %d on %s: %w", topic, partition, epoch, cn.Addr(), err)
	}
	return EpochEnd{LeaderEpoch: p.LeaderEpoch, EndOffset: p.EndOffset}, nil
}

// FetchArgs describe a one-partition fetch.
type FetchArgs struct {
	Topic            string
	Partition        int32
	Offset           int64
	MaxBytes         int32
	Isolation        int8
	MaxWaitMs        int32
	CurrentEpoch     int32 // -1: no fencing
	LastFetchedEpoch int32 // -1: no divergence check (Fetch v12+)
}

// FetchResult is one partition's fetch answer.
type FetchResult struct {
	Err            error
	HighWatermark  int64
	LastStable     int64
	LogStart       int64
	Records        []byte
	Aborted        []kmsg.FetchResponseTopicPartitionAbortedTransaction
	DivergingEpoch EpochEnd // LeaderEpoch -1: none
}

// FetchPartition fetches one partition (sessionless, as a consumer).
func FetchPartition(ctx context.Context, cn *Conn, a FetchArgs) (FetchResult, error) {
	req := kmsg.NewPtrFetchRequest()
	req.ReplicaID = -1
	req.MaxWaitMillis = a.MaxWaitMs
	req.MinBytes = 1
	req.MaxBytes = a.MaxBytes
	req.IsolationLevel = a.Isolation
	req.SessionID, req.SessionEpoch = 0, -1
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic = a.Topic
	rp := kmsg.NewFetchRequestTopicPartition()
	rp.Partition, rp.FetchOffset, rp.PartitionMaxBytes = a.Partition, a.Offset, a.MaxBytes
	rp.CurrentLeaderEpoch, rp.LastFetchedEpoch, rp.LogStartOffset = a.CurrentEpoch, a.LastFetchedEpoch, -1
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	// v12: topic names, LastFetchedEpoch and DivergingEpoch; v13+ would
	// need topic ids.
	resp, err := cn.Request(ctx, req, 12)
	if err != nil {
		return FetchResult{}, err
	}
	r := resp.(*kmsg.FetchResponse)
	if err := kerr.ErrorForCode(r.ErrorCode); err != nil {
		return FetchResult{}, fmt.Errorf("fetch %s/%d from %s: %w", a.Topic, a.Partition, cn.Addr(), err)
	}
	if len(r.Topics) != 1 || len(r.Topics[0].Partitions) != 1 {
		return FetchResult{}, fmt.Errorf("fetch %s/%d: malformed answer from %s", a.Topic, a.Partition, cn.Addr())
	}
	p := r.Topics[0].Partitions[0]
	res := FetchResult{
		Err:            kerr.ErrorForCode(p.ErrorCode),
		HighWatermark:  p.HighWatermark,
		LastStable:     p.LastStableOffset,
		LogStart:       p.LogStartOffset,
		Records:        p.RecordBatches,
		Aborted:        p.AbortedTransactions,
		DivergingEpoch: EpochEnd{LeaderEpoch: p.DivergingEpoch.Epoch, EndOffset: p.DivergingEpoch.EndOffset},
	}
	if r.Version < 12 {
		res.DivergingEpoch.LeaderEpoch = -1
	}
	return res, nil
}

package interop

import (
	"context"
	"fmt"
	"sort"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/verbatim-kafka/verbatim/kbatch"
)

// topicID looks the topic's id up in Metadata (Fetch v13+ names topics by
// id).
func topicID(t testing.TB, cl *kgo.Client, topic string) [16]byte {
	id, _ := topicIDLeader(t, cl, topic)
	return id
}

// topicIDLeader is topicID and the broker leading partition 0, where raw
// fetches must go (on a cluster a random broker answers
// NOT_LEADER_OR_FOLLOWER).
func topicIDLeader(t testing.TB, cl *kgo.Client, topic string) ([16]byte, kmsg.Requestor) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	md, err := kadm.NewClient(cl).Metadata(ctx, topic)
	if err != nil {
		t.Fatalf("metadata %s: %v", topic, err)
	}
	td, ok := md.Topics[topic]
	if !ok || td.Err != nil {
		t.Fatalf("metadata %s: %v", topic, td.Err)
	}
	if p, ok := td.Partitions[0]; ok && p.Leader >= 0 {
		return td.ID, cl.Broker(int(p.Leader))
	}
	return td.ID, cl
}

// fetchOnce sends one raw Fetch for partition 0 of topic (to rq: the
// client, or the partition leader's broker) and returns the partition's
// response.
func fetchOnce(t testing.TB, rq kmsg.Requestor, topic string, id [16]byte, offset int64, isolation int8) kmsg.FetchResponseTopicPartition {
	t.Helper()
	req := kmsg.NewPtrFetchRequest()
	req.ReplicaID = -1
	req.MaxWaitMillis = 100
	req.MinBytes = 1
	req.MaxBytes = 16 << 20
	req.IsolationLevel = isolation
	req.SessionEpoch = -1 // no fetch session
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic = topic
	rt.TopicID = id
	rp := kmsg.NewFetchRequestTopicPartition()
	rp.Partition = 0
	rp.FetchOffset = offset
	rp.PartitionMaxBytes = 8 << 20
	rp.CurrentLeaderEpoch = -1
	rp.LastFetchedEpoch = -1
	rp.LogStartOffset = -1
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	resp, err := req.RequestWith(ctx, rq)
	if err != nil {
		t.Fatalf("fetch %s@%d: %v", topic, offset, err)
	}
	if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
		t.Fatalf("fetch %s@%d: %v", topic, offset, err)
	}
	if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
		t.Fatalf("fetch %s@%d: response shape %+v", topic, offset, resp.Topics)
	}
	p := resp.Topics[0].Partitions[0]
	if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
		t.Fatalf("fetch %s@%d: partition error %v", topic, offset, err)
	}
	return p
}

// fetchAllRaw reads partition 0 of topic from offset 0 to its high
// watermark with raw read_uncommitted Fetch requests and returns the
// batches exactly as served.
func fetchAllRaw(t testing.TB, cl *kgo.Client, topic string) [][]byte {
	t.Helper()
	id, leader := topicIDLeader(t, cl, topic)
	var out [][]byte
	hwm := int64(-1)
	for off := int64(0); hwm < 0 || off < hwm; {
		p := fetchOnce(t, leader, topic, id, off, 0)
		hwm = p.HighWatermark
		bs := splitBatches(t, fmt.Sprintf("fetch %s@%d", topic, off), p.RecordBatches)
		if len(bs) == 0 {
			if off >= hwm {
				break
			}
			t.Fatalf("fetch %s@%d: no batch below the high watermark %d", topic, off, hwm)
		}
		for _, b := range bs {
			h, err := kbatch.ParseHeader(b)
			if err != nil {
				t.Fatalf("fetch %s: %v", topic, err)
			}
			if h.NextOffset() <= off {
				continue // a batch before the fetch offset (served whole)
			}
			out = append(out, b)
			off = h.NextOffset()
		}
	}
	return out
}

// abortedRange is one aborted transaction of a read_committed Fetch
// response: a producer id and the first offset of its transaction.
type abortedRange struct{ PID, First int64 }

func (a abortedRange) String() string { return fmt.Sprintf("%d@%d", a.PID, a.First) }

// abortedFromFetch returns the aborted transactions a read_committed Fetch
// from offset 0 lists.
func abortedFromFetch(t testing.TB, cl *kgo.Client, topic string) []abortedRange {
	t.Helper()
	id, leader := topicIDLeader(t, cl, topic)
	p := fetchOnce(t, leader, topic, id, 0, 1)
	var out []abortedRange
	for _, a := range p.AbortedTransactions {
		out = append(out, abortedRange{a.ProducerID, a.FirstOffset})
	}
	return out
}

// abortedData applies a read_committed consumer's rule (Kafka's
// FetchCollector / CompletedFetch) to batches with the aborted list of a
// Fetch response, and returns the base offsets of the data batches a
// consumer skips as aborted. Two lists mean the same when they give the
// same answer.
func abortedData(batches [][]byte, list []abortedRange) []int64 {
	sorted := append([]abortedRange(nil), list...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].First < sorted[j].First })
	open := map[int64]bool{}
	var out []int64
	for _, b := range batches {
		h, err := kbatch.ParseHeader(b)
		if err != nil {
			continue
		}
		for len(sorted) > 0 && sorted[0].First <= h.LastOffset() {
			open[sorted[0].PID] = true
			sorted = sorted[1:]
		}
		if !h.IsTransactional() || !open[h.ProducerID] {
			continue
		}
		if h.IsControl() {
			if typ, ok := kbatch.ControlType(b); ok && typ == kbatch.ControlAbort {
				delete(open, h.ProducerID)
			}
			continue
		}
		out = append(out, h.BaseOffset)
	}
	return out
}

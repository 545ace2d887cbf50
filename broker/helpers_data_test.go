package broker

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/verbatim-kafka/verbatim/kbatch"
	"github.com/verbatim-kafka/verbatim/kbatch/kbatchtest"
)

// encodeBatch builds a v2 batch with the given base offset, producer id
// and base sequence (-1: none) holding values as records.
func encodeBatch(t *testing.T, base, pid int64, seq int32, values ...[]byte) []byte {
	t.Helper()
	var recs []kbatch.Record
	for i, v := range values {
		recs = append(recs, kbatch.Record{OffsetDelta: int32(i), Key: []byte("k"), Value: v})
	}
	bt := kbatch.NewBatch(time.Now().UnixMilli(), recs...)
	bt.BaseOffset = base
	if pid >= 0 {
		bt.ProducerID, bt.ProducerEpoch, bt.BaseSequence = pid, 0, seq
	}
	return kbatchtest.Encode(t, bt)
}

func produceRequest(version int16, topic string, part int32, records []byte) *kmsg.ProduceRequest {
	req := kmsg.NewPtrProduceRequest()
	req.Version = version
	req.Acks = -1
	req.TimeoutMillis = 10000
	addProducePartition(req, topic, part, records)
	return req
}

func addProducePartition(req *kmsg.ProduceRequest, topic string, part int32, records []byte) {
	var rt *kmsg.ProduceRequestTopic
	for i := range req.Topics {
		if req.Topics[i].Topic == topic {
			rt = &req.Topics[i]
		}
	}
	if rt == nil {
		req.Topics = append(req.Topics, kmsg.NewProduceRequestTopic())
		rt = &req.Topics[len(req.Topics)-1]
		rt.Topic = topic
	}
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Partition, rp.Records = part, records
	rt.Partitions = append(rt.Partitions, rp)
}

// produceOne sends one partition's records and returns its response.
func produceOne(t *testing.T, b *testBroker, version int16, topic string, part int32, records []byte) kmsg.ProduceResponseTopicPartition {
	t.Helper()
	resp := rawRequest[*kmsg.ProduceResponse](t, b, produceRequest(version, topic, part, records))
	return resp.Topics[0].Partitions[0]
}

// listOffset answers ListOffsets for one partition (timestamp -1 latest,
// -2 earliest, ...), failing the test on an error code.
func listOffsetT(t *testing.T, b *testBroker, topic string, part int32, ts int64) int64 {
	t.Helper()
	p := listOffsetsPart(t, b, 9, topic, part, ts, 0)
	if p.ErrorCode != 0 {
		t.Fatalf("list offsets %s/%d %d: error %d", topic, part, ts, p.ErrorCode)
	}
	return p.Offset
}

func listOffsetsPart(t *testing.T, b *testBroker, version int16, topic string, part int32, ts int64, isolation int8) kmsg.ListOffsetsResponseTopicPartition {
	t.Helper()
	req := kmsg.NewPtrListOffsetsRequest()
	req.Version = version
	req.ReplicaID = -1
	req.IsolationLevel = isolation
	rt := kmsg.NewListOffsetsRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewListOffsetsRequestTopicPartition()
	rp.Partition, rp.Timestamp = part, ts
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp := rawRequest[*kmsg.ListOffsetsResponse](t, b, req)
	return resp.Topics[0].Partitions[0]
}

// fetchReq is a sessionless fetch of one partition that answers at once.
func fetchReq(version int16, topic string, part int32, offset int64) *kmsg.FetchRequest {
	req := kmsg.NewPtrFetchRequest()
	req.Version = version
	req.ReplicaID = -1
	req.MaxBytes = 10 << 20
	req.SessionEpoch = -1
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewFetchRequestTopicPartition()
	rp.Partition, rp.FetchOffset, rp.PartitionMaxBytes = part, offset, 1<<20
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	return req
}

// offsetCommitReq is a standalone OffsetCommit v8 (generation -1, no
// member) of off for partition 0 of topic.
func offsetCommitReq(group, topic string, off int64) *kmsg.OffsetCommitRequest {
	req := kmsg.NewPtrOffsetCommitRequest()
	req.Version = 8
	req.Group, req.Generation = group, -1
	rt := kmsg.NewOffsetCommitRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewOffsetCommitRequestTopicPartition()
	rp.Partition, rp.Offset, rp.LeaderEpoch = 0, off, -1
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	return req
}

// mustHandle is partition p's log handle.
func mustHandle(t *testing.T, p *Partition) *logHandle {
	t.Helper()
	h, err := partitionHandle(p)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

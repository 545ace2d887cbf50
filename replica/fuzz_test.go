package replica

import (
	"bytes"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/verbatim-kafka/verbatim/client"
	"github.com/verbatim-kafka/verbatim/kbatch"
)

// fuzzQueries are the partitions the leader answers are read for.
var fuzzQueries = []client.TopicPartition{{Topic: "t", Partition: 0}, {Topic: "t", Partition: 1}, {Topic: "u", Partition: 0}}

// FuzzLeaderAnswers: any OffsetForLeaderEpoch (kind even) or ListOffsets
// (odd) response body, decoded at any version, gives exactly one answer
// per query, in the queries' order, and never panics.
func FuzzLeaderAnswers(f *testing.F) {
	for _, v := range []int16{2, 3, 4} {
		f.Add(byte(0), byte(v), sampleEpochResponse(v))
	}
	for _, v := range []int16{1, 5, 9} {
		f.Add(byte(1), byte(v), sampleListResponse(v))
	}
	f.Fuzz(func(t *testing.T, kind, vb byte, body []byte) {
		if kind%2 == 0 {
			r := kmsg.NewPtrOffsetForLeaderEpochResponse()
			r.Version = int16(vb % 5)
			if r.ReadFrom(body) != nil {
				return
			}
			var qs []epochQuery
			for _, tp := range fuzzQueries {
				qs = append(qs, epochQuery{TopicPartition: tp, Current: 3, Epoch: 2})
			}
			as := epochAnswers(qs, r)
			if len(as) != len(qs) {
				t.Fatalf("%d answers for %d queries", len(as), len(qs))
			}
			for i, a := range as {
				if a.TopicPartition != qs[i].TopicPartition {
					t.Fatalf("answer %d is for %s, not %s", i, a.TopicPartition, qs[i].TopicPartition)
				}
			}
			return
		}
		r := kmsg.NewPtrListOffsetsResponse()
		r.Version = int16(vb % 10)
		if r.ReadFrom(body) != nil {
			return
		}
		var qs []offsetQuery
		for _, tp := range fuzzQueries {
			qs = append(qs, offsetQuery{TopicPartition: tp, Current: 3})
		}
		into := map[client.TopicPartition]offsetAnswer{}
		listAnswers(qs, client.Earliest, r, into)
		listAnswers(qs, client.Latest, r, into)
		if len(into) != len(qs) {
			t.Fatalf("%d answers for %d queries", len(into), len(qs))
		}
		for _, q := range qs {
			if a, ok := into[q.TopicPartition]; !ok || a.TopicPartition != q.TopicPartition {
				t.Fatalf("%s: answer %+v", q.TopicPartition, a)
			}
		}
	})
}

func sampleEpochResponse(v int16) []byte {
	r := kmsg.NewPtrOffsetForLeaderEpochResponse()
	r.Version = v
	rt := kmsg.NewOffsetForLeaderEpochResponseTopic()
	rt.Topic = "t"
	for p := int32(0); p < 2; p++ {
		rp := kmsg.NewOffsetForLeaderEpochResponseTopicPartition()
		rp.Partition, rp.LeaderEpoch, rp.EndOffset = p, 2, 40+int64(p)
		rt.Partitions = append(rt.Partitions, rp)
	}
	r.Topics = append(r.Topics, rt)
	return r.AppendTo(nil)
}

func sampleListResponse(v int16) []byte {
	r := kmsg.NewPtrListOffsetsResponse()
	r.Version = v
	rt := kmsg.NewListOffsetsResponseTopic()
	rt.Topic = "u"
	rp := kmsg.NewListOffsetsResponseTopicPartition()
	rp.Offset, rp.LeaderEpoch = 17, 2
	rt.Partitions = append(rt.Partitions, rp)
	r.Topics = append(r.Topics, rt)
	return r.AppendTo(nil)
}

// FuzzFetchRecords: any records a leader answers are stored as whole
// batches only: what the replica is given is a prefix of the answer made
// of whole batches, never starting below its log end, and nothing panics.
func FuzzFetchRecords(f *testing.F) {
	b2, b5 := batchAt(f, 2, 1, 3), batchAt(f, 5, 2, 2)
	f.Add(append(append([]byte{}, b2...), b5...), int64(7), int64(0))
	f.Add(append(append([]byte{}, b2...), b5[:30]...), int64(4), int64(1))
	f.Add(batchAt(f, 0, 1, 4), int64(4), int64(3))
	f.Add([]byte{}, int64(2), int64(0))
	f.Fuzz(func(t *testing.T, records []byte, hw, logStart int64) {
		r := replicaWith(t, 1) // [0,2)
		before := r.snapshot()
		err := appendAnswer(r, client.FetchResult{Records: records, HighWatermark: hw, LogStart: logStart, DivergingEpoch: noDiv})
		if r.bad != "" {
			t.Fatal(r.bad)
		}
		after := r.snapshot()
		if err != nil {
			// Unchanged, or emptied to restart inside the leader's first
			// batch when all it held was below the leader's log start
			// (the batch then failed to append).
			restarted := logStart >= before.end && len(after.batches) == 0 && len(records) >= 8 && after.end == kbatch.BaseOffset(records)
			if !restarted && (after.end != before.end || len(after.batches) != len(before.batches)) {
				t.Fatalf("a failed append changed the replica: %s -> %s", describe(&before), describe(&after))
			}
			return
		}
		gained := r.stored
		if !bytes.HasPrefix(records, gained) {
			t.Fatal("the replica stored bytes that are not a prefix of the answer")
		}
		it := kbatch.Batches(gained)
		for it.Next() {
		}
		if it.Pos() != len(gained) {
			t.Fatal("a partial batch was stored")
		}
	})
}

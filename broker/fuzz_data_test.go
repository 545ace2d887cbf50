package broker

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/verbatim-kafka/verbatim/kbatch"
	"github.com/verbatim-kafka/verbatim/kbatch/kbatchtest"
)

// dataPlaneSeeds are data-plane requests with real content: produces with
// valid batches (every codec), mirror produces with their tags, fetches
// (sessions, isolation, epochs), ListOffsets specs, OffsetForLeaderEpoch,
// DeleteRecords, DescribeLogDirs.
func dataPlaneSeeds(f *testing.F) []kmsg.Request {
	batch := func(base int64, epoch int32, codec int16, pid int64) []byte {
		bt := kbatch.NewBatch(1_700_000_000_000, kbatch.Record{Key: []byte("k"), Value: []byte("value")},
			kbatch.Record{OffsetDelta: 1, TimestampDelta: 3, Key: []byte("k2"), Value: []byte("v2"),
				Headers: []kbatch.RecordHeader{{Key: "h", Value: []byte("x")}}})
		bt.BaseOffset, bt.LeaderEpoch, bt.Attributes = base, epoch, codec
		if pid >= 0 {
			bt.ProducerID, bt.ProducerEpoch, bt.BaseSequence = pid, 0, 0
		}
		return kbatchtest.Encode(f, bt)
	}
	var out []kmsg.Request
	for _, v := range []int16{3, 7, 8, 9, 12} {
		for codec := int16(0); codec <= 4; codec++ {
			out = append(out, produceRequest(v, "fz", 0, batch(0, -1, codec, -1)))
		}
		out = append(out, produceRequest(v, "fz", 1, batch(0, -1, 0, 1000)))
		out = append(out, produceRequest(v, "fzc", 0, batch(0, -1, 0, -1)))
	}
	for _, v := range []int16{9, 11, 12} {
		m := mirrorProduceSeed(v, "fzm", batch(0, 3, 0, -1), 0, -1)
		out = append(out, m, mirrorProduceSeed(v, "fzm", batch(2, 5, 2, 77), 2, 13))
	}
	for _, v := range []int16{4, 7, 11, 12} {
		for _, iso := range []int8{0, 1} {
			fr := fetchReq(v, "fz", 0, 0)
			fr.IsolationLevel = iso
			fr.Topics[0].Partitions[0].LastFetchedEpoch = 0
			fr.Topics[0].Partitions[0].CurrentLeaderEpoch = 0
			out = append(out, fr)
		}
		sess := fetchReq(v, "fzm", 0, 0)
		sess.SessionEpoch = 0
		out = append(out, sess)
	}
	for _, ts := range []int64{-1, -2, -3, -4, -5, 1_700_000_000_001} {
		req := kmsg.NewPtrListOffsetsRequest()
		req.Version = 9
		req.IsolationLevel = 1
		rt := kmsg.NewListOffsetsRequestTopic()
		rt.Topic = "fz"
		rp := kmsg.NewListOffsetsRequestTopicPartition()
		rp.Timestamp = ts
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		out = append(out, req)
	}
	ofe := kmsg.NewPtrOffsetForLeaderEpochRequest()
	ofe.Version = 4
	ot := kmsg.NewOffsetForLeaderEpochRequestTopic()
	ot.Topic = "fzm"
	op := kmsg.NewOffsetForLeaderEpochRequestTopicPartition()
	op.LeaderEpoch = 3
	ot.Partitions = append(ot.Partitions, op)
	ofe.Topics = append(ofe.Topics, ot)
	out = append(out, ofe, deleteRecordsReq("fz", 0, 1))
	dl := kmsg.NewPtrDescribeLogDirsRequest()
	dl.Version = 4
	out = append(out, dl)
	return out
}

func mirrorProduceSeed(version int16, topic string, set []byte, expected int64, epoch int32) *kmsg.ProduceRequest {
	return mirrorProduce(version, topic, 0, set, expected, epoch)
}

// FuzzDataPlane drives arbitrary frames through decoding and the
// data-plane handlers of a broker with real storage. Properties: nothing
// panics; a frame is refused with a connection-closing error or answered;
// a Produce answer decodes as the ProduceResponse of its version with one
// partition answer per requested partition; other answers decode as their
// response type; the logs stay readable (every partition answers
// ListOffsets without a storage error).
func FuzzDataPlane(f *testing.F) {
	for i, req := range dataPlaneSeeds(f) {
		frame := appendRequestFrame(nil, req, int32(i), "fuzz")
		f.Add(frame[4:])
	}
	dir := f.TempDir()
	s, err := Open(quietConfig(dir))
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { _ = s.Shutdown(context.Background()) })
	for _, tc := range []struct {
		name string
		cfg  map[string]string
	}{{"fz", nil}, {"fzc", map[string]string{"cleanup.policy": "compact"}}, {"fzm", map[string]string{"mirror.mode": "push"}}} {
		cfg, err := newTopicConfig(tc.cfg)
		if err != nil {
			f.Fatal(err)
		}
		if _, err := s.cluster.createTopic(tc.name, 2, cfg, false); err != nil {
			f.Fatal(err)
		}
	}

	f.Fuzz(func(t *testing.T, frame []byte) {
		p, e, req, ok := fuzzDecode(t, frame)
		if !ok {
			return
		}
		if p.reply != nil {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 150*time.Millisecond)
		defer cancel()
		reply, err := e.handler(ctx, s, req)
		if err != nil || reply == nil {
			return
		}
		body, err := replyBody(ctx, reply)
		if err != nil || body == nil {
			return
		}
		if req.Key == kmsg.Produce.Int16() {
			preq := kmsg.NewPtrProduceRequest()
			preq.Version = req.Version
			if err := preq.ReadFrom(req.Body); err != nil {
				t.Fatalf("hot path accepted a Produce v%d kmsg cannot decode: %v", req.Version, err)
			}
			resp := kmsg.NewPtrProduceResponse()
			resp.Version = req.Version
			if err := resp.ReadFrom(body); err != nil {
				t.Fatalf("Produce v%d response does not decode: %v", req.Version, err)
			}
			want, got := 0, 0
			for _, tp := range preq.Topics {
				want += len(tp.Partitions)
			}
			for _, tp := range resp.Topics {
				got += len(tp.Partitions)
			}
			if want != got {
				t.Fatalf("Produce answered %d partitions of %d", got, want)
			}
		} else if req.Msg != nil {
			resp := req.Msg.ResponseKind()
			if err := resp.ReadFrom(body); err != nil {
				t.Fatalf("%s v%d response does not decode: %v", kmsg.NameForKey(req.Key), req.Version, err)
			}
		}
		for _, tp := range s.cluster.topics() {
			for _, part := range tp.Partitions() {
				l, err := partitionLog(part)
				if err != nil {
					continue
				}
				if _, err := l.Read(l.LogStartOffset(), 1); err != nil {
					t.Fatalf("%s: log unreadable after the request: %v", part.Dir(), err)
				}
			}
		}
	})
}

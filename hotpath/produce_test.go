package hotpath

import (
	"bytes"
	"errors"
	"fmt"
	"testing"
	"unsafe"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/verbatim-kafka/verbatim/wireext"
)

func strp(s string) *string { return &s }

// aliases reports whether sub lies inside b's memory.
func aliases(b, sub []byte) bool {
	start := uintptr(unsafe.Pointer(unsafe.SliceData(b)))
	p := uintptr(unsafe.Pointer(unsafe.SliceData(sub)))
	return p >= start && p+uintptr(len(sub)) <= start+uintptr(len(b))
}

// kmsgProduce builds a kmsg Produce request with topics x partitions record
// sets of the given size (every third partition null when withNull).
func kmsgProduce(version int16, topics, partitions, setSize int, withNull bool) *kmsg.ProduceRequest {
	req := kmsg.NewPtrProduceRequest()
	req.Version = version
	req.Acks = -1
	req.TimeoutMillis = 30000
	if version%2 == 0 {
		req.TransactionID = strp("txn-" + fmt.Sprint(version))
	}
	for t := 0; t < topics; t++ {
		rt := kmsg.NewProduceRequestTopic()
		rt.Topic = fmt.Sprintf("topic-%d", t)
		rt.TopicID = [16]byte{byte(t), 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, byte(version)}
		for p := 0; p < partitions; p++ {
			rp := kmsg.NewProduceRequestTopicPartition()
			rp.Partition = int32(p * 3)
			if !(withNull && p%3 == 2) {
				rp.Records = bytes.Repeat([]byte{byte(t), byte(p)}, setSize/2)
			}
			rt.Partitions = append(rt.Partitions, rp)
		}
		req.Topics = append(req.Topics, rt)
	}
	return req
}

// oneSetProduce is an acks=all Produce request of one record set for
// partition 0 of topic.
func oneSetProduce(version int16, topic string, set []byte) *kmsg.ProduceRequest {
	req := kmsg.NewPtrProduceRequest()
	req.Version = version
	req.Acks = -1
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Records = set
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	return req
}

// withMirrorTags adds, to a flexible request, Verbatim's mirror fields
// (request level, and partition level on every other partition) and an
// unknown tag at each level the decoder must skip.
func withMirrorTags(req *kmsg.ProduceRequest) *kmsg.ProduceRequest {
	if req.Version < 9 {
		return req
	}
	mp := wireext.MirrorProduce{WriterEpoch: 77, WriterID: [16]byte{3: 9}}
	req.UnknownTags.Set(7, []byte("skip"))
	req.UnknownTags.Set(wireext.MirrorTag, mp.AppendTo(nil))
	for ti := range req.Topics {
		req.Topics[ti].UnknownTags.Set(wireext.MirrorTag, []byte("topic-level: skipped"))
		for pi := range req.Topics[ti].Partitions {
			rp := &req.Topics[ti].Partitions[pi]
			rp.UnknownTags.Set(1, nil)
			if pi%2 == 0 {
				v := wireext.MirrorPartition{ExpectedLogEndOffset: int64(ti*1000 + pi), CurrentLeaderEpoch: int32(pi)}
				rp.UnknownTags.Set(wireext.MirrorTag, v.AppendTo(nil))
			}
		}
	}
	return req
}

// kmsgMirrorTag is the value of tag wireext.MirrorTag kmsg kept.
func kmsgMirrorTag(tags kmsg.Tags) (v []byte, ok bool) {
	tags.Each(func(tag uint32, val []byte) {
		if tag == wireext.MirrorTag {
			v, ok = val, true
		}
	})
	return v, ok
}

// sameMirrorField checks a decoded mirror field against the raw value kmsg
// kept: present alike, and equal to wireext's decoding of it.
func sameMirrorField[T comparable, P interface {
	*T
	ReadFrom([]byte) error
}](t *testing.T, what string, has bool, got T, tags kmsg.Tags) {
	t.Helper()
	raw, ok := kmsgMirrorTag(tags)
	if has != ok {
		t.Fatalf("%s: mirror field present %v, kmsg %v", what, has, ok)
	}
	var want T
	if ok && (P(&want).ReadFrom(raw) != nil || want != got) {
		t.Fatalf("%s: mirror field %+v, kmsg's value %x", what, got, raw)
	}
}

func compareWithKmsg(t *testing.T, got *ProduceRequest, want *kmsg.ProduceRequest) {
	t.Helper()
	sameMirrorField(t, "request", got.HasMirror, got.Mirror, want.UnknownTags)
	if (got.TransactionalID == nil) != (want.TransactionID == nil) ||
		(want.TransactionID != nil && string(got.TransactionalID) != *want.TransactionID) {
		t.Fatalf("transactional id %q vs %v", got.TransactionalID, want.TransactionID)
	}
	if got.Acks != want.Acks || got.TimeoutMs != want.TimeoutMillis || len(got.Topics) != len(want.Topics) {
		t.Fatalf("acks %d/%d timeout %d/%d topics %d/%d", got.Acks, want.Acks, got.TimeoutMs, want.TimeoutMillis, len(got.Topics), len(want.Topics))
	}
	for i := range want.Topics {
		gt, wt := &got.Topics[i], &want.Topics[i]
		if want.Version >= 13 {
			if gt.ID != wt.TopicID || gt.Name != nil {
				t.Fatalf("topic %d id %x vs %x", i, gt.ID, wt.TopicID)
			}
		} else if string(gt.Name) != wt.Topic {
			t.Fatalf("topic %d name %q vs %q", i, gt.Name, wt.Topic)
		}
		if len(gt.Partitions) != len(wt.Partitions) {
			t.Fatalf("topic %d: %d partitions vs %d", i, len(gt.Partitions), len(wt.Partitions))
		}
		for j := range wt.Partitions {
			gp, wp := &gt.Partitions[j], &wt.Partitions[j]
			if gp.Index != wp.Partition || !bytes.Equal(gp.Records, wp.Records) || (gp.Records == nil) != (wp.Records == nil) {
				t.Fatalf("topic %d partition %d: %d/%d records %d/%d bytes", i, j, gp.Index, wp.Partition, len(gp.Records), len(wp.Records))
			}
			sameMirrorField(t, fmt.Sprintf("topic %d partition %d", i, j), gp.HasMirror, gp.Mirror, wp.UnknownTags)
		}
	}
}

func TestDecodeProduceMatchesKmsgEveryVersion(t *testing.T) {
	var req ProduceRequest // reused across versions and shapes
	for v := int16(ProduceMinVersion); v <= ProduceMaxVersion; v++ {
		for i, shape := range []struct{ topics, parts, size int }{{1, 1, 100}, {3, 5, 40}, {0, 0, 0}, {2, 200, 2}, {12, 2, 300}, {1, 1, 100}, {3, 5, 40}} {
			want := kmsgProduce(v, shape.topics, shape.parts, shape.size, true)
			if i >= 5 {
				want = withMirrorTags(want)
			}
			body := want.AppendTo(nil)
			if err := req.Decode(body, v); err != nil {
				t.Fatalf("v%d %+v: %v", v, shape, err)
			}
			compareWithKmsg(t, &req, want)
			if req.Version != v || req.NumPartitions() != shape.topics*shape.parts {
				t.Fatalf("v%d: version %d, %d partitions", v, req.Version, req.NumPartitions())
			}
			// Record sets alias the body: no copy.
			for _, tp := range req.Topics {
				for _, p := range tp.Partitions {
					if len(p.Records) > 0 && !aliases(body, p.Records) {
						t.Fatal("records do not alias the body")
					}
				}
			}
		}
	}
}

func TestDecodeProduceRejects(t *testing.T) {
	var req ProduceRequest
	good := kmsgProduce(11, 2, 2, 10, false).AppendTo(nil)
	for n := 0; n < len(good); n++ {
		if err := req.Decode(good[:n], 11); err == nil {
			// A prefix can only be valid when the cut falls after the
			// last tagged-field section, which is the last byte.
			t.Fatalf("prefix of %d/%d bytes accepted", n, len(good))
		} else if !errors.Is(err, ErrMalformedRequest) {
			t.Fatal(err)
		}
	}
	if err := req.Decode(good, 2); !errors.Is(err, ErrMalformedRequest) {
		t.Fatalf("version 2 accepted: %v", err)
	}
	if err := req.Decode(good, 14); !errors.Is(err, ErrMalformedRequest) {
		t.Fatalf("version 14 accepted: %v", err)
	}
	// A null topic array, which Kafka refuses (non-nullable field).
	nullTopics := []byte{0xff, 0xff, 0, 1, 0, 0, 0, 9, 0xff, 0xff, 0xff, 0xff}
	if err := req.Decode(nullTopics, 3); !errors.Is(err, ErrMalformedRequest) {
		t.Fatalf("null topic array accepted: %v", err)
	}
	// A topic count far beyond the bytes present.
	huge := []byte{0xff, 0xff, 0, 1, 0, 0, 0, 9, 0x7f, 0xff, 0xff, 0xff}
	if err := req.Decode(huge, 3); !errors.Is(err, ErrMalformedRequest) {
		t.Fatalf("huge topic count accepted: %v", err)
	}
}

func kmsgDecodeResponse(t *testing.T, v int16, b []byte) *kmsg.ProduceResponse {
	t.Helper()
	resp := kmsg.NewPtrProduceResponse()
	resp.Version = v
	if err := resp.ReadFrom(b); err != nil {
		t.Fatalf("v%d: kmsg cannot decode our response: %v", v, err)
	}
	return resp
}

func TestProduceResponseDecodesWithKmsgEveryVersion(t *testing.T) {
	rack := "r1"
	for v := int16(ProduceMinVersion); v <= ProduceMaxVersion; v++ {
		resp := ProduceResponse{Version: v, ThrottleMs: 12}
		for ti := 0; ti < 3; ti++ {
			tr := ProduceTopicResponse{Name: []byte(fmt.Sprintf("t%d", ti)), ID: [16]byte{15: byte(ti + 1)}}
			for pi := 0; pi < 3; pi++ {
				p := NewPartitionResponse(int32(pi), 0)
				p.BaseOffset, p.LogAppendTimeMs, p.LogStartOffset = int64(1000*ti+pi), int64(pi)-1, 5
				switch pi {
				case 1:
					p.ErrorCode = 87
					p.ErrorMessage = "one or more records have been rejected"
					p.RecordErrors = []RecordError{{Index: 3, Message: "no key"}, {Index: 9}}
				case 2:
					p.ErrorCode = 6
					p.LeaderID, p.LeaderEpoch = 2, 14
				}
				tr.Partitions = append(tr.Partitions, p)
			}
			resp.Topics = append(resp.Topics, tr)
		}
		resp.NodeEndpoints = []NodeEndpoint{{NodeID: 2, Host: "broker-2.example", Port: 9093, Rack: &rack}, {NodeID: 3, Host: "b3", Port: 1}}
		body := resp.AppendTo(nil)
		got := kmsgDecodeResponse(t, v, body)
		if got.ThrottleMillis != 12 || len(got.Topics) != 3 {
			t.Fatalf("v%d: throttle %d topics %d", v, got.ThrottleMillis, len(got.Topics))
		}
		for ti, gt := range got.Topics {
			if v >= 13 && gt.TopicID != resp.Topics[ti].ID || v < 13 && gt.Topic != string(resp.Topics[ti].Name) {
				t.Fatalf("v%d topic %d", v, ti)
			}
			for pi, gp := range gt.Partitions {
				wp := resp.Topics[ti].Partitions[pi]
				if gp.Partition != wp.Index || gp.ErrorCode != wp.ErrorCode || gp.BaseOffset != wp.BaseOffset || gp.LogAppendTime != wp.LogAppendTimeMs {
					t.Fatalf("v%d %d/%d: %+v", v, ti, pi, gp)
				}
				if v >= 5 && gp.LogStartOffset != wp.LogStartOffset {
					t.Fatalf("v%d log start %d", v, gp.LogStartOffset)
				}
				if v >= 8 {
					if len(gp.ErrorRecords) != len(wp.RecordErrors) || (wp.ErrorMessage == "") != (gp.ErrorMessage == nil) {
						t.Fatalf("v%d record errors %+v msg %v", v, gp.ErrorRecords, gp.ErrorMessage)
					}
					for k, e := range gp.ErrorRecords {
						we := wp.RecordErrors[k]
						if e.RelativeOffset != we.Index || (we.Message == "") != (e.ErrorMessage == nil) || (e.ErrorMessage != nil && *e.ErrorMessage != we.Message) {
							t.Fatalf("v%d record error %d: %+v", v, k, e)
						}
					}
				}
				if v >= 10 && (gp.CurrentLeader.LeaderID != wp.LeaderID || gp.CurrentLeader.LeaderEpoch != wp.LeaderEpoch) {
					t.Fatalf("v%d current leader %+v", v, gp.CurrentLeader)
				}
			}
		}
		if v >= 10 {
			if len(got.Brokers) != 2 || got.Brokers[0].Host != "broker-2.example" || got.Brokers[0].Port != 9093 ||
				got.Brokers[0].Rack == nil || *got.Brokers[0].Rack != "r1" || got.Brokers[1].Rack != nil || got.Brokers[1].NodeID != 3 {
				t.Fatalf("v%d brokers %+v", v, got.Brokers)
			}
		}
		// Re-encoding kmsg's decoding gives our bytes back.
		if re := got.AppendTo(nil); !bytes.Equal(re, body) {
			t.Fatalf("v%d: kmsg re-encodes %d bytes, we wrote %d", v, len(re), len(body))
		}
	}
}

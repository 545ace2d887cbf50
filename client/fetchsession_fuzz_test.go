package client

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// FuzzFetchSessionResponse: any Fetch response body, decoded at any
// version, moves the session on or resets it, never panics, and answers
// only partitions the session holds, with records aliased from the body.
func FuzzFetchSessionResponse(f *testing.F) {
	for _, v := range []int16{7, 12, 13, 16} {
		f.Add(byte(v), sampleFetchResponse(v, 0))
		f.Add(byte(v), sampleFetchResponse(v, 70))
	}
	id := [16]byte{1, 2, 3}
	f.Fuzz(func(t *testing.T, vb byte, body []byte) {
		v := int16(vb%13) + 4 // Fetch v4-v16
		s := NewFetchSession(&Conn{addr: "fuzz", versions: map[int16]int16{kmsg.Fetch.Int16(): v}})
		s.id, s.epoch, s.version = 5, 3, v
		want := []SessionPartition{part(id, 0, 0), part(id, 1, 7)}
		want[0].Topic, want[1].Topic = "t", "t"
		for _, p := range want {
			s.held[p.TopicPartition] = p
		}
		req, _, err := s.build(want, SessionOptions{MaxBytes: 1 << 20})
		if err != nil {
			t.Fatal(err)
		}
		req.Version = v
		r := kmsg.NewPtrFetchResponse()
		r.Version = v
		if r.ReadFrom(body) != nil {
			return
		}
		out, err := s.handle(req, want, r)
		if err != nil {
			if s.id != 0 || s.epoch != 0 || len(s.held) != 0 {
				t.Fatalf("error %v left session %d epoch %d holding %d", err, s.id, s.epoch, len(s.held))
			}
			return
		}
		if len(s.held) != len(want) {
			t.Fatalf("session holds %d partitions, want %d", len(s.held), len(want))
		}
		for _, a := range out.Answers {
			if _, ok := s.held[a.TopicPartition]; !ok {
				t.Fatalf("answer for %s, which the session does not hold", a.TopicPartition)
			}
			if len(a.Records) > 0 && !within(a.Records, body) {
				t.Fatalf("records of %s were copied", a.TopicPartition)
			}
		}
	})
}

// within reports whether b lies inside buf.
func within(b, buf []byte) bool {
	if len(buf) == 0 {
		return false
	}
	for i := range buf {
		if &buf[i] == &b[0] {
			return i+len(b) <= len(buf)
		}
	}
	return false
}

// sampleFetchResponse is a response body for topic t (id 1,2,3) at v.
func sampleFetchResponse(v int16, code int16) []byte {
	r := kmsg.NewPtrFetchResponse()
	r.Version, r.ErrorCode, r.SessionID = v, code, 9
	rt := kmsg.NewFetchResponseTopic()
	rt.Topic, rt.TopicID = "t", [16]byte{1, 2, 3}
	for p := int32(0); p < 3; p++ {
		rp := kmsg.NewFetchResponseTopicPartition()
		rp.Partition, rp.HighWatermark = p, 10
		rp.RecordBatches = []byte("0123456789abcdefghij")
		rt.Partitions = append(rt.Partitions, rp)
	}
	r.Topics = append(r.Topics, rt)
	return r.AppendTo(nil)
}

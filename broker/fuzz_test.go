package broker

import (
	"context"
	"encoding/binary"
	"errors"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// fuzzDecode decodes a fuzzed frame as a connection does; a frame it
// refuses (ok false) must be refused with a connection-closing error.
func fuzzDecode(t *testing.T, frame []byte) (p *pending, e *apiEntry, req *Request, ok bool) {
	t.Helper()
	p, e, req, err := decodeFrame(frame)
	if err != nil {
		var ce *errClose
		if !errors.As(err, &ce) {
			t.Fatalf("decode error is not a connection-closing error: %v", err)
		}
		return nil, nil, nil, false
	}
	return p, e, req, true
}

// fuzzSeedRequests returns, for every registered key and version, a
// request with some content, so the fuzzer starts from valid frames of
// every API the broker serves.
func fuzzSeedRequests() []kmsg.Request {
	var out []kmsg.Request
	for _, e := range registry {
		if e == nil {
			continue
		}
		for v := e.minVersion; v <= e.maxVersion; v++ {
			req := kmsg.RequestForKey(e.key)
			req.SetVersion(v)
			switch r := req.(type) {
			case *kmsg.CreateTopicsRequest:
				rt := kmsg.NewCreateTopicsRequestTopic()
				rt.Topic, rt.NumPartitions, rt.ReplicationFactor = "fz", 2, 1
				rt.Configs = []kmsg.CreateTopicsRequestTopicConfig{{Name: "cleanup.policy", Value: sp("compact")}}
				r.Topics = append(r.Topics, rt)
			case *kmsg.MetadataRequest:
				rt := kmsg.NewMetadataRequestTopic()
				rt.Topic = sp("fz")
				r.Topics = append(r.Topics, rt)
			case *kmsg.DeleteTopicsRequest:
				r.TopicNames = []string{"fz"}
				r.Topics = []kmsg.DeleteTopicsRequestTopic{{Topic: sp("fz")}}
			case *kmsg.CreatePartitionsRequest:
				r.Topics = []kmsg.CreatePartitionsRequestTopic{{Topic: "fz", Count: 3}}
			case *kmsg.DescribeConfigsRequest:
				r.Resources = []kmsg.DescribeConfigsRequestResource{{ResourceType: kmsg.ConfigResourceTypeTopic, ResourceName: "fz"}, {ResourceType: kmsg.ConfigResourceTypeBroker, ResourceName: "1"}}
				r.IncludeSynonyms, r.IncludeDocumentation = true, true
			case *kmsg.AlterConfigsRequest:
				r.Resources = []kmsg.AlterConfigsRequestResource{{ResourceType: kmsg.ConfigResourceTypeTopic, ResourceName: "fz", Configs: []kmsg.AlterConfigsRequestResourceConfig{{Name: "retention.ms", Value: sp("100")}}}}
			case *kmsg.IncrementalAlterConfigsRequest:
				r.Resources = []kmsg.IncrementalAlterConfigsRequestResource{{ResourceType: kmsg.ConfigResourceTypeTopic, ResourceName: "fz", Configs: []kmsg.IncrementalAlterConfigsRequestResourceConfig{{Name: "cleanup.policy", Op: kmsg.IncrementalAlterConfigOpAppend, Value: sp("delete")}}}}
			case *kmsg.DescribeTopicPartitionsRequest:
				r.ResponsePartitionLimit = 1
			case *kmsg.WriteTxnMarkersRequest:
				m := kmsg.NewWriteTxnMarkersRequestMarker()
				m.ProducerID, m.ProducerEpoch, m.Committed, m.CoordinatorEpoch = 7, 1, true, 2
				m.Topics = []kmsg.WriteTxnMarkersRequestMarkerTopic{{Topic: "fz", Partitions: []int32{0, 1}}}
				r.Markers = append(r.Markers, m)
			case *kmsg.ElectLeadersRequest:
				r.Topics = []kmsg.ElectLeadersRequestTopic{{Topic: "fz", Partitions: []int32{0, 1, 5}}}
			case *kmsg.ApiVersionsRequest:
				r.ClientSoftwareName, r.ClientSoftwareVersion = "fz", "1"
			}
			out = append(out, req)
		}
	}
	return out
}

// replyBody serialises a reply as the connection writer would: deferred
// replies are awaited, vectored ones concatenated.
func replyBody(ctx context.Context, reply Reply) ([]byte, error) {
	if d, ok := reply.(DeferredReply); ok {
		r, err := d.Await(ctx)
		if err != nil || r == nil {
			return nil, err
		}
		reply = r
	}
	if v, ok := reply.(VectoredReply); ok {
		var body []byte
		for _, b := range v.BodyBuffers() {
			body = append(body, b...)
		}
		v.Release()
		return body, nil
	}
	return reply.AppendTo(nil), nil
}

// FuzzRequest drives arbitrary bytes (a frame without its size prefix)
// through header parsing, version checks, kmsg decoding and the handler,
// as the connection does. Properties: nothing panics; a frame is either
// refused with a connection-closing error or answered; an answer
// serialises, and decodes again as the response of that version (so the
// client can read it); the in-memory and persisted state stays loadable.
func FuzzRequest(f *testing.F) {
	for i, req := range fuzzSeedRequests() {
		frame := appendRequestFrame(nil, req, int32(i), "fuzz")
		f.Add(frame[4:])
	}
	dir := f.TempDir()
	cfg := quietConfig(dir)
	// Few partitions: each opens a storage log, and the fuzzer would
	// otherwise spend its time (and file descriptors) creating thousands.
	cfg.MaxPartitions = 64
	s, err := Open(cfg)
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { _ = s.Shutdown(context.Background()) })

	f.Fuzz(func(t *testing.T, frame []byte) {
		p, e, req, ok := fuzzDecode(t, frame)
		if !ok {
			return
		}
		if binary.BigEndian.Uint32(frame[4:]) != uint32(p.correlationID) {
			t.Fatal("correlation id not taken from the header")
		}
		if p.reply != nil {
			// ApiVersions of an unknown version: a v0 body.
			body := p.reply.AppendTo(nil)
			resp := kmsg.NewPtrApiVersionsResponse()
			if err := resp.ReadFrom(body); err != nil {
				t.Fatalf("unsupported-version reply does not decode: %v", err)
			}
			return
		}
		// Short: long-polling handlers (Fetch) wait until shortly before it.
		ctx, cancel := context.WithTimeout(context.Background(), 150*time.Millisecond)
		defer cancel()
		// The handler is called directly (not through callHandler) so a
		// panic fails the fuzz run instead of being recovered.
		reply, err := e.handler(ctx, s, req)
		if err != nil {
			return
		}
		if reply == nil {
			return
		}
		body, err := replyBody(ctx, reply)
		if err != nil || body == nil {
			return
		}
		if req.Msg != nil {
			resp := req.Msg.ResponseKind()
			if err := resp.ReadFrom(body); err != nil {
				t.Fatalf("%s v%d response does not decode: %v", kmsg.NameForKey(req.Key), req.Version, err)
			}
			if resp.IsFlexible() != p.headerV1 && req.Key != kmsg.ApiVersions.Int16() {
				t.Fatal("response header version disagrees with the response")
			}
		}
		if _, err := loadCluster(s.fs, s.log); err != nil {
			t.Fatalf("persisted metadata no longer loads: %v", err)
		}
	})
}

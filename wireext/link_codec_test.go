package wireext

import (
	"bytes"
	"errors"
	"reflect"
	"testing"
)

// linkKeys are the link API keys in order.
var linkKeys = []int16{APIKeyCreateMirrorLink, APIKeyDeleteMirrorLink, APIKeyDescribeMirrorLinks,
	APIKeyStartMirrorTopics, APIKeyPauseMirrorTopics, APIKeyDescribeMirrors, APIKeyTruncateMirrorTopics}

func sampleConfig() LinkConfig {
	return LinkConfig{Name: "east", SourceBootstrap: "a:9092,b:9092",
		SourceConfig: map[string]string{"security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-512", "a": ""},
		Topics:       "orders\\..*", Exclude: "orders\\.tmp", Groups: "billing-.*", SyncConfigs: true,
		SyncIntervalMs: 30000, ThrottleBytesPerSec: 50 << 20}
}

func sampleResults() []MirrorTopicResult {
	return []MirrorTopicResult{
		{Topic: "t1"},
		{Topic: "t2", ErrorCode: 29, ErrorMessage: "denied"},
		{Topic: "t3", Partitions: []TruncatedPartition{{Partition: 0, TruncatedTo: -1}, {Partition: 7, TruncatedTo: 1 << 40, RemovedBatches: 3, RemovedBytes: 4096, KeptIn: "t3.truncated"}}},
	}
}

// linkSamples are requests (index 2*i) and responses (2*i+1) of every key,
// every field set, plus the zero values.
func linkSamples() map[int16][]LinkMessage {
	return map[int16][]LinkMessage{
		APIKeyCreateMirrorLink: {
			&CreateMirrorLinkRequest{Link: sampleConfig(), ValidateOnly: true},
			&CreateMirrorLinkResponse{ThrottleMs: 5, ErrorCode: 42, ErrorMessage: "bad regex"},
			&CreateMirrorLinkRequest{}, &CreateMirrorLinkResponse{},
		},
		APIKeyDeleteMirrorLink: {
			&DeleteMirrorLinkRequest{Name: "east", Force: true},
			&DeleteMirrorLinkResponse{ErrorCode: 31, ErrorMessage: "no"},
			&DeleteMirrorLinkRequest{}, &DeleteMirrorLinkResponse{},
		},
		APIKeyDescribeMirrorLinks: {
			&DescribeMirrorLinksRequest{Names: []string{"east", "", "west"}},
			&DescribeMirrorLinksResponse{ThrottleMs: 1, Links: []LinkDescription{
				{Config: sampleConfig(), LinkID: [16]byte{1, 2, 3, 15: 9}, SourceClusterID: "src-1", State: "ACTIVE",
					Topics: []LinkTopic{{Topic: "orders.a", State: StateMirroring}, {Topic: "orders.b", State: StateSkipped, Reason: "an ordinary topic"}}},
				{ErrorCode: 3, ErrorMessage: "no such link", Config: LinkConfig{Name: "gone"}, State: "UNAVAILABLE", Reason: "unreachable"},
			}},
			&DescribeMirrorLinksRequest{}, &DescribeMirrorLinksResponse{},
		},
		APIKeyStartMirrorTopics: {
			&StartMirrorTopicsRequest{Link: "east", Topics: []string{"a", "b"}, TruncateToCommon: true, KeepTopic: "keep"},
			&StartMirrorTopicsResponse{ErrorCode: 0, Topics: sampleResults()},
			&StartMirrorTopicsRequest{}, &StartMirrorTopicsResponse{},
		},
		APIKeyPauseMirrorTopics: {
			&PauseMirrorTopicsRequest{Link: "east", Topics: []string{"a"}, Pause: true},
			&PauseMirrorTopicsResponse{ThrottleMs: 2, ErrorCode: 42, ErrorMessage: "x", Topics: sampleResults()},
			&PauseMirrorTopicsRequest{}, &PauseMirrorTopicsResponse{},
		},
		APIKeyDescribeMirrors: {
			&DescribeMirrorsRequest{Link: "east", Topics: []string{"a", "b"}},
			&DescribeMirrorsResponse{Partitions: []MirrorPartitionStatus{
				{Topic: "a", Partition: 0, Link: "east", State: StateMirroring, SourceHighWatermark: 100, LogEndOffset: 90, Lag: 10, LagMs: 1500,
					LastMirroredOffset: 89, LastMirroredEpoch: 4, BytesPerSec: 1 << 20, DivergenceOffset: -1},
				{Topic: "a", Partition: 1, State: StateFailed, Reason: "divergence", SourceHighWatermark: -1, LogEndOffset: -1, Lag: -1, LagMs: -1,
					LastMirroredOffset: -1, LastMirroredEpoch: -1, BytesPerSec: -1, DivergenceOffset: 77},
			}},
			&DescribeMirrorsRequest{}, &DescribeMirrorsResponse{},
			&DescribeMirrorsRequest{Topics: []string{"a"}, LeaderOnly: true}, &DescribeMirrorsResponse{ErrorCode: 31, ErrorMessage: "x"},
		},
		APIKeyTruncateMirrorTopics: {
			&TruncateMirrorTopicsRequest{Topics: []string{"t"}, KeepTopic: "t.cut"},
			&TruncateMirrorTopicsResponse{Topics: sampleResults()},
			&TruncateMirrorTopicsRequest{}, &TruncateMirrorTopicsResponse{},
		},
	}
}

func newLike(m LinkMessage) LinkMessage {
	return reflect.New(reflect.TypeOf(m).Elem()).Interface().(LinkMessage)
}

// TestLinkCodecRoundTrip: ReadFrom(AppendTo(x)) == x for every message
// of every key, and the canonical bytes re-encode to themselves.
func TestLinkCodecRoundTrip(t *testing.T) {
	for _, key := range linkKeys {
		for i, x := range linkSamples()[key] {
			enc := x.AppendTo(nil)
			y := newLike(x)
			if err := y.ReadFrom(enc); err != nil {
				t.Fatalf("%s #%d: %v (%x)", LinkAPIName(key), i, err, enc)
			}
			if !reflect.DeepEqual(x, y) {
				t.Fatalf("%s #%d: %+v came back as %+v", LinkAPIName(key), i, x, y)
			}
			if again := y.AppendTo(nil); !bytes.Equal(again, enc) {
				t.Fatalf("%s #%d: re-encoded %x, want %x", LinkAPIName(key), i, again, enc)
			}
			wantReq, wantResp := reflect.TypeOf(NewLinkRequest(key)), reflect.TypeOf(NewLinkResponse(key))
			if got := reflect.TypeOf(x); got != wantReq && got != wantResp {
				t.Fatalf("%s: sample %T is neither %v nor %v", LinkAPIName(key), x, wantReq, wantResp)
			}
		}
	}
	if NewLinkRequest(0) != nil || NewLinkResponse(21999) != nil || LinkAPIName(22007) != "" {
		t.Fatal("non-link keys answered")
	}
}

// TestLinkCodecCanonicalMap: SourceConfig is sorted by key, whatever the
// map's order, and a key given twice is malformed.
func TestLinkCodecCanonicalMap(t *testing.T) {
	c := LinkConfig{Name: "n", SourceBootstrap: "s", SourceConfig: map[string]string{"b": "2", "a": "1", "c": "3"}}
	enc := c.appendTo(nil)
	want := []byte{2, 'n', 2, 's', 4, 2, 'a', 2, '1', 0, 2, 'b', 2, '2', 0, 2, 'c', 2, '3', 0}
	if !bytes.HasPrefix(enc, want) {
		t.Fatalf("encoded %x, want prefix %x", enc, want)
	}
	dup := append([]byte{2, 'n', 2, 's', 3, 2, 'a', 2, '1', 0, 2, 'a', 2, '2', 0}, enc[len(want):]...)
	var req CreateMirrorLinkRequest
	err := req.ReadFrom(append(dup, 0, 0))
	if !errors.Is(err, ErrLinkMessage) || !reflect.DeepEqual(req, CreateMirrorLinkRequest{}) {
		t.Fatalf("duplicate key: %v, %+v", err, req)
	}
}

// TestLinkCodecTolerance: unknown tags in any struct's tag section are
// skipped; truncated messages, trailing bytes, null where a string is
// required and counts beyond the message are malformed.
func TestLinkCodecTolerance(t *testing.T) {
	x := &CreateMirrorLinkRequest{Link: sampleConfig()}
	enc := x.AppendTo(nil)
	cfgEnd := len(x.Link.appendTo(nil)) - 1 // LinkConfig's empty tag section
	unknown := []byte{2, 7, 2, 'h', 'i', 0x90, 0x03, 0}
	withTags := append(append(append([]byte{}, enc[:cfgEnd]...), unknown...), enc[cfgEnd+1:len(enc)-1]...)
	withTags = append(withTags, unknown...)
	var y CreateMirrorLinkRequest
	if err := y.ReadFrom(withTags); err != nil || !reflect.DeepEqual(&y, x) {
		t.Fatalf("unknown tags: %v, %+v", err, y)
	}

	var st DescribeMirrorsResponse
	enc = (&DescribeMirrorsResponse{Partitions: []MirrorPartitionStatus{{Topic: "a", State: "MIRRORING"}}}).AppendTo(nil)
	for n := 0; n < len(enc); n++ {
		if err := st.ReadFrom(enc[:n]); !errors.Is(err, ErrLinkMessage) || st.Partitions != nil {
			t.Fatalf("truncated to %d: %v", n, err)
		}
	}
	if err := st.ReadFrom(append(enc, 0)); !errors.Is(err, ErrLinkMessage) {
		t.Fatalf("trailing byte: %v", err)
	}
	var d DeleteMirrorLinkRequest
	if err := d.ReadFrom([]byte{0, 1, 0}); !errors.Is(err, ErrLinkMessage) {
		t.Fatalf("null name: %v", err)
	}
	var dl DescribeMirrorLinksRequest
	if err := dl.ReadFrom([]byte{0xff, 0xff, 0xff, 0xff, 0x0f, 0}); !errors.Is(err, ErrLinkMessage) {
		t.Fatalf("huge count: %v", err)
	}
	// Null arrays and null optional strings read as empty.
	var p PauseMirrorTopicsRequest
	if err := p.ReadFrom([]byte{0, 0, 1, 0}); err != nil || !reflect.DeepEqual(p, PauseMirrorTopicsRequest{Pause: true}) {
		t.Fatalf("nulls: %v %+v", err, p)
	}
}

// TestDescribeMirrorsLeaderOnly: LeaderOnly is tag 0 of the request's tag
// section, one byte, omitted when false (so a request without it is the
// bytes it always was); other tags beside it are skipped, a value of
// another size is malformed.
func TestDescribeMirrorsLeaderOnly(t *testing.T) {
	plain := (&DescribeMirrorsRequest{Topics: []string{"a"}}).AppendTo(nil)
	if want := []byte{0, 2, 2, 'a', 0}; !bytes.Equal(plain, want) {
		t.Fatalf("without LeaderOnly: %x, want %x", plain, want)
	}
	enc := (&DescribeMirrorsRequest{Topics: []string{"a"}, LeaderOnly: true}).AppendTo(nil)
	if want := []byte{0, 2, 2, 'a', 1, DescribeMirrorsLeaderOnlyTag, 1, 1}; !bytes.Equal(enc, want) {
		t.Fatalf("with LeaderOnly: %x, want %x", enc, want)
	}
	for _, c := range []struct {
		tags []byte
		want bool
		bad  bool
	}{
		{tags: []byte{2, 0, 1, 7, 5, 2, 'h', 'i'}, want: true}, // any non-zero byte, an unknown tag after it
		{tags: []byte{1, 0, 1, 0}, want: false},
		{tags: []byte{1, 0, 0}, bad: true},
		{tags: []byte{1, 0, 2, 1, 1}, bad: true},
		{tags: []byte{1, 0, 5, 1}, bad: true}, // size beyond the message
	} {
		b := append([]byte{0, 2, 2, 'a'}, c.tags...)
		var m DescribeMirrorsRequest
		err := m.ReadFrom(b)
		if c.bad {
			if !errors.Is(err, ErrLinkMessage) || !reflect.DeepEqual(m, DescribeMirrorsRequest{}) {
				t.Fatalf("%x: %v, %+v", b, err, m)
			}
			continue
		}
		if err != nil || m.LeaderOnly != c.want || !reflect.DeepEqual(m.Topics, []string{"a"}) {
			t.Fatalf("%x: %v, %+v", b, err, m)
		}
	}
}

package hotpath

import (
	"bytes"
	"errors"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/verbatim-kafka/verbatim/wireext"
)

// FuzzDecodeProduce: Decode never panics; whatever it accepts kmsg accepts
// and decodes to the same values; whatever kmsg accepts in canonical form
// (kmsg re-encodes it to the same bytes) Decode accepts. The one deliberate
// difference: a negative (null) topic or partition array, which kmsg reads
// as empty and Kafka refuses as a null non-nullable field, is refused here;
// kmsg never encodes one, so canonical inputs never contain it. Verbatim's
// mirror fields (tag wireext.MirrorTag) are the ones kmsg keeps among its
// unknown tags, decoded by wireext; a value that does not decode is the
// one other reason to refuse what kmsg accepts.
func FuzzDecodeProduce(f *testing.F) {
	for v := int16(ProduceMinVersion); v <= ProduceMaxVersion; v++ {
		f.Add(kmsgProduce(v, 2, 2, 8, true).AppendTo(nil), uint8(v))
		f.Add(kmsgProduce(v, 1, 1, 70, false).AppendTo(nil), uint8(v))
		f.Add(withMirrorTags(kmsgProduce(v, 2, 2, 8, true)).AppendTo(nil), uint8(v))
	}
	f.Fuzz(func(t *testing.T, body []byte, version uint8) {
		v := int16(ProduceMinVersion + version%(ProduceMaxVersion-ProduceMinVersion+1))
		var got ProduceRequest
		err := got.Decode(body, v)
		want := kmsg.NewPtrProduceRequest()
		want.Version = v
		kerr := want.ReadFrom(body)
		if err != nil {
			if !errors.Is(err, ErrMalformedRequest) {
				t.Fatalf("unmarked error %v", err)
			}
			if kerr == nil && !badMirrorField(want) {
				consumed := len(body) - trailingAfter(want, body)
				if bytes.Equal(want.AppendTo(nil), body[:consumed]) {
					t.Fatalf("v%d: kmsg accepts canonical input, Decode says %v", v, err)
				}
			}
			return
		}
		if kerr != nil {
			t.Fatalf("v%d: Decode accepted what kmsg refuses (%v)", v, kerr)
		}
		compareWithKmsg(t, &got, want)
	})
}

// trailingAfter returns how many bytes of body follow kmsg's encoding of
// req when body starts with it (kmsg ignores trailing bytes), else 0.
func trailingAfter(req *kmsg.ProduceRequest, body []byte) int {
	enc := req.AppendTo(nil)
	if len(enc) <= len(body) && bytes.Equal(enc, body[:len(enc)]) {
		return len(body) - len(enc)
	}
	return 0
}

// badMirrorField reports whether a request kmsg decoded carries a mirror
// field (request or partition level) whose value wireext refuses.
func badMirrorField(req *kmsg.ProduceRequest) bool {
	if v, ok := kmsgMirrorTag(req.UnknownTags); ok && new(wireext.MirrorProduce).ReadFrom(v) != nil {
		return true
	}
	for _, tp := range req.Topics {
		for _, p := range tp.Partitions {
			if v, ok := kmsgMirrorTag(p.UnknownTags); ok && new(wireext.MirrorPartition).ReadFrom(v) != nil {
				return true
			}
		}
	}
	return false
}

// FuzzDecodeMirrorFields: for a flexible body kmsg decodes, Decode yields
// exactly the request- and partition-level mirror fields kmsg keeps among
// its unknown tags (the last of duplicates), decoded as wireext decodes
// them; when Decode refuses a mirror value, kmsg kept one that wireext
// refuses.
func FuzzDecodeMirrorFields(f *testing.F) {
	for _, v := range []int16{9, 11, 13} {
		f.Add(v, withMirrorTags(kmsgProduce(v, 2, 2, 8, true)).AppendTo(nil))
		plain := kmsgProduce(v, 1, 2, 8, false)
		plain.Topics[0].Partitions[0].UnknownTags.Set(7, []byte{1, 2})
		f.Add(v, plain.AppendTo(nil))
	}
	f.Fuzz(func(t *testing.T, version int16, body []byte) {
		if version < 9 || version > ProduceMaxVersion {
			return
		}
		var got ProduceRequest
		err := got.Decode(body, version)
		want := kmsg.NewPtrProduceRequest()
		want.Version = version
		if kerr := want.ReadFrom(body); kerr != nil {
			if err == nil {
				t.Fatalf("Decode accepted what kmsg refuses (%v)", kerr)
			}
			return
		}
		switch {
		case errors.Is(err, wireext.ErrMirrorProduce) || errors.Is(err, wireext.ErrMirrorPartition):
			if !badMirrorField(want) {
				t.Fatalf("%v, but kmsg's mirror fields all decode", err)
			}
		case err == nil:
			compareWithKmsg(t, &got, want)
		}
	})
}

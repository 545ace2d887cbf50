package hotpath

import (
	"bytes"
	"errors"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// FuzzDecodeProduce: Decode never panics; whatever it accepts kmsg accepts
// and decodes to the same values; whatever kmsg accepts in canonical form
// (kmsg re-encodes it to the same bytes) Decode accepts. The one deliberate
// difference: a negative (null) topic or partition array, which kmsg reads
// as empty and Kafka refuses as a null non-nullable field, is refused here;
// kmsg never encodes one, so canonical inputs never contain it.
func FuzzDecodeProduce(f *testing.F) {
	for v := int16(ProduceMinVersion); v <= ProduceMaxVersion; v++ {
		f.Add(kmsgProduce(v, 2, 2, 8, true).AppendTo(nil), uint8(v))
		f.Add(kmsgProduce(v, 1, 1, 70, false).AppendTo(nil), uint8(v))
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
			if kerr == nil {
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

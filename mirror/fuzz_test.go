package mirror

import (
	"bytes"
	"testing"

	"github.com/verbatim-kafka/verbatim/kbatch"
)

// FuzzSplit: whatever a source sends, Split never panics, returns only
// whole v2 batches that end at or after from, in order, and a span that is
// exactly their bytes.
func FuzzSplit(f *testing.F) {
	set := append(newTestBatch(0, 3), newTestBatch(3, 2)...)
	f.Add(set, int64(0))
	f.Add(set[:len(set)-7], int64(1))
	f.Add(set, int64(4))
	f.Add([]byte{}, int64(0))
	f.Fuzz(func(t *testing.T, set []byte, from int64) {
		bs, span, _, err := Split(set, from)
		if err != nil {
			return
		}
		var joined []byte
		for _, b := range bs {
			if len(b) < kbatch.HeaderSize || kbatch.Magic(b) != 2 || LastOffset(b) < from {
				t.Fatalf("bad batch returned: %d bytes, magic %d", len(b), kbatch.Magic(b))
			}
			if int(kbatch.Length(b))+kbatch.LogOverhead != len(b) {
				t.Fatalf("batch length field %d, slice %d", kbatch.Length(b), len(b))
			}
			joined = append(joined, b...)
		}
		if !bytes.Equal(joined, span) {
			t.Fatalf("span (%d bytes) is not the batches (%d bytes)", len(span), len(joined))
		}
	})
}

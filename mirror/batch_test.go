package mirror

import (
	"github.com/verbatim-kafka/verbatim/kbatch"
)

// newTestBatch encodes an uncompressed v2 batch of n records at base.
func newTestBatch(base int64, n int) []byte {
	var recs []kbatch.Record
	for i := 0; i < n; i++ {
		recs = append(recs, kbatch.Record{OffsetDelta: int32(i), Value: []byte{byte(i)}})
	}
	b := kbatch.NewBatch(1_700_000_000_000, recs...)
	b.BaseOffset = base
	out, err := kbatch.Encode(b)
	if err != nil {
		panic(err)
	}
	return out
}

package verify

// verify reads fetched record sets on its own: it shares the byte layout
// constants of kbatch, but none of the pusher's code, so a pusher that
// splits, skips or reorders batches wrongly cannot hide the same mistake
// here.

import (
	"encoding/binary"
	"fmt"

	"github.com/verbatim-kafka/verbatim/kbatch"
)

// splitRecordSet cuts a fetched record set into its whole v2 batches whose
// last offset is at or above from, in order. Trailing bytes that do not
// hold a whole batch (Kafka cuts responses at the byte limit) are dropped
// and reported as partial. A batch of an older message format, or one too
// short for a v2 header, is an error.
func splitRecordSet(set []byte, from int64) (batches [][]byte, partial bool, err error) {
	for pos := 0; pos < len(set); {
		rest := set[pos:]
		if len(rest) <= kbatch.MagicOffset {
			return batches, true, nil
		}
		length := int64(int32(binary.BigEndian.Uint32(rest[kbatch.LengthOffset:])))
		size := int64(kbatch.LogOverhead) + length
		if length < 0 || size > int64(len(rest)) {
			return batches, true, nil
		}
		b := rest[:size:size]
		base := int64(binary.BigEndian.Uint64(b[kbatch.BaseOffsetOffset:]))
		if size <= kbatch.MagicOffset {
			return nil, false, fmt.Errorf("batch at offset %d is %d bytes, too short to hold a magic byte", base, size)
		}
		if m := b[kbatch.MagicOffset]; m != 2 {
			return nil, false, fmt.Errorf("batch at offset %d has magic %d: only v2 record batches are compared", base, m)
		}
		if size < kbatch.HeaderSize {
			return nil, false, fmt.Errorf("batch at offset %d is %d bytes, shorter than a v2 header", base, size)
		}
		if batchLastOffset(b) >= from {
			batches = append(batches, b)
		}
		pos += int(size)
	}
	return batches, false, nil
}

// batchLastOffset is a v2 batch's base offset plus its last offset delta.
func batchLastOffset(b []byte) int64 {
	base := int64(binary.BigEndian.Uint64(b[kbatch.BaseOffsetOffset:]))
	return base + int64(int32(binary.BigEndian.Uint32(b[kbatch.LastOffsetDeltaOffset:])))
}

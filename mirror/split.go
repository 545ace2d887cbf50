package mirror

import (
	"errors"
	"fmt"

	"github.com/verbatim-kafka/verbatim/kbatch"
)

// ErrOldMagic is returned for message format v0/v1 data, which cannot be
// mirrored: it has no batch leader epoch or producer state and Verbatim
// stores only v2 batches.
var ErrOldMagic = errors.New("message format v0/v1 (magic 0 or 1)")

// Split cuts a fetched record set into whole v2 batches whose last offset
// is at or above from; span is the bytes of those batches (they are
// consecutive in set). A partial batch at the end (Kafka cuts responses at
// the byte limit) is dropped: partial reports whether one was. A batch in
// an older message format is an error wrapping ErrOldMagic.
func Split(set []byte, from int64) (batches [][]byte, span []byte, partial bool, err error) {
	pos, spanStart := 0, -1
	for pos < len(set) {
		b, _, err := kbatch.Next(set[pos:])
		if err != nil {
			partial = true
			break
		}
		if len(b) <= kbatch.MagicOffset {
			return nil, nil, false, fmt.Errorf("batch at offset %d is %d bytes, too short to hold a magic byte", kbatch.BaseOffset(b), len(b))
		}
		if m := kbatch.Magic(b); m != 2 {
			return nil, nil, false, fmt.Errorf("%w at offset %d (magic %d): only v2 record batches can be mirrored; rewrite the source topic with a v2 producer", ErrOldMagic, kbatch.BaseOffset(b), m)
		}
		if len(b) < kbatch.HeaderSize {
			return nil, nil, false, fmt.Errorf("batch at offset %d is %d bytes, shorter than a v2 header", kbatch.BaseOffset(b), len(b))
		}
		if LastOffset(b) >= from {
			if spanStart < 0 {
				spanStart = pos
			}
			batches = append(batches, b)
		}
		pos += len(b)
	}
	if spanStart >= 0 {
		end := spanStart
		for _, b := range batches {
			end += len(b)
		}
		span = set[spanStart:end:end]
	}
	return batches, span, partial, nil
}

// LastOffset is the offset of a batch's last record (by LastOffsetDelta).
func LastOffset(b []byte) int64 { return kbatch.BaseOffset(b) + int64(kbatch.LastOffsetDelta(b)) }

package storage

import (
	"bytes"
	"errors"
	"math"
	"testing"

	"github.com/verbatim-kafka/verbatim/kbatch"
)

// FuzzCheckSet: checkSet never panics and accepts exactly the non-empty
// sets of whole magic-2 batches with non-negative last offset deltas (and,
// verbatim, non-negative, non-overflowing, strictly increasing offsets),
// returning the last batch's last offset; every refusal is
// ErrCorruptBatch or ErrUnsupportedMagic.
func FuzzCheckSet(f *testing.F) {
	a, b := testBatch(f, 0, 1, 1000, 3, 10), testBatch(f, 5, 2, 2000, 1, 0)
	f.Add(append(bytes.Clone(a), b...), true)
	f.Add(append(bytes.Clone(b), a...), true)
	f.Add(a[:len(a)-1], false)
	f.Add(a[:20], false)
	f.Fuzz(func(t *testing.T, set []byte, verbatim bool) {
		last, err := checkSet(set, verbatim)
		ok, want, prev := len(set) > 0, int64(0), int64(-1)
		it := kbatch.Batches(set)
		for ok && it.Next() {
			b := it.Batch()
			base, lod := kbatch.BaseOffset(b), kbatch.LastOffsetDelta(b)
			ok = kbatch.Magic(b) == 2 && lod >= 0
			if ok && verbatim {
				ok = base >= 0 && base <= math.MaxInt64-int64(lod)-1 && base > prev
				prev = base + int64(lod)
			}
			want = base + int64(lod)
		}
		ok = ok && len(it.Rest()) == 0
		if ok != (err == nil) {
			t.Fatalf("checkSet(%d bytes, verbatim %v) = %v, want ok %v", len(set), verbatim, err, ok)
		}
		if err != nil && !errors.Is(err, ErrCorruptBatch) && !errors.Is(err, ErrUnsupportedMagic) {
			t.Fatalf("unmarked error %v", err)
		}
		if err == nil && last != want {
			t.Fatalf("last offset %d, want %d", last, want)
		}
	})
}

package verify

import (
	"bytes"
	"strings"
	"testing"
)

func TestSplitRecordSet(t *testing.T) {
	a, b, c := fuzzBatch(0, false), fuzzBatch(1, true), fuzzBatch(2, false)
	set := append(append(append([]byte{}, a...), b...), c...)

	bs, partial, err := splitRecordSet(set, 0)
	if err != nil || partial || len(bs) != 3 || !bytes.Equal(bs[1], b) {
		t.Fatalf("whole set: %d batches, partial %v, err %v", len(bs), partial, err)
	}
	// A response cut inside the last batch: the whole ones, and partial.
	bs, partial, err = splitRecordSet(set[:len(set)-5], 0)
	if err != nil || !partial || len(bs) != 2 {
		t.Fatalf("cut set: %d batches, partial %v, err %v", len(bs), partial, err)
	}
	// Batches ending before from are skipped.
	bs, _, _ = splitRecordSet(set, 2)
	if len(bs) != 1 || batchLastOffset(bs[0]) != 2 {
		t.Fatalf("from 2: %d batches", len(bs))
	}
	// Fewer bytes than a batch header's length field: partial, nothing.
	if bs, partial, err = splitRecordSet(set[:10], 0); err != nil || !partial || len(bs) != 0 {
		t.Fatalf("10 bytes: %d batches, partial %v, err %v", len(bs), partial, err)
	}
	// An old message format is an error naming the offset.
	old := append([]byte{}, a...)
	old[16] = 1
	if _, _, err := splitRecordSet(old, 0); err == nil || !strings.Contains(err.Error(), "offset 0") || !strings.Contains(err.Error(), "magic 1") {
		t.Fatalf("magic 1: %v", err)
	}
}

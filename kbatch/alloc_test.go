//go:build !race

package kbatch

import "testing"

// Walking a record set's batches allocates nothing.
func TestAllocBatches(t *testing.T) {
	set, _ := testSet(t, 4)
	if n := testing.AllocsPerRun(100, func() {
		for it := Batches(set); it.Next(); {
			_ = it.Batch()
		}
	}); n != 0 {
		t.Fatalf("%v allocations per walk", n)
	}
}

// Walking a batch with a RecordReader allocates nothing once the pools are
// warm, for every codec: the reader, its window and the decoders are
// pooled and records are parsed in place.
func TestAllocRecordReader(t *testing.T) {
	for _, c := range allCodecs {
		var recs []Record
		for i := 0; i < 50; i++ {
			recs = append(recs, Record{OffsetDelta: int32(i), Key: []byte("key"), Value: textValue(300, i)})
		}
		raw := encodeWith(t, c, recs)
		run := func() {
			if n, err := walkAll(raw, Limits{MaxBatchBytes: 1 << 20}); err != nil || n != len(recs) {
				t.Fatalf("%s: %d records, %v", c, n, err)
			}
		}
		run()
		if allocs := testing.AllocsPerRun(50, run); allocs != 0 {
			t.Errorf("%s: %.1f allocations per batch, want 0", c, allocs)
		}
	}
}

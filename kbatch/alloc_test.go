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

package storage

import "testing"

func TestMirrorLeaderEpoch(t *testing.T) {
	for _, c := range []struct{ cur, batch, want int32 }{
		{0, 0, 10},   // a new partition: the first batch raises it
		{10, 0, 10},  // far ahead
		{10, 7, 10},  // exactly 3 ahead: unchanged
		{10, 8, 20},  // within 3, below cur: cur + 10
		{10, 10, 20}, // equal
		{10, 25, 35}, // a batch ahead of the partition: batch + 10
		{0, -1, 10},  // no epoch in the batches, a young partition
		{5, -1, 5},   // no epoch, 6 ahead
	} {
		if got := MirrorLeaderEpoch(c.cur, c.batch); got != c.want {
			t.Errorf("MirrorLeaderEpoch(%d, %d) = %d, want %d", c.cur, c.batch, got, c.want)
		}
	}
}

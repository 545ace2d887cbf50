//go:build !race

package storage

import (
	"testing"
)

// TestAllocAppend checks that steady-state appends (leader and verbatim,
// under every flush policy, with producer ids and without) do not
// allocate. It runs on the real filesystem so that only the Log's own
// allocations (and the flusher's) are counted; the in-memory index buffers
// grow by doubling, which averages to zero per append.
func TestAllocAppend(t *testing.T) {
	for _, policy := range []FlushPolicy{FlushNever, FlushAlways} {
		for _, pid := range []int64{-1, 42} {
			l, err := Open(OSFS{}, t.TempDir()+"/t-0", Config{Flush: policy, SegmentBytes: 1 << 30})
			if err != nil {
				t.Fatal(err)
			}
			b := testBatch(t, 0, 1, 1000, 10, 1000)
			if pid >= 0 {
				b = pidBatch(t, 0, pid, 0, 0, 10, false)
			}
			seq := int32(0)
			appendLeader := func() {
				if pid >= 0 {
					// The sequence is inside the CRC: setSeq recomputes it.
					setSeq(b, seq)
					seq += 10
				}
				if _, err := l.AppendLeader(b, 1, 1); err != nil {
					t.Fatal(err)
				}
			}
			// Warm up: let slices and index buffers grow.
			for i := 0; i < 2000; i++ {
				appendLeader()
			}
			if n := testing.AllocsPerRun(200, appendLeader); n != 0 {
				t.Errorf("policy %v pid %d: AppendLeader allocates %.1f times per append", policy, pid, n)
			}
			next := l.LogEndOffset()
			vb := testBatch(t, next, 1, 1000, 10, 1000)
			appendVerbatim := func() {
				setBase(vb, next)
				if _, err := l.AppendVerbatim(vb); err != nil {
					t.Fatal(err)
				}
				next += 10
			}
			for i := 0; i < 2000; i++ {
				appendVerbatim()
			}
			if n := testing.AllocsPerRun(200, appendVerbatim); n != 0 {
				t.Errorf("policy %v: AppendVerbatim allocates %.1f times per append", policy, n)
			}
			l.Close()
		}
	}
}

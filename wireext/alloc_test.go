//go:build !race

package wireext

import "testing"

// Decoding the Produce values allocates nothing: the hot path decodes them
// per request.
func TestAllocDecode(t *testing.T) {
	mp := (&MirrorProduce{WriterEpoch: 3, WriterID: [16]byte{1}}).AppendTo(nil)
	pp := (&MirrorPartition{ExpectedLogEndOffset: 4}).AppendTo(nil)
	var m MirrorProduce
	var p MirrorPartition
	if n := testing.AllocsPerRun(100, func() {
		if m.ReadFrom(mp) != nil || p.ReadFrom(pp) != nil {
			panic("decode")
		}
	}); n != 0 {
		t.Fatalf("%v allocations per decode", n)
	}
}

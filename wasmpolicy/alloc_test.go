//go:build !race

package wasmpolicy

import (
	"context"
	"testing"

	"github.com/verbatim-kafka/verbatim/policies"
)

// TestAllocJudge: a judge call allocates only what wazero's
// WithCloseOnContextDone costs per call of a module that has a deadline: a
// channel, a closure and a goroutine (3 in a steady benchmark; a 4th, the
// goroutine's descriptor, when the previous call's goroutine has not
// exited yet). The default built-ins run without it (engine) and
// allocate nothing; encoding, pooling and the deadline allocate nothing.
func TestAllocJudge(t *testing.T) {
	h, _ := watExampleHost(t)
	for _, c := range []struct {
		names []string
		max   float64
	}{
		{[]string{"epoch-monotonic-wat"}, 4},
		{policies.DefaultMirror, 0},
	} {
		b, err := h.Bind("t", c.names, nil)
		if err != nil {
			t.Fatal(err)
		}
		set := benchSet(t, 16)
		ctx, pc := context.Background(), mirrorCtx(0, -1)
		if _, err := b.Judge(ctx, pc, set); err != nil { // instantiate
			t.Fatal(err)
		}
		n := testing.AllocsPerRun(200, func() {
			if v, err := b.Judge(ctx, pc, set); err != nil || !v.Accepted() {
				t.Fatalf("%v %v", v.Err(), err)
			}
		})
		if n > c.max {
			t.Errorf("%v: %.1f allocations per call, want <= %.0f", c.names, n, c.max)
		}
	}
}

package broker

import (
	"bytes"
	"maps"
	"testing"
)

// FuzzHWCheckpoint: the replication-offset-checkpoint parser never panics,
// and whatever it accepts formats back to a file it reads the same.
func FuzzHWCheckpoint(f *testing.F) {
	f.Add([]byte("0\n0\n"))
	f.Add([]byte("0\n2\norders 0 1234\norders 1 987\n"))
	f.Add([]byte("0\n1\na 0\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := parseHWCheckpoint(data)
		if err != nil {
			return
		}
		out := formatHWCheckpoint(m)
		again, err := parseHWCheckpoint(out)
		if err != nil {
			t.Fatalf("formatted checkpoint %q does not parse: %v", out, err)
		}
		if !maps.Equal(m, again) {
			t.Fatalf("round trip changed %v to %v", m, again)
		}
		if !bytes.Equal(formatHWCheckpoint(again), out) {
			t.Fatalf("format is not stable for %q", out)
		}
	})
}

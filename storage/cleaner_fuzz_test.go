package storage

import (
	"errors"
	"testing"
)

// FuzzCleanerCheckpoint: the cleaner's checkpoint files (Kafka's
// cleaner-offset-checkpoint, Verbatim's swap record) are parsed from
// whatever a crash left; any input either parses to what re-encodes to an
// equal value or fails with ErrCorruptCheckpoint, without panicking.
func FuzzCleanerCheckpoint(f *testing.F) {
	f.Add([]byte("0\n1\nt 0 42\n"))
	f.Add([]byte("0\n2\nt 0 1\nu 3 7\n"))
	f.Add([]byte("0\n1\n10 20\n"))
	f.Add([]byte("0\n0\n"))
	f.Add([]byte("1\n1\nt 0 1\n"))
	f.Add([]byte("0\n1\nt 0 -1\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		off, err := decodePartitionCheckpoint(b, "t", 0)
		if err != nil {
			if !errors.Is(err, ErrCorruptCheckpoint) {
				t.Fatalf("checkpoint error %v does not wrap ErrCorruptCheckpoint", err)
			}
		} else if off >= 0 {
			again, err := decodePartitionCheckpoint(encodePartitionCheckpoint("t", 0, off), "t", 0)
			if err != nil || again != off {
				t.Fatalf("round trip of %d: %d %v", off, again, err)
			}
		}
		base, end, err := decodeSwapRecord(b)
		if err != nil {
			if !errors.Is(err, ErrCorruptCheckpoint) {
				t.Fatalf("swap record error %v does not wrap ErrCorruptCheckpoint", err)
			}
			return
		}
		if base < 0 || end < base {
			t.Fatalf("accepted base %d end %d", base, end)
		}
		b2, e2, err := decodeSwapRecord(encodeSwapRecord(base, end))
		if err != nil || b2 != base || e2 != end {
			t.Fatalf("swap round trip: %d %d %v", b2, e2, err)
		}
	})
}

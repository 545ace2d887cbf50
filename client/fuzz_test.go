package client

import "testing"

// FuzzSkipTags: response header tags are skipped or refused, never
// over-read.
func FuzzSkipTags(f *testing.F) {
	f.Add([]byte{0, 1, 2})
	f.Add([]byte{1, 5, 2, 9, 9, 7})
	f.Add([]byte{2, 1, 200})
	f.Fuzz(func(t *testing.T, b []byte) {
		rest, err := skipTags(b)
		if err == nil && len(rest) > len(b) {
			t.Fatalf("rest longer than input")
		}
	})
}

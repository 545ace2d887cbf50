package storage

import (
	"os"
	"testing"
)

// FuzzTruncationIntent: any truncation-checkpoint content either decodes
// to an offset that writes back to the same record, or is refused; it
// never panics.
func FuzzTruncationIntent(f *testing.F) {
	f.Add([]byte("0\n1\n42\n"))
	f.Add([]byte("0\n1\n-1\n"))
	f.Add([]byte("0\n2\n1\n2\n"))
	f.Add([]byte("1\n1\n5\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		fs := NewMemFS()
		if err := fs.MkdirAll("d", 0o755); err != nil {
			t.Fatal(err)
		}
		fl, err := fs.OpenFile("d/"+truncationFile, os.O_CREATE|os.O_WRONLY, 0o644)
		if err != nil {
			t.Fatal(err)
		}
		fl.Write(b)
		fl.Close()
		to, err := readTruncationIntent(fs, "d")
		if err != nil {
			return
		}
		if to < 0 {
			t.Fatalf("decoded a negative target %d without an error", to)
		}
		if err := writeTruncationIntent(fs, "d", to); err != nil {
			t.Fatal(err)
		}
		if again, err := readTruncationIntent(fs, "d"); err != nil || again != to {
			t.Fatalf("round trip of %d: %d %v", to, again, err)
		}
	})
}

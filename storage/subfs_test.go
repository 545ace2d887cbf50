package storage

import (
	"os"
	"testing"
)

// Names through Sub land below its root, ".." included, and every
// operation (an atomic write is all of them but Remove) reaches the same
// files as the underlying FS.
func TestSubKeepsNamesBelowRoot(t *testing.T) {
	fs := NewMemFS()
	if err := fs.MkdirAll("data/meta", 0o755); err != nil {
		t.Fatal(err)
	}
	sub := Sub(fs, "data")
	for _, c := range []struct{ name, want string }{
		{"meta/a", "data/meta/a"},
		{"../b", "data/b"},
		{"/meta/../../../c", "data/c"},
		{"./d", "data/d"},
	} {
		if err := AtomicWriteFile(sub, c.name, []byte(c.name)); err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		data, ok, err := readWholeFile(fs, c.want)
		if err != nil || !ok || string(data) != c.name {
			t.Fatalf("%s: %q at %s, ok %v, err %v", c.name, data, c.want, ok, err)
		}
		if fi, err := sub.Stat(c.name); err != nil || fi.Size() != int64(len(c.name)) {
			t.Fatalf("%s: stat %v %v", c.name, fi, err)
		}
	}
	names, err := sub.ReadDir(".")
	if err != nil || len(names) != 4 || names[0] != "b" || names[3] != "meta" {
		t.Fatalf("ReadDir: %v %v", names, err)
	}
	if err := sub.Remove("b"); err != nil {
		t.Fatal(err)
	}
	if _, err := fs.Stat("data/b"); !os.IsNotExist(err) {
		t.Fatalf("removed file still there: %v", err)
	}
}

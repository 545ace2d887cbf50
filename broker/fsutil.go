package broker

import (
	"errors"
	"io"
	"os"
	"path"
	"path/filepath"

	"github.com/verbatim-kafka/verbatim/storage"
)

// The broker's metadata files live under the data dir and go through a
// storage.FS rooted there (storage.Sub: names are slash-separated, relative
// to the data dir, and cannot climb above it).

// newDirFS returns the real filesystem rooted at dir.
func newDirFS(dir string) storage.FS { return dirFS(storage.OSFS{}, dir) }

// dirFS returns fsys rooted at dir.
func dirFS(fsys storage.FS, dir string) storage.FS { return storage.Sub(fsys, filepath.ToSlash(dir)) }

// readFile reads a whole file through fsys.
func readFile(fsys storage.FS, name string) ([]byte, error) {
	f, err := fsys.OpenFile(name, os.O_RDONLY, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(f)
}

// writeFileAtomic replaces dir/name with data with storage.AtomicWriteFile:
// after a crash either the old or the new content is there, never a mix.
func writeFileAtomic(fsys storage.FS, dir, name string, data []byte) error {
	return storage.AtomicWriteFile(fsys, path.Join(dir, name), data)
}

// removeAll removes name and, if it is a directory, everything below it.
// A missing name is not an error.
func removeAll(fsys storage.FS, name string) error {
	fi, err := fsys.Stat(name)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	if fi.IsDir() {
		children, err := fsys.ReadDir(name)
		if err != nil {
			return err
		}
		for _, c := range children {
			if err := removeAll(fsys, path.Join(name, c)); err != nil {
				return err
			}
		}
	}
	return fsys.Remove(name)
}

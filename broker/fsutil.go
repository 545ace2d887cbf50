package broker

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"sort"
)

// fileSystem is the part of storage's FS interface the broker's metadata
// files need (same method names and meaning). It is declared here rather
// than imported so the control plane does not depend on the storage
// package; any storage.FS adapter can be passed in.
type fileSystem interface {
	OpenFile(name string, flag int, perm os.FileMode) (metaFile, error)
	Remove(name string) error
	Rename(oldname, newname string) error
	MkdirAll(dir string, perm os.FileMode) error
	ReadDir(dir string) ([]string, error)
	Stat(name string) (os.FileInfo, error)
	SyncDir(dir string) error
}

// metaFile is an open metadata file.
type metaFile interface {
	io.Reader
	io.Writer
	io.Closer
	Sync() error
}

// dirFS is a storage.FS rooted at a directory of the real filesystem. Names
// are slash-separated and relative to the root; ".." is refused so a topic
// name can never escape the data dir.
type dirFS struct {
	root string
}

// newDirFS returns a fileSystem over the real filesystem rooted at root.
func newDirFS(root string) fileSystem { return dirFS{root: root} }

func (d dirFS) path(name string) (string, error) {
	// Cleaning below a leading slash can never climb above it, so no name
	// (a topic name included) reaches outside the root.
	clean := path.Clean("/" + name)
	return filepath.Join(d.root, filepath.FromSlash(clean)), nil
}

func (d dirFS) OpenFile(name string, flag int, perm os.FileMode) (metaFile, error) {
	p, err := d.path(name)
	if err != nil {
		return nil, err
	}
	f, err := os.OpenFile(p, flag, perm)
	if err != nil {
		return nil, err
	}
	return f, nil
}

func (d dirFS) Remove(name string) error {
	p, err := d.path(name)
	if err != nil {
		return err
	}
	return os.Remove(p)
}

func (d dirFS) Rename(oldname, newname string) error {
	o, err := d.path(oldname)
	if err != nil {
		return err
	}
	n, err := d.path(newname)
	if err != nil {
		return err
	}
	return os.Rename(o, n)
}

func (d dirFS) MkdirAll(dir string, perm os.FileMode) error {
	p, err := d.path(dir)
	if err != nil {
		return err
	}
	return os.MkdirAll(p, perm)
}

func (d dirFS) ReadDir(dir string) ([]string, error) {
	p, err := d.path(dir)
	if err != nil {
		return nil, err
	}
	ents, err := os.ReadDir(p)
	if err != nil {
		return nil, err
	}
	names := make([]string, len(ents))
	for i, e := range ents {
		names[i] = e.Name()
	}
	sort.Strings(names)
	return names, nil
}

func (d dirFS) Stat(name string) (os.FileInfo, error) {
	p, err := d.path(name)
	if err != nil {
		return nil, err
	}
	return os.Stat(p)
}

func (d dirFS) SyncDir(dir string) error {
	p, err := d.path(dir)
	if err != nil {
		return err
	}
	f, err := os.Open(p)
	if err != nil {
		return err
	}
	defer f.Close()
	return f.Sync()
}

// readFile reads a whole file through fsys.
func readFile(fsys fileSystem, name string) ([]byte, error) {
	f, err := fsys.OpenFile(name, os.O_RDONLY, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(f)
}

// writeFileAtomic replaces dir/name with data so that after a crash either
// the old or the new content is there, never a mix: write a temporary file,
// fsync it, rename it over the target, fsync the directory.
func writeFileAtomic(fsys fileSystem, dir, name string, data []byte) error {
	target := path.Join(dir, name)
	tmp := target + ".tmp"
	f, err := fsys.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return fmt.Errorf("writing %s: %w", target, err)
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return fmt.Errorf("writing %s: %w", target, err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return fmt.Errorf("syncing %s: %w", target, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("closing %s: %w", target, err)
	}
	if err := fsys.Rename(tmp, target); err != nil {
		return fmt.Errorf("renaming %s: %w", target, err)
	}
	if err := fsys.SyncDir(dir); err != nil {
		return fmt.Errorf("syncing dir of %s: %w", target, err)
	}
	return nil
}

// removeAll removes name and, if it is a directory, everything below it.
// A missing name is not an error.
func removeAll(fsys fileSystem, name string) error {
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

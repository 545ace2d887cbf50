package storage

import (
	"os"
	"path"
)

// Sub returns an FS whose names are relative to root inside fsys: every
// name is cleaned below a leading slash (so "..", a topic name included,
// can never climb above root) and joined to root. The broker keeps its
// metadata files under the data dir through it.
func Sub(fsys FS, root string) FS { return subFS{fsys: fsys, root: root} }

type subFS struct {
	fsys FS
	root string
}

func (s subFS) name(n string) string { return path.Join(s.root, path.Clean("/"+n)) }

func (s subFS) OpenFile(name string, flag int, perm os.FileMode) (File, error) {
	return s.fsys.OpenFile(s.name(name), flag, perm)
}

func (s subFS) Remove(name string) error { return s.fsys.Remove(s.name(name)) }

func (s subFS) Rename(oldname, newname string) error {
	return s.fsys.Rename(s.name(oldname), s.name(newname))
}

func (s subFS) MkdirAll(dir string, perm os.FileMode) error {
	return s.fsys.MkdirAll(s.name(dir), perm)
}

func (s subFS) ReadDir(dir string) ([]string, error) { return s.fsys.ReadDir(s.name(dir)) }

func (s subFS) Stat(name string) (os.FileInfo, error) { return s.fsys.Stat(s.name(name)) }

func (s subFS) SyncDir(dir string) error { return s.fsys.SyncDir(s.name(dir)) }

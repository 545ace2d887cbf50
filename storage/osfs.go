package storage

import (
	"os"
	"path/filepath"
	"sort"
)

// OSFS is the real filesystem. Names are used as given (relative names are
// relative to the process's working directory).
type OSFS struct{}

var _ FS = OSFS{}

// OpenFile opens name with os.OpenFile. The returned File implements FDFile.
func (OSFS) OpenFile(name string, flag int, perm os.FileMode) (File, error) {
	f, err := os.OpenFile(filepath.FromSlash(name), flag, perm)
	if err != nil {
		return nil, err
	}
	return &osFile{File: f}, nil
}

func (OSFS) Remove(name string) error { return os.Remove(filepath.FromSlash(name)) }

func (OSFS) Rename(oldname, newname string) error {
	return os.Rename(filepath.FromSlash(oldname), filepath.FromSlash(newname))
}

func (OSFS) MkdirAll(dir string, perm os.FileMode) error {
	return os.MkdirAll(filepath.FromSlash(dir), perm)
}

func (OSFS) ReadDir(dir string) ([]string, error) {
	ents, err := os.ReadDir(filepath.FromSlash(dir))
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

func (OSFS) Stat(name string) (os.FileInfo, error) { return os.Stat(filepath.FromSlash(name)) }

// SyncDir fsyncs the directory so that creates, renames and removes in it
// survive a crash.
func (OSFS) SyncDir(dir string) error {
	d, err := os.Open(filepath.FromSlash(dir))
	if err != nil {
		return err
	}
	serr := d.Sync()
	cerr := d.Close()
	if serr != nil {
		return serr
	}
	return cerr
}

// osFile is an *os.File whose Sync is fdatasync where the platform has it
// (file metadata other than the size is not needed for recovery).
type osFile struct {
	*os.File
}

var _ FDFile = (*osFile)(nil)

func (f *osFile) Sync() error { return datasync(f.File) }

package storage

import (
	"io"
	"os"
)

// FS is the only way storage touches the disk. OSFS is the real one; MemFS
// (memfs.go) simulates crashes and injects I/O errors in tests.
//
// Names are slash-separated paths as given by the caller (storage never
// builds absolute paths itself; the data dir is the root the broker passes).
type FS interface {
	// OpenFile opens or creates a file, with os.O_* flags.
	OpenFile(name string, flag int, perm os.FileMode) (File, error)
	Remove(name string) error
	// Rename atomically replaces newname. The rename is durable only after
	// SyncDir of the parent directory.
	Rename(oldname, newname string) error
	MkdirAll(dir string, perm os.FileMode) error
	// ReadDir lists the names in dir, sorted.
	ReadDir(dir string) ([]string, error)
	Stat(name string) (os.FileInfo, error)
	// SyncDir makes directory entries (creates, renames, removes) in dir
	// durable.
	SyncDir(dir string) error
}

// File is an open file. Writes through Write append at the current position;
// WriteAt and ReadAt are positional.
type File interface {
	io.Reader
	io.ReaderAt
	io.Writer
	io.WriterAt
	io.Seeker
	io.Closer
	// Sync makes written data durable (fdatasync on the real filesystem).
	Sync() error
	Truncate(size int64) error
	Stat() (os.FileInfo, error)
	Name() string
}

// FDFile is an optional capability of a File backed by an OS descriptor,
// for fast paths (sendfile, vectored writes). Generic code must not need it.
type FDFile interface {
	File
	Fd() uintptr
}

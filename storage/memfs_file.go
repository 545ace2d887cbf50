package storage

// The files of a MemFS: reads and writes against the current bytes, Sync
// making them the bytes a crash keeps, and their FileInfo.

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"syscall"
	"time"
)

type memInfo struct {
	name string
	size int64
	mod  time.Time
	dir  bool
}

func (i memInfo) Name() string { return i.name }
func (i memInfo) Size() int64  { return i.size }
func (i memInfo) Mode() os.FileMode {
	if i.dir {
		return os.ModeDir | 0o755
	}
	return 0o644
}
func (i memInfo) ModTime() time.Time { return i.mod }
func (i memInfo) IsDir() bool        { return i.dir }
func (i memInfo) Sys() any           { return nil }

type memFile struct {
	fs     *MemFS
	in     *memInode
	name   string
	flag   int
	pos    int64
	closed bool
}

var errClosedFile = errors.New("memfs: file already closed")

func (f *memFile) Name() string { return f.name }

func (f *memFile) Read(p []byte) (int, error) {
	n, err := f.ReadAt(p, f.pos)
	f.pos += int64(n)
	return n, err
}

func (f *memFile) ReadAt(p []byte, off int64) (int, error) {
	fs := f.fs
	fs.mu.Lock()
	defer fs.mu.Unlock()
	if f.closed {
		return 0, errClosedFile
	}
	if _, err := fs.check(OpRead, f.name, false); err != nil {
		return 0, err
	}
	if off < 0 {
		return 0, fmt.Errorf("memfs: negative offset %d", off)
	}
	if off >= int64(len(f.in.data)) {
		return 0, io.EOF
	}
	n := copy(p, f.in.data[off:])
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

func (f *memFile) Write(p []byte) (int, error) {
	if f.flag&os.O_APPEND != 0 {
		f.fs.mu.Lock()
		f.pos = int64(len(f.in.data))
		f.fs.mu.Unlock()
	}
	n, err := f.WriteAt(p, f.pos)
	f.pos += int64(n)
	return n, err
}

func (f *memFile) WriteAt(p []byte, off int64) (int, error) {
	fs := f.fs
	fs.mu.Lock()
	defer fs.mu.Unlock()
	if f.closed {
		return 0, errClosedFile
	}
	if f.flag&(os.O_WRONLY|os.O_RDWR) == 0 {
		return 0, &os.PathError{Op: "write", Path: f.name, Err: syscall.EBADF}
	}
	fault, err := fs.check(OpWrite, f.name, true)
	if err != nil {
		return 0, err
	}
	if off < 0 {
		return 0, fmt.Errorf("memfs: negative offset %d", off)
	}
	q := p
	if fault.Short {
		q = p[:len(p)/2]
	}
	in := f.in
	end := off + int64(len(q))
	if end > int64(len(in.data)) {
		if end > int64(cap(in.data)) {
			grown := make([]byte, len(in.data), end+end/2+64)
			copy(grown, in.data)
			in.data = grown
		}
		old := len(in.data)
		in.data = in.data[:end]
		// A write past the end leaves a hole that reads as zeros.
		for i := old; int64(i) < off; i++ {
			in.data[i] = 0
		}
	}
	copy(in.data[off:], q)
	if int(off) < in.dirtyFrom {
		in.dirtyFrom = int(off)
	}
	in.modTime = time.Now()
	if fault.Short {
		e := fault.Err
		if e == nil {
			e = io.ErrShortWrite
		}
		return len(q), &os.PathError{Op: "write", Path: f.name, Err: e}
	}
	return len(q), nil
}

func (f *memFile) Seek(offset int64, whence int) (int64, error) {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	switch whence {
	case io.SeekStart:
	case io.SeekCurrent:
		offset += f.pos
	case io.SeekEnd:
		offset += int64(len(f.in.data))
	}
	if offset < 0 {
		return 0, fmt.Errorf("memfs: negative seek %d", offset)
	}
	f.pos = offset
	return offset, nil
}

func (f *memFile) Close() error {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if f.closed {
		return errClosedFile
	}
	f.closed = true
	return nil
}

func (f *memFile) Sync() error {
	fs := f.fs
	fs.mu.Lock()
	defer fs.mu.Unlock()
	if f.closed {
		return errClosedFile
	}
	if _, err := fs.check(OpSync, f.name, true); err != nil {
		return err
	}
	in := f.in
	in.synced = append(in.synced[:0], in.data...)
	in.dirtyFrom = len(in.data)
	return nil
}

func (f *memFile) Truncate(size int64) error {
	fs := f.fs
	fs.mu.Lock()
	defer fs.mu.Unlock()
	if f.closed {
		return errClosedFile
	}
	if _, err := fs.check(OpTruncate, f.name, true); err != nil {
		return err
	}
	if size < 0 {
		return fmt.Errorf("memfs: negative size %d", size)
	}
	in := f.in
	if size <= int64(len(in.data)) {
		in.data = in.data[:size]
	} else {
		old := len(in.data)
		in.data = append(in.data, make([]byte, size-int64(old))...)
	}
	if int(size) < in.dirtyFrom {
		in.dirtyFrom = int(size)
	}
	return nil
}

func (f *memFile) Stat() (os.FileInfo, error) {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if f.closed {
		return nil, errClosedFile
	}
	return memInfo{name: path.Base(f.name), size: int64(len(f.in.data)), mod: f.in.modTime}, nil
}

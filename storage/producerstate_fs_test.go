package storage

import (
	"errors"
	"io"
	"io/fs"
	"os"
	"path"
	"sort"
	"strings"
	"sync"
	"time"
)

// stateTestFS is a minimal in-memory FS for the producer-state, epoch-cache
// and transaction-index tests. It has no crash model; it can fail the next
// operation of a kind (failOp) to test error paths.
type stateTestFS struct {
	mu     sync.Mutex
	files  map[string]*stateTestData
	failOp map[string]error // "open", "write", "sync", "rename", "syncdir", "remove", "truncate"
	ops    []string         // log of mutating operations, for ordering checks
}

type stateTestData struct{ b []byte }

func newStateTestFS() *stateTestFS {
	return &stateTestFS{files: map[string]*stateTestData{}, failOp: map[string]error{}}
}

func (m *stateTestFS) fail(op string) error {
	if err, ok := m.failOp[op]; ok {
		delete(m.failOp, op)
		return err
	}
	return nil
}

func (m *stateTestFS) OpenFile(name string, flag int, perm os.FileMode) (File, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.fail("open"); err != nil {
		return nil, err
	}
	name = path.Clean(name)
	d, ok := m.files[name]
	if !ok {
		if flag&os.O_CREATE == 0 {
			return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrNotExist}
		}
		d = &stateTestData{}
		m.files[name] = d
		m.ops = append(m.ops, "create "+name)
	}
	if flag&os.O_TRUNC != 0 {
		d.b = d.b[:0]
	}
	return &stateTestFile{fs: m, name: name, d: d}, nil
}

func (m *stateTestFS) Remove(name string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.fail("remove"); err != nil {
		return err
	}
	name = path.Clean(name)
	if _, ok := m.files[name]; !ok {
		return &fs.PathError{Op: "remove", Path: name, Err: fs.ErrNotExist}
	}
	delete(m.files, name)
	m.ops = append(m.ops, "remove "+name)
	return nil
}

func (m *stateTestFS) Rename(oldname, newname string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.fail("rename"); err != nil {
		return err
	}
	oldname, newname = path.Clean(oldname), path.Clean(newname)
	d, ok := m.files[oldname]
	if !ok {
		return &fs.PathError{Op: "rename", Path: oldname, Err: fs.ErrNotExist}
	}
	delete(m.files, oldname)
	m.files[newname] = d
	m.ops = append(m.ops, "rename "+oldname+" "+newname)
	return nil
}

func (m *stateTestFS) MkdirAll(dir string, perm os.FileMode) error { return nil }

func (m *stateTestFS) ReadDir(dir string) ([]string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	dir = path.Clean(dir)
	var out []string
	for name := range m.files {
		if path.Dir(name) == dir {
			out = append(out, path.Base(name))
		}
	}
	sort.Strings(out)
	return out, nil
}

func (m *stateTestFS) Stat(name string) (os.FileInfo, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	d, ok := m.files[path.Clean(name)]
	if !ok {
		return nil, &fs.PathError{Op: "stat", Path: name, Err: fs.ErrNotExist}
	}
	return stateTestInfo{name: path.Base(name), size: int64(len(d.b))}, nil
}

func (m *stateTestFS) SyncDir(dir string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.fail("syncdir"); err != nil {
		return err
	}
	m.ops = append(m.ops, "syncdir "+path.Clean(dir))
	return nil
}

// read returns a copy of a file's bytes; ok false when absent.
func (m *stateTestFS) read(name string) ([]byte, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	d, ok := m.files[path.Clean(name)]
	if !ok {
		return nil, false
	}
	return append([]byte(nil), d.b...), true
}

func (m *stateTestFS) write(name string, b []byte) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.files[path.Clean(name)] = &stateTestData{b: append([]byte(nil), b...)}
}

func (m *stateTestFS) names() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []string
	for n := range m.files {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

func (m *stateTestFS) opsMatching(prefix string) []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []string
	for _, o := range m.ops {
		if strings.HasPrefix(o, prefix) {
			out = append(out, o)
		}
	}
	return out
}

type stateTestFile struct {
	fs     *stateTestFS
	name   string
	d      *stateTestData
	pos    int64
	closed bool
}

var errStateTestClosed = errors.New("stateTestFS: file closed")

func (f *stateTestFile) Read(p []byte) (int, error) {
	n, err := f.ReadAt(p, f.pos)
	f.pos += int64(n)
	return n, err
}

func (f *stateTestFile) ReadAt(p []byte, off int64) (int, error) {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if f.closed {
		return 0, errStateTestClosed
	}
	if off >= int64(len(f.d.b)) {
		return 0, io.EOF
	}
	n := copy(p, f.d.b[off:])
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

func (f *stateTestFile) Write(p []byte) (int, error) {
	n, err := f.WriteAt(p, f.pos)
	f.pos += int64(n)
	return n, err
}

func (f *stateTestFile) WriteAt(p []byte, off int64) (int, error) {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if f.closed {
		return 0, errStateTestClosed
	}
	if err := f.fs.fail("write"); err != nil {
		// A short write: half the bytes land.
		half := p[:len(p)/2]
		f.writeLocked(half, off)
		return len(half), err
	}
	f.writeLocked(p, off)
	return len(p), nil
}

func (f *stateTestFile) writeLocked(p []byte, off int64) {
	if end := off + int64(len(p)); end > int64(len(f.d.b)) {
		f.d.b = append(f.d.b, make([]byte, end-int64(len(f.d.b)))...)
	}
	copy(f.d.b[off:], p)
}

func (f *stateTestFile) Seek(offset int64, whence int) (int64, error) {
	switch whence {
	case io.SeekStart:
		f.pos = offset
	case io.SeekCurrent:
		f.pos += offset
	case io.SeekEnd:
		f.pos = int64(len(f.d.b)) + offset
	}
	return f.pos, nil
}

func (f *stateTestFile) Close() error {
	f.closed = true
	return nil
}

func (f *stateTestFile) Sync() error {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if err := f.fs.fail("sync"); err != nil {
		return err
	}
	f.fs.ops = append(f.fs.ops, "sync "+f.name)
	return nil
}

func (f *stateTestFile) Truncate(size int64) error {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if err := f.fs.fail("truncate"); err != nil {
		return err
	}
	if size < int64(len(f.d.b)) {
		f.d.b = f.d.b[:size]
	} else {
		f.d.b = append(f.d.b, make([]byte, size-int64(len(f.d.b)))...)
	}
	return nil
}

func (f *stateTestFile) Stat() (os.FileInfo, error) {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	return stateTestInfo{name: path.Base(f.name), size: int64(len(f.d.b))}, nil
}

func (f *stateTestFile) Name() string { return f.name }

type stateTestInfo struct {
	name string
	size int64
}

func (i stateTestInfo) Name() string       { return i.name }
func (i stateTestInfo) Size() int64        { return i.size }
func (i stateTestInfo) Mode() os.FileMode  { return 0o644 }
func (i stateTestInfo) ModTime() time.Time { return time.Time{} }
func (i stateTestInfo) IsDir() bool        { return false }
func (i stateTestInfo) Sys() any           { return nil }

package storage

import (
	"errors"
	"math/rand"
	"os"
	"path"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"
)

// MemFS is an in-memory FS that models what a crash can do to a real
// filesystem, for crash and fault-injection tests.
//
// Every file keeps its current bytes and the bytes it had at its last Sync;
// every directory keeps its current entries and the entries it had at its
// last SyncDir. Crash returns the state a machine could find after a power
// cut, according to a CrashMode. Faults (EIO, ENOSPC, short writes) are
// injected through SetFault, and CutAfter makes the "machine" die after a
// number of mutating operations so that tests can crash at arbitrary points.
type MemFS struct {
	mu      sync.Mutex
	dirs    map[string]*memDir
	fault   func(op Op, name string) Fault
	ops     int // mutating operations so far
	cutAt   int // when > 0, the operation with this number and later ones fail
	crashed bool
}

// Op names a filesystem operation for fault injection.
type Op int

const (
	OpOpen Op = iota // OpenFile (creating or not)
	OpWrite
	OpSync
	OpTruncate
	OpRemove
	OpRename
	OpSyncDir
	OpRead
)

func (o Op) String() string {
	switch o {
	case OpOpen:
		return "open"
	case OpWrite:
		return "write"
	case OpSync:
		return "sync"
	case OpTruncate:
		return "truncate"
	case OpRemove:
		return "remove"
	case OpRename:
		return "rename"
	case OpSyncDir:
		return "syncdir"
	case OpRead:
		return "read"
	}
	return "op?"
}

// Fault is what an injected fault does to one operation. A zero Fault does
// nothing.
type Fault struct {
	// Err is returned by the operation (e.g. syscall.EIO, syscall.ENOSPC).
	Err error
	// Short makes a write store only the first half of its bytes before
	// returning Err (io.ErrShortWrite when Err is nil).
	Short bool
}

// ErrMachineDown is returned by every operation after the cut point set by
// CutAfter: the simulated machine has lost power.
var ErrMachineDown = errors.New("memfs: machine is down (simulated crash)")

// CrashMode selects what a crash does to data and directory entries that
// were not made durable.
type CrashMode int

const (
	// CrashDropUnsynced: every file reverts to its content at its last
	// Sync; directory entries are kept as they are.
	CrashDropUnsynced CrashMode = iota
	// CrashTornWrite: every file keeps its synced content plus a random
	// prefix of what was written since (a torn last write).
	CrashTornWrite
	// CrashZeroTail: like CrashTornWrite, but part of the kept unsynced
	// region reads back as zeros (the size reached disk, the data did not).
	CrashZeroTail
	// CrashLoseDirEntries: directory entries revert to the last SyncDir of
	// their directory (new files vanish, removed files come back), and
	// files keep a random prefix of unsynced data as in CrashTornWrite.
	CrashLoseDirEntries
	// CrashProcess: only the process dies (kill -9); the page cache
	// survives, so everything written is kept, synced or not. Tests damage
	// the result by hand to model what a power cut would have torn. Not in
	// CrashModes.
	CrashProcess
)

// CrashModes lists every mode, for tests that iterate over them.
var CrashModes = []CrashMode{CrashDropUnsynced, CrashTornWrite, CrashZeroTail, CrashLoseDirEntries}

func (m CrashMode) String() string {
	switch m {
	case CrashDropUnsynced:
		return "drop-unsynced"
	case CrashTornWrite:
		return "torn-write"
	case CrashZeroTail:
		return "zero-tail"
	case CrashLoseDirEntries:
		return "lose-dir-entries"
	case CrashProcess:
		return "process"
	}
	return "crash?"
}

type memDir struct {
	entries map[string]*memInode // current
	durable map[string]*memInode // as of the last SyncDir
}

type memInode struct {
	data      []byte
	synced    []byte // content at the last Sync
	dirtyFrom int    // data[:dirtyFrom] == synced[:dirtyFrom]
	modTime   time.Time
}

// NewMemFS returns an empty MemFS whose root directory "." and "/" exist.
func NewMemFS() *MemFS {
	fs := &MemFS{dirs: map[string]*memDir{}}
	fs.dirs["."] = newMemDir()
	fs.dirs["/"] = newMemDir()
	return fs
}

func newMemDir() *memDir {
	return &memDir{entries: map[string]*memInode{}, durable: map[string]*memInode{}}
}

// SetFault installs a hook consulted before every operation; nil removes it.
func (fs *MemFS) SetFault(f func(op Op, name string) Fault) {
	fs.mu.Lock()
	fs.fault = f
	fs.mu.Unlock()
}

// CutAfter makes the machine die after n more mutating operations
// (writes, syncs, truncates, creates, removes, renames, directory syncs):
// from then on every operation returns ErrMachineDown. n <= 0 disables it.
func (fs *MemFS) CutAfter(n int) {
	fs.mu.Lock()
	if n <= 0 {
		fs.cutAt = 0
	} else {
		fs.cutAt = fs.ops + n + 1
	}
	fs.mu.Unlock()
}

// Ops returns the number of mutating operations performed so far.
func (fs *MemFS) Ops() int {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	return fs.ops
}

// check runs under fs.mu before an operation.
func (fs *MemFS) check(op Op, name string, mutating bool) (Fault, error) {
	if fs.crashed {
		return Fault{}, ErrMachineDown
	}
	if mutating {
		fs.ops++
		if fs.cutAt > 0 && fs.ops >= fs.cutAt {
			fs.crashed = true
			return Fault{}, ErrMachineDown
		}
	}
	if fs.fault != nil {
		f := fs.fault(op, name)
		if f.Err != nil && !f.Short {
			return f, &os.PathError{Op: op.String(), Path: name, Err: f.Err}
		}
		return f, nil
	}
	return Fault{}, nil
}

func cleanName(name string) (dir, base string) {
	name = path.Clean(name)
	dir, base = path.Split(name)
	dir = path.Clean(dir)
	if dir == "" {
		dir = "."
	}
	return dir, base
}

// Crash returns a new MemFS holding what survives a power cut in mode m,
// choosing torn lengths with rng. The receiver stops working (every later
// operation returns ErrMachineDown), so files opened on it are dead too.
func (fs *MemFS) Crash(m CrashMode, rng *rand.Rand) *MemFS {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	fs.crashed = true
	out := NewMemFS()
	// Inodes can be linked from several names (current and durable maps);
	// decide each inode's surviving content once.
	survived := map[*memInode]*memInode{}
	surv := func(in *memInode) *memInode {
		if s, ok := survived[in]; ok {
			return s
		}
		s := &memInode{modTime: in.modTime, data: crashContent(in, m, rng)}
		s.synced = append([]byte(nil), s.data...)
		s.dirtyFrom = len(s.data)
		survived[in] = s
		return s
	}
	names := make([]string, 0, len(fs.dirs))
	for name := range fs.dirs {
		names = append(names, name)
	}
	sort.Strings(names) // deterministic rng use
	for _, name := range names {
		d := fs.dirs[name]
		nd := newMemDir()
		src := d.entries
		if m == CrashLoseDirEntries {
			src = d.durable
		}
		keys := make([]string, 0, len(src))
		for k := range src {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			s := surv(src[k])
			nd.entries[k] = s
			nd.durable[k] = s
		}
		out.dirs[name] = nd
	}
	return out
}

func crashContent(in *memInode, m CrashMode, rng *rand.Rand) []byte {
	if m == CrashProcess {
		return append([]byte(nil), in.data...)
	}
	base := in.dirtyFrom
	if base > len(in.data) {
		base = len(in.data)
	}
	if m == CrashDropUnsynced {
		out := append([]byte(nil), in.data[:base]...)
		if base < len(in.synced) {
			out = append(out, in.synced[base:]...)
		}
		return out
	}
	// Torn: keep a random prefix of the unsynced region.
	k := base
	if n := len(in.data) - base; n > 0 {
		k = base + rng.Intn(n+1)
	}
	out := append([]byte(nil), in.data[:k]...)
	if m == CrashZeroTail && k > base {
		z := base + rng.Intn(k-base+1)
		for i := z; i < k; i++ {
			out[i] = 0
		}
	}
	return out
}

// OpenFile opens or creates name. Supported flags: O_RDONLY, O_WRONLY,
// O_RDWR, O_CREATE, O_EXCL, O_TRUNC, O_APPEND.
func (fs *MemFS) OpenFile(name string, flag int, perm os.FileMode) (File, error) {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	creating := flag&os.O_CREATE != 0
	fault, err := fs.check(OpOpen, name, creating || flag&os.O_TRUNC != 0)
	if err != nil {
		return nil, err
	}
	_ = fault
	dir, base := cleanName(name)
	d, ok := fs.dirs[dir]
	if !ok {
		return nil, &os.PathError{Op: "open", Path: name, Err: os.ErrNotExist}
	}
	in, exists := d.entries[base]
	if exists && creating && flag&os.O_EXCL != 0 {
		return nil, &os.PathError{Op: "open", Path: name, Err: os.ErrExist}
	}
	if !exists {
		if !creating {
			return nil, &os.PathError{Op: "open", Path: name, Err: os.ErrNotExist}
		}
		in = &memInode{modTime: time.Now()}
		d.entries[base] = in
	}
	if flag&os.O_TRUNC != 0 && flag&(os.O_WRONLY|os.O_RDWR) != 0 {
		in.data = in.data[:0]
		if in.dirtyFrom > 0 {
			in.dirtyFrom = 0
		}
	}
	return &memFile{fs: fs, in: in, name: path.Clean(name), flag: flag}, nil
}

func (fs *MemFS) Remove(name string) error {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	if _, err := fs.check(OpRemove, name, true); err != nil {
		return err
	}
	dir, base := cleanName(name)
	d, ok := fs.dirs[dir]
	if ok {
		if _, ok := d.entries[base]; ok {
			delete(d.entries, base)
			return nil
		}
	}
	if _, ok := fs.dirs[path.Clean(name)]; ok {
		for _, sub := range fs.listLocked(path.Clean(name)) {
			_ = sub
			return &os.PathError{Op: "remove", Path: name, Err: syscall.ENOTEMPTY}
		}
		delete(fs.dirs, path.Clean(name))
		return nil
	}
	return &os.PathError{Op: "remove", Path: name, Err: os.ErrNotExist}
}

func (fs *MemFS) Rename(oldname, newname string) error {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	if _, err := fs.check(OpRename, oldname, true); err != nil {
		return err
	}
	od, ob := cleanName(oldname)
	nd, nb := cleanName(newname)
	d1, ok1 := fs.dirs[od]
	d2, ok2 := fs.dirs[nd]
	if !ok1 || !ok2 {
		return &os.PathError{Op: "rename", Path: oldname, Err: os.ErrNotExist}
	}
	in, ok := d1.entries[ob]
	if !ok {
		return &os.PathError{Op: "rename", Path: oldname, Err: os.ErrNotExist}
	}
	delete(d1.entries, ob)
	d2.entries[nb] = in
	return nil
}

// MkdirAll creates dir and its parents. Directories themselves are always
// durable in this model (storage creates them once, before any data).
func (fs *MemFS) MkdirAll(dir string, perm os.FileMode) error {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	if fs.crashed {
		return ErrMachineDown
	}
	dir = path.Clean(dir)
	for {
		if _, ok := fs.dirs[dir]; !ok {
			fs.dirs[dir] = newMemDir()
		}
		parent := path.Dir(dir)
		if parent == dir {
			return nil
		}
		dir = parent
	}
}

func (fs *MemFS) listLocked(dir string) []string {
	var names []string
	if d, ok := fs.dirs[dir]; ok {
		for k := range d.entries {
			names = append(names, k)
		}
	}
	prefix := dir + "/"
	if dir == "/" {
		prefix = "/"
	}
	for k := range fs.dirs {
		if k != dir && strings.HasPrefix(k, prefix) && !strings.Contains(k[len(prefix):], "/") {
			names = append(names, k[len(prefix):])
		} else if dir == "." && k != "." && k != "/" && !strings.Contains(k, "/") {
			names = append(names, k)
		}
	}
	sort.Strings(names)
	return names
}

func (fs *MemFS) ReadDir(dir string) ([]string, error) {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	if fs.crashed {
		return nil, ErrMachineDown
	}
	dir = path.Clean(dir)
	if _, ok := fs.dirs[dir]; !ok {
		return nil, &os.PathError{Op: "readdir", Path: dir, Err: os.ErrNotExist}
	}
	return fs.listLocked(dir), nil
}

func (fs *MemFS) Stat(name string) (os.FileInfo, error) {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	if fs.crashed {
		return nil, ErrMachineDown
	}
	clean := path.Clean(name)
	if _, ok := fs.dirs[clean]; ok {
		return memInfo{name: path.Base(clean), dir: true}, nil
	}
	dir, base := cleanName(name)
	if d, ok := fs.dirs[dir]; ok {
		if in, ok := d.entries[base]; ok {
			return memInfo{name: base, size: int64(len(in.data)), mod: in.modTime}, nil
		}
	}
	return nil, &os.PathError{Op: "stat", Path: name, Err: os.ErrNotExist}
}

func (fs *MemFS) SyncDir(dir string) error {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	if _, err := fs.check(OpSyncDir, dir, true); err != nil {
		return err
	}
	d, ok := fs.dirs[path.Clean(dir)]
	if !ok {
		return &os.PathError{Op: "syncdir", Path: dir, Err: os.ErrNotExist}
	}
	d.durable = make(map[string]*memInode, len(d.entries))
	for k, v := range d.entries {
		d.durable[k] = v
	}
	return nil
}

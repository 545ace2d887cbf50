package storage

import (
	"bytes"
	"errors"
	"io"
	"math/rand"
	"os"
	"syscall"
	"testing"
)

func writeFile(t *testing.T, fs FS, name string, data []byte, sync bool) File {
	t.Helper()
	f, err := fs.OpenFile(name, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write(data); err != nil {
		t.Fatal(err)
	}
	if sync {
		if err := f.Sync(); err != nil {
			t.Fatal(err)
		}
	}
	return f
}

func fileContent(t *testing.T, fs FS, name string) ([]byte, bool) {
	t.Helper()
	b, err := readAll(fs, name)
	if errors.Is(err, os.ErrNotExist) {
		return nil, false
	}
	if err != nil {
		t.Fatal(err)
	}
	return b, true
}

func TestMemFSCrashModes(t *testing.T) {
	synced := bytes.Repeat([]byte("s"), 100)
	unsynced := bytes.Repeat([]byte("u"), 100)
	for seed := int64(0); seed < 50; seed++ {
		for _, mode := range CrashModes {
			fs := NewMemFS()
			fs.MkdirAll("d", 0o755)
			f := writeFile(t, fs, "d/a", synced, true)
			if err := fs.SyncDir("d"); err != nil {
				t.Fatal(err)
			}
			f.Write(unsynced)
			writeFile(t, fs, "d/new", []byte("n"), true) // entry never synced
			c := fs.Crash(mode, rand.New(rand.NewSource(seed)))
			got, ok := fileContent(t, c, "d/a")
			if !ok {
				t.Fatalf("%v: synced file lost", mode)
			}
			if len(got) < 100 || !bytes.Equal(got[:100], synced) {
				t.Fatalf("%v: synced bytes lost", mode)
			}
			tail := got[100:]
			switch mode {
			case CrashDropUnsynced:
				if len(tail) != 0 {
					t.Fatalf("%v: kept %d unsynced bytes", mode, len(tail))
				}
			case CrashTornWrite, CrashLoseDirEntries:
				if !bytes.Equal(tail, unsynced[:len(tail)]) {
					t.Fatalf("%v: tail is not a prefix of the write", mode)
				}
			case CrashZeroTail:
				z := bytes.IndexByte(tail, 0)
				if z < 0 {
					z = len(tail)
				}
				if !bytes.Equal(tail[:z], unsynced[:z]) || len(bytes.Trim(tail[z:], "\x00")) != 0 {
					t.Fatalf("%v: tail is not data then zeros: %q", mode, tail)
				}
			}
			_, newOK := fileContent(t, c, "d/new")
			if mode == CrashLoseDirEntries && newOK {
				t.Fatalf("%v: unsynced directory entry survived", mode)
			}
			if mode != CrashLoseDirEntries && !newOK {
				t.Fatalf("%v: file lost", mode)
			}
			// The old FS is dead.
			if _, err := f.Write([]byte("x")); !errors.Is(err, ErrMachineDown) {
				t.Fatalf("write after crash: %v", err)
			}
		}
	}
}

func TestMemFSRemovedFileComesBackWithoutSyncDir(t *testing.T) {
	fs := NewMemFS()
	fs.MkdirAll("d", 0o755)
	writeFile(t, fs, "d/a", []byte("abc"), true)
	fs.SyncDir("d")
	if err := fs.Remove("d/a"); err != nil {
		t.Fatal(err)
	}
	c := fs.Crash(CrashLoseDirEntries, rand.New(rand.NewSource(1)))
	if got, ok := fileContent(t, c, "d/a"); !ok || string(got) != "abc" {
		t.Fatalf("removed file without SyncDir: %q %v", got, ok)
	}
}

func TestMemFSCutAfterAndFaults(t *testing.T) {
	fs := NewMemFS()
	fs.MkdirAll("d", 0o755)
	f := writeFile(t, fs, "d/a", []byte("abc"), false)
	fs.CutAfter(2)
	if _, err := f.Write([]byte("1")); err != nil {
		t.Fatal(err)
	}
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write([]byte("2")); !errors.Is(err, ErrMachineDown) {
		t.Fatalf("third op: %v", err)
	}
	if _, err := fs.Stat("d/a"); !errors.Is(err, ErrMachineDown) {
		t.Fatalf("stat after cut: %v", err)
	}
	c := fs.Crash(CrashDropUnsynced, nil)
	if got, _ := fileContent(t, c, "d/a"); string(got) != "abc1" {
		t.Fatalf("after cut: %q", got)
	}

	fs = NewMemFS()
	fs.MkdirAll("d", 0o755)
	f = writeFile(t, fs, "d/a", nil, false)
	fs.SetFault(func(op Op, name string) Fault {
		if op == OpWrite {
			return Fault{Err: syscall.ENOSPC, Short: true}
		}
		return Fault{}
	})
	n, err := f.WriteAt([]byte("abcdef"), 0)
	if n != 3 || !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("short write: %d %v", n, err)
	}
	fs.SetFault(func(op Op, name string) Fault {
		if op == OpSync {
			return Fault{Err: syscall.EIO}
		}
		return Fault{}
	})
	if err := f.Sync(); !errors.Is(err, syscall.EIO) {
		t.Fatalf("sync fault: %v", err)
	}
	fs.SetFault(nil)
	buf := make([]byte, 10)
	n, err = f.ReadAt(buf, 0)
	if n != 3 || err != io.EOF || string(buf[:3]) != "abc" {
		t.Fatalf("read back %q %v", buf[:n], err)
	}
}

func TestOSFSRoundTrip(t *testing.T) {
	dir := t.TempDir()
	var fs OSFS
	if err := fs.MkdirAll(dir+"/p", 0o755); err != nil {
		t.Fatal(err)
	}
	f, err := fs.OpenFile(dir+"/p/a", os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := f.(FDFile); !ok {
		t.Fatal("OSFS file lacks FDFile")
	}
	if _, err := f.WriteAt([]byte("hello"), 0); err != nil {
		t.Fatal(err)
	}
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	f.Close()
	if err := fs.SyncDir(dir + "/p"); err != nil {
		t.Fatal(err)
	}
	names, err := fs.ReadDir(dir + "/p")
	if err != nil || len(names) != 1 || names[0] != "a" {
		t.Fatalf("%v %v", names, err)
	}
	// A Log on the real filesystem survives a reopen.
	l, err := Open(fs, dir+"/t-0", Config{Flush: FlushAlways})
	if err != nil {
		t.Fatal(err)
	}
	res, err := l.AppendLeader(testBatch(t, 0, 1, 1, 2, 10), 1, 1)
	if err != nil {
		t.Fatal(err)
	}
	if err := l.WaitDurable(res.LastOffset + 1); err != nil {
		t.Fatal(err)
	}
	sl, err := l.Read(0, 100)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := sl.File.(FDFile); !ok {
		t.Fatal("Read slice is not sendfile-capable on OSFS")
	}
	l.Close()
	l, err = Open(fs, dir+"/t-0", Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if l.LogEndOffset() != 2 {
		t.Fatalf("LEO %d", l.LogEndOffset())
	}
}

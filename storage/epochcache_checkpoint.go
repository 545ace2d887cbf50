package storage

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path"
	"strconv"
)

// ErrCorruptCheckpoint is wrapped by every error reporting a malformed
// checkpoint file (leader-epoch-checkpoint and other files in Kafka's text
// checkpoint format).
var ErrCorruptCheckpoint = errors.New("storage: corrupt checkpoint file")

// Kafka's text checkpoint format (CheckpointFile), used for the
// leader-epoch-checkpoint:
//
//	<version>\n
//	<entry count>\n
//	<field> <field>...\n   (one line per entry)
//
// Fields are separated by whitespace when read; Kafka writes one space and
// "\n" line ends. Nothing may follow the announced entries.

// checkpointMaxEntries bounds the entry count accepted when parsing, so a
// corrupt count cannot make the parser reserve absurd amounts of memory.
const checkpointMaxEntries = 1 << 20

// parseCheckpoint splits b into the entries of a checkpoint of the given
// version, each entry being exactly fields whitespace-separated tokens. The
// returned tokens alias b.
func parseCheckpoint(b []byte, version int, fields int) ([][][]byte, error) {
	lines := bytes.Split(b, []byte("\n"))
	// A final "\n" leaves one empty element; anything else after the entries is an error.
	if len(lines) > 0 && len(lines[len(lines)-1]) == 0 {
		lines = lines[:len(lines)-1]
	}
	if len(lines) < 2 {
		return nil, fmt.Errorf("%w: missing version or entry count line", ErrCorruptCheckpoint)
	}
	v, err := checkpointInt(lines[0], "version")
	if err != nil {
		return nil, err
	}
	if v != int64(version) {
		return nil, fmt.Errorf("%w: unrecognised version %d (expected %d)", ErrCorruptCheckpoint, v, version)
	}
	n, err := checkpointInt(lines[1], "entry count")
	if err != nil {
		return nil, err
	}
	if n < 0 || n > checkpointMaxEntries {
		return nil, fmt.Errorf("%w: invalid entry count %d", ErrCorruptCheckpoint, n)
	}
	body := lines[2:]
	if int64(len(body)) < n {
		return nil, fmt.Errorf("%w: expected %d entries but found only %d", ErrCorruptCheckpoint, n, len(body))
	}
	if int64(len(body)) > n {
		return nil, fmt.Errorf("%w: expected %d entries but found more", ErrCorruptCheckpoint, n)
	}
	out := make([][][]byte, 0, n)
	for i, line := range body {
		f := bytes.Fields(line)
		if len(f) != fields {
			return nil, fmt.Errorf("%w: entry %d: expected %d fields, got %q", ErrCorruptCheckpoint, i, fields, line)
		}
		out = append(out, f)
	}
	return out, nil
}

func checkpointInt(tok []byte, what string) (int64, error) {
	t := bytes.TrimSpace(tok)
	v, err := strconv.ParseInt(string(t), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%w: %s %q is not an integer", ErrCorruptCheckpoint, what, tok)
	}
	return v, nil
}

// AtomicWriteFile replaces name with data so that a crash leaves either the
// old or the new content: it writes name+".tmp", syncs it, renames it over
// name and syncs the parent directory. This is how Kafka writes its
// checkpoint files.
func AtomicWriteFile(fsys FS, name string, data []byte) error {
	tmp := name + ".tmp"
	f, err := fsys.OpenFile(tmp, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o644)
	if err != nil {
		return fmt.Errorf("storage: create %s: %w", tmp, err)
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return fmt.Errorf("storage: write %s: %w", tmp, err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return fmt.Errorf("storage: sync %s: %w", tmp, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("storage: close %s: %w", tmp, err)
	}
	if err := fsys.Rename(tmp, name); err != nil {
		return fmt.Errorf("storage: rename %s: %w", tmp, err)
	}
	if err := fsys.SyncDir(path.Dir(name)); err != nil {
		return fmt.Errorf("storage: sync dir of %s: %w", name, err)
	}
	return nil
}

// readWholeFile reads name; ok is false when it does not exist.
func readWholeFile(fsys FS, name string) (data []byte, ok bool, err error) {
	f, err := fsys.OpenFile(name, os.O_RDONLY, 0)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, false, nil
		}
		return nil, false, fmt.Errorf("storage: open %s: %w", name, err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, false, fmt.Errorf("storage: stat %s: %w", name, err)
	}
	size := fi.Size()
	if size < 0 || size > 1<<30 {
		return nil, false, fmt.Errorf("storage: %s has unreasonable size %d", name, size)
	}
	buf := make([]byte, size)
	n, err := f.ReadAt(buf, 0)
	if int64(n) != size {
		if err == nil {
			err = errors.New("short read")
		}
		return nil, false, fmt.Errorf("storage: read %s: %w", name, err)
	}
	return buf, true, nil
}

package storage

import (
	"errors"
	"fmt"
	"os"
	"strconv"
)

// truncationFile is Verbatim's own record of a truncation in progress,
// "0\n1\n<to>\n", written (atomically, directory synced) before Truncate
// removes anything and removed (directory synced) once the truncation is
// durable. A truncation deletes segment files from the end, cuts the
// active one and rewrites the checkpoints in several steps; a crash
// between them would leave a prefix longer than asked. Open finds the
// record and completes the truncation before the log is used, so a log
// is either the old one or the truncated one.
const truncationFile = "truncation-checkpoint"

func writeTruncationIntent(fs FS, dir string, to int64) error {
	b := []byte("0\n1\n")
	b = strconv.AppendInt(b, to, 10)
	return AtomicWriteFile(fs, dir+"/"+truncationFile, append(b, '\n'))
}

// readTruncationIntent returns the recorded target, -1 without a record.
func readTruncationIntent(fs FS, dir string) (int64, error) {
	b, ok, err := readWholeFile(fs, dir+"/"+truncationFile)
	if err != nil || !ok {
		return -1, err
	}
	entries, err := parseCheckpoint(b, 0, 1)
	if err != nil {
		return -1, err
	}
	if len(entries) != 1 {
		return -1, fmt.Errorf("%w: %d truncation entries, want 1", ErrCorruptCheckpoint, len(entries))
	}
	to, err := strconv.ParseInt(string(entries[0][0]), 10, 64)
	if err != nil || to < 0 {
		return -1, fmt.Errorf("%w: truncation entry %q is not an offset", ErrCorruptCheckpoint, entries[0][0])
	}
	return to, nil
}

// removeTruncationIntent deletes the record durably: a record coming back
// after later appends would cut them.
func removeTruncationIntent(fs FS, dir string) error {
	if err := fs.Remove(dir + "/" + truncationFile); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return fs.SyncDir(dir)
}

// completeTruncation finishes, in Open, a truncation a crash interrupted.
// A corrupt record cannot have been written (it is renamed into place
// whole): it is refused rather than guessed at.
func (l *Log) completeTruncation() error {
	to, err := readTruncationIntent(l.fs, l.dir)
	if err != nil || to < 0 {
		return err
	}
	if to >= l.LogEndOffset() {
		// Recovery already ended the log at or below the target.
		return removeTruncationIntent(l.fs, l.dir)
	}
	return l.Truncate(to)
}

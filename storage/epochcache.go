package storage

import (
	"fmt"
	"path"
	"strconv"
	"sync"
)

// LeaderEpochCheckpointFile is the name of the leader-epoch checkpoint in a
// partition directory (Kafka's LeaderEpochCheckpointFile).
const LeaderEpochCheckpointFile = "leader-epoch-checkpoint"

// Kafka's "no epoch" answers of OffsetForLeaderEpoch.
const (
	UndefinedEpoch       int32 = -1
	UndefinedEpochOffset int64 = -1
)

// leaderEpochCheckpointVersion is the only version of the checkpoint format.
const leaderEpochCheckpointVersion = 0

// EpochEntry says that leader epoch Epoch starts at StartOffset.
type EpochEntry struct {
	Epoch       int32
	StartOffset int64
}

// EpochCache is the leader-epoch cache of one partition, Kafka's
// LeaderEpochFileCache: an ordered list of (epoch, start offset) entries,
// built from the leader epochs of appended batches, persisted in the
// leader-epoch-checkpoint file of the partition directory.
//
// Entries are strictly increasing in both epoch and start offset. Unlike
// current Apache Kafka, which drops existing entries when an entry with a
// lower epoch is assigned, an Assign with an epoch lower than the latest is
// ignored (the behaviour of Kafka before 2.x, "ignore with a warning"): the
// batches of the higher epochs stay in the log, so the cache keeps
// describing them. Refusing such batches is a policy decision, not storage's.
//
// Methods are safe for concurrent use. Every change is written to the
// checkpoint atomically (temporary file, sync, rename, directory sync)
// before the method returns, except AssignDeferred's (a log's appends),
// which waits for SyncDeferred; if a write fails the in-memory state has
// changed already and the caller must treat the partition as failed (as
// Kafka takes the log dir offline).
type EpochCache struct {
	mu      sync.RWMutex
	fsys    FS
	name    string // checkpoint path; empty: in memory only
	entries []EpochEntry
	// dirty: entries changed by AssignDeferred are not yet in the
	// checkpoint; onDisk: the checkpoint file may exist (it was found at
	// open or written since), so clearing the cache must rewrite it.
	dirty, onDisk bool

	ignored int64 // assignments ignored because the epoch went backwards
	buf     []byte
}

// OpenEpochCache loads dir/leader-epoch-checkpoint (an absent file is an
// empty cache). A corrupt file is an error wrapping ErrCorruptCheckpoint;
// the caller decides whether to rebuild the cache from the log. fsys may be
// nil for a cache that is never persisted (tests, tools).
func OpenEpochCache(fsys FS, dir string) (*EpochCache, error) {
	c := &EpochCache{fsys: fsys}
	if fsys == nil {
		return c, nil
	}
	c.name = path.Join(dir, LeaderEpochCheckpointFile)
	data, ok, err := readWholeFile(fsys, c.name)
	if err != nil {
		return nil, err
	}
	if !ok {
		return c, nil
	}
	c.onDisk = true
	entries, err := ParseEpochCheckpoint(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", c.name, err)
	}
	c.entries = entries
	return c, nil
}

// ParseEpochCheckpoint decodes the leader-epoch-checkpoint format: version
// 0, the entry count, then one "epoch startOffset" line per entry. It
// rejects negative values and entries that are not strictly increasing in
// both epoch and start offset (Kafka would silently drop such entries when
// reassigning them; a file we wrote never has them, so they mean
// corruption).
func ParseEpochCheckpoint(b []byte) ([]EpochEntry, error) {
	lines, err := parseCheckpoint(b, leaderEpochCheckpointVersion, 2)
	if err != nil {
		return nil, err
	}
	entries := make([]EpochEntry, 0, len(lines))
	for i, f := range lines {
		epoch, err1 := strconv.ParseInt(string(f[0]), 10, 32)
		start, err2 := strconv.ParseInt(string(f[1]), 10, 64)
		if err1 != nil || err2 != nil {
			return nil, fmt.Errorf("%w: entry %d: malformed %q %q", ErrCorruptCheckpoint, i, f[0], f[1])
		}
		if epoch < 0 || start < 0 {
			return nil, fmt.Errorf("%w: entry %d: negative epoch %d or offset %d", ErrCorruptCheckpoint, i, epoch, start)
		}
		if n := len(entries); n > 0 {
			prev := entries[n-1]
			if int32(epoch) <= prev.Epoch || start <= prev.StartOffset {
				return nil, fmt.Errorf("%w: entry %d (%d %d) does not follow (%d %d)", ErrCorruptCheckpoint, i, epoch, start, prev.Epoch, prev.StartOffset)
			}
		}
		entries = append(entries, EpochEntry{Epoch: int32(epoch), StartOffset: start})
	}
	return entries, nil
}

// AppendEpochCheckpoint appends the checkpoint file content for entries to
// dst, byte for byte what Kafka writes.
func AppendEpochCheckpoint(dst []byte, entries []EpochEntry) []byte {
	dst = strconv.AppendInt(dst, leaderEpochCheckpointVersion, 10)
	dst = append(dst, '\n')
	dst = strconv.AppendInt(dst, int64(len(entries)), 10)
	dst = append(dst, '\n')
	for _, e := range entries {
		dst = strconv.AppendInt(dst, int64(e.Epoch), 10)
		dst = append(dst, ' ')
		dst = strconv.AppendInt(dst, e.StartOffset, 10)
		dst = append(dst, '\n')
	}
	return dst
}

// Assign records that epoch starts at startOffset, as the append of a batch
// with that leader epoch at that base offset does. It reports whether the
// cache changed. No change: a negative epoch or offset (batches that carry
// no epoch), the latest epoch again at the same or a later offset (the
// common case; it does not allocate), or an epoch lower than the latest
// (ignored and counted in IgnoredAssignments). The latest epoch at a lower
// offset moves its start offset back (Kafka's rule), dropping entries that
// start at or after it. A new higher epoch is appended, after dropping any
// entries starting at or after startOffset.
func (c *EpochCache) Assign(epoch int32, startOffset int64) (changed bool, err error) {
	return c.assign(epoch, startOffset, true)
}

// AssignDeferred is Assign without the checkpoint write: the change is
// in memory (every reader sees it) and reaches the checkpoint with the
// next SyncDeferred or any other write. A log calls it for its appends
// and syncs before it records a recovery point or a producer snapshot
// that covers the entry's offset, as Kafka writes the leader-epoch
// checkpoint lazily on append: until then, recovery re-learns the entry
// from the batch it describes (replay from the newest snapshot below it,
// validation above the recovery point).
func (c *EpochCache) AssignDeferred(epoch int32, startOffset int64) (changed bool) {
	changed, _ = c.assign(epoch, startOffset, false)
	return changed
}

func (c *EpochCache) assign(epoch int32, startOffset int64, write bool) (changed bool, err error) {
	if epoch < 0 || startOffset < 0 {
		return false, nil
	}
	c.mu.RLock()
	need := c.updateNeeded(epoch, startOffset)
	c.mu.RUnlock()
	if !need {
		return false, nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.updateNeeded(epoch, startOffset) {
		return false, nil
	}
	if n := len(c.entries); n > 0 && epoch < c.entries[n-1].Epoch {
		c.ignored++
		return false, nil
	}
	// Remove entries that would break monotonicity: the same epoch (moved
	// back) and any entry starting at or after the new start offset.
	n := len(c.entries)
	for n > 0 && (c.entries[n-1].Epoch >= epoch || c.entries[n-1].StartOffset >= startOffset) {
		n--
	}
	c.entries = append(c.entries[:n], EpochEntry{Epoch: epoch, StartOffset: startOffset})
	if !write {
		c.dirty = c.fsys != nil
		return true, nil
	}
	return true, c.writeLocked()
}

// SyncDeferred writes the checkpoint when AssignDeferred changed the
// entries since the last write (nothing otherwise).
func (c *EpochCache) SyncDeferred() error {
	c.mu.RLock()
	dirty := c.dirty
	c.mu.RUnlock()
	if !dirty {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.dirty {
		return nil
	}
	return c.writeLocked()
}

// Deferred reports whether entries wait for SyncDeferred.
func (c *EpochCache) Deferred() bool {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.dirty
}

// updateNeeded is Kafka's isUpdateNeeded. REQUIRES: c.mu held.
func (c *EpochCache) updateNeeded(epoch int32, startOffset int64) bool {
	n := len(c.entries)
	if n == 0 {
		return true
	}
	last := c.entries[n-1]
	return epoch != last.Epoch || startOffset < last.StartOffset
}

// IgnoredAssignments counts Assign calls ignored because their epoch was
// lower than the latest one (Kafka logs a warning for each).
func (c *EpochCache) IgnoredAssignments() int64 {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.ignored
}

// EndOffsetFor answers OffsetForLeaderEpoch as Kafka's endOffsetFor does:
//   - requestedEpoch == UndefinedEpoch: (UndefinedEpoch, UndefinedEpochOffset);
//   - requestedEpoch is the latest epoch: (requestedEpoch, logEndOffset);
//   - no entry has a higher epoch (includes the empty cache):
//     (UndefinedEpoch, UndefinedEpochOffset);
//   - requestedEpoch is below the first entry: (requestedEpoch, start offset
//     of the first entry);
//   - otherwise: (largest epoch <= requestedEpoch, start offset of the next
//     higher epoch).
func (c *EpochCache) EndOffsetFor(requestedEpoch int32, logEndOffset int64) (epoch int32, endOffset int64) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	if requestedEpoch == UndefinedEpoch {
		return UndefinedEpoch, UndefinedEpochOffset
	}
	n := len(c.entries)
	if n > 0 && c.entries[n-1].Epoch == requestedEpoch {
		return requestedEpoch, logEndOffset
	}
	// higher: the first entry with Epoch > requestedEpoch.
	higher := 0
	for higher < n && c.entries[higher].Epoch <= requestedEpoch {
		higher++
	}
	if higher == n {
		return UndefinedEpoch, UndefinedEpochOffset
	}
	if higher == 0 {
		return requestedEpoch, c.entries[0].StartOffset
	}
	return c.entries[higher-1].Epoch, c.entries[higher].StartOffset
}

// LatestEpoch returns the latest epoch, ok false when the cache is empty.
func (c *EpochCache) LatestEpoch() (epoch int32, ok bool) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	if len(c.entries) == 0 {
		return UndefinedEpoch, false
	}
	return c.entries[len(c.entries)-1].Epoch, true
}

// LatestEntry returns the latest entry, ok false when the cache is empty.
func (c *EpochCache) LatestEntry() (e EpochEntry, ok bool) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	if len(c.entries) == 0 {
		return EpochEntry{Epoch: UndefinedEpoch, StartOffset: UndefinedEpochOffset}, false
	}
	return c.entries[len(c.entries)-1], true
}

// EarliestEntry returns the first entry, ok false when the cache is empty.
func (c *EpochCache) EarliestEntry() (e EpochEntry, ok bool) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	if len(c.entries) == 0 {
		return EpochEntry{Epoch: UndefinedEpoch, StartOffset: UndefinedEpochOffset}, false
	}
	return c.entries[0], true
}

// EpochForOffset returns the epoch of the entry with the largest start
// offset <= offset (Kafka's epochForOffset, used by ListOffsets to report
// the leader epoch of a found offset); ok is false when offset is before
// the first entry or the cache is empty.
func (c *EpochCache) EpochForOffset(offset int64) (epoch int32, ok bool) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	epoch, ok = UndefinedEpoch, false
	for _, e := range c.entries {
		if e.StartOffset > offset {
			break
		}
		epoch, ok = e.Epoch, true
	}
	return epoch, ok
}

// Entry returns the entry of epoch, if any.
func (c *EpochCache) Entry(epoch int32) (e EpochEntry, ok bool) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	for _, x := range c.entries {
		if x.Epoch == epoch {
			return x, true
		}
	}
	return EpochEntry{}, false
}

// Entries returns a copy of the entries in order.
func (c *EpochCache) Entries() []EpochEntry {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return append([]EpochEntry(nil), c.entries...)
}

// TruncateFromEnd removes every entry whose start offset is >= endOffset
// (log truncation to endOffset). A negative endOffset does nothing.
func (c *EpochCache) TruncateFromEnd(endOffset int64) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := len(c.entries)
	if endOffset < 0 || n == 0 || c.entries[n-1].StartOffset < endOffset {
		return nil
	}
	for n > 0 && c.entries[n-1].StartOffset >= endOffset {
		n--
	}
	c.entries = c.entries[:n]
	return c.writeLocked()
}

// TruncateFromStart drops entries for offsets below the new log start
// offset: every entry with start offset <= startOffset is removed and the
// last of them comes back starting at startOffset (so an entry exactly at
// startOffset is kept). A negative startOffset does nothing.
func (c *EpochCache) TruncateFromStart(startOffset int64) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if startOffset < 0 {
		return nil
	}
	k := 0
	for k < len(c.entries) && c.entries[k].StartOffset <= startOffset {
		k++
	}
	if k == 0 {
		return nil
	}
	last := c.entries[k-1]
	if k == 1 && last.StartOffset == startOffset {
		return nil
	}
	rest := copy(c.entries, c.entries[k-1:])
	c.entries = c.entries[:rest]
	c.entries[0] = EpochEntry{Epoch: last.Epoch, StartOffset: startOffset}
	return c.writeLocked()
}

// Clear removes every entry (full truncation of the log) and persists the
// empty cache.
func (c *EpochCache) Clear() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.entries = c.entries[:0]
	if !c.onDisk {
		// No checkpoint file: absent is empty already (a new
		// partition's log writes nothing here).
		c.dirty = false
		return nil
	}
	return c.writeLocked()
}

// Flush writes the checkpoint again (for callers that want to re-persist
// after an earlier write failed and the directory has been repaired).
func (c *EpochCache) Flush() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.writeLocked()
}

// writeLocked persists the entries. REQUIRES: c.mu held for writing.
func (c *EpochCache) writeLocked() error {
	if c.fsys == nil {
		return nil
	}
	c.buf = AppendEpochCheckpoint(c.buf[:0], c.entries)
	c.onDisk = true // also when the write fails part way
	if err := AtomicWriteFile(c.fsys, c.name, c.buf); err != nil {
		return err
	}
	c.dirty = false
	return nil
}

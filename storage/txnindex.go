package storage

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"sync"
)

// TxnIndexSuffix is the file suffix of a segment's transaction index.
const TxnIndexSuffix = ".txnindex"

// ErrCorruptTxnIndex is wrapped by every error reporting a malformed
// transaction index.
var ErrCorruptTxnIndex = errors.New("storage: corrupt transaction index")

// Transaction index entry layout (Kafka's AbortedTxn), big endian:
//
//	version          int16  (0)
//	producerId       int64
//	firstOffset      int64
//	lastOffset       int64
//	lastStableOffset int64
//
// 34 bytes per entry, entries back to back, no header. Frozen: Kafka's
// DumpLogSegments and Kafka brokers read these files.
const (
	txnIndexVersion   = 0
	TxnIndexEntrySize = 34
)

// AbortedTxn is one transaction index entry: an aborted transaction of
// ProducerID spanning [FirstOffset, LastOffset] (LastOffset is the ABORT
// marker's offset), and the last stable offset right after the marker was
// appended (used to stop the search across segments early).
type AbortedTxn struct {
	ProducerID       int64
	FirstOffset      int64
	LastOffset       int64
	LastStableOffset int64
}

// AppendAbortedTxn appends the 34-byte encoding of t to dst.
func AppendAbortedTxn(dst []byte, t AbortedTxn) []byte {
	dst = binary.BigEndian.AppendUint16(dst, txnIndexVersion)
	dst = binary.BigEndian.AppendUint64(dst, uint64(t.ProducerID))
	dst = binary.BigEndian.AppendUint64(dst, uint64(t.FirstOffset))
	dst = binary.BigEndian.AppendUint64(dst, uint64(t.LastOffset))
	return binary.BigEndian.AppendUint64(dst, uint64(t.LastStableOffset))
}

// ParseTxnIndex decodes a whole transaction index. It rejects a trailing
// partial entry and versions other than 0 (Kafka refuses versions it does
// not know). It does not check offsets; see SanityCheck.
func ParseTxnIndex(b []byte) ([]AbortedTxn, error) {
	if len(b)%TxnIndexEntrySize != 0 {
		return nil, fmt.Errorf("%w: size %d is not a multiple of %d (partial entry of %d bytes at position %d)",
			ErrCorruptTxnIndex, len(b), TxnIndexEntrySize, len(b)%TxnIndexEntrySize, len(b)-len(b)%TxnIndexEntrySize)
	}
	out := make([]AbortedTxn, 0, len(b)/TxnIndexEntrySize)
	be := binary.BigEndian
	for pos := 0; pos < len(b); pos += TxnIndexEntrySize {
		e := b[pos : pos+TxnIndexEntrySize]
		if v := int16(be.Uint16(e)); v != txnIndexVersion {
			return nil, fmt.Errorf("%w: unexpected entry version %d at position %d (current version is %d)",
				ErrCorruptTxnIndex, v, pos, txnIndexVersion)
		}
		out = append(out, AbortedTxn{
			ProducerID:       int64(be.Uint64(e[2:])),
			FirstOffset:      int64(be.Uint64(e[10:])),
			LastOffset:       int64(be.Uint64(e[18:])),
			LastStableOffset: int64(be.Uint64(e[26:])),
		})
	}
	return out, nil
}

// TxnIndex is the transaction index of one segment (Kafka's
// TransactionIndex): the aborted transactions whose ABORT marker is in that
// segment, in marker order. The file is created on the first Append, as
// Kafka does, so segments without aborted transactions have none. Entries
// are kept in memory (they are few: one per aborted transaction).
//
// Appends must come from the partition owner; readers (CollectAborted,
// Entries) may run concurrently with it.
type TxnIndex struct {
	mu         sync.RWMutex
	fsys       FS
	name       string
	baseOffset int64
	file       File // nil until the first append (or when opened empty)
	entries    []AbortedTxn
	buf        [TxnIndexEntrySize]byte
}

// OpenTxnIndex loads the transaction index at name (absent: empty) for the
// segment starting at baseOffset. A partial trailing entry or an unknown
// version is an error wrapping ErrCorruptTxnIndex; recovery then rebuilds
// the index from the segment (Reset and re-append).
func OpenTxnIndex(fsys FS, name string, baseOffset int64) (*TxnIndex, error) {
	x := &TxnIndex{fsys: fsys, name: name, baseOffset: baseOffset}
	data, ok, err := readWholeFile(fsys, name)
	if err != nil {
		return nil, err
	}
	if ok {
		entries, err := ParseTxnIndex(data)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		x.entries = entries
	}
	return x, nil
}

// Name returns the file name of the index.
func (x *TxnIndex) Name() string { return x.name }

// BaseOffset returns the base offset of the segment the index belongs to.
func (x *TxnIndex) BaseOffset() int64 { return x.baseOffset }

// SanityCheck reports corruption as Kafka's sanityCheck does: an entry
// whose last offset is below the segment base offset. It also checks what
// Append guarantees: last offsets strictly increase and first <= last.
func (x *TxnIndex) SanityCheck() error {
	x.mu.RLock()
	defer x.mu.RUnlock()
	for i, t := range x.entries {
		if t.LastOffset < x.baseOffset {
			return fmt.Errorf("%w: %s: last offset %d of aborted transaction %d is less than the segment base offset %d",
				ErrCorruptTxnIndex, x.name, t.LastOffset, i, x.baseOffset)
		}
		if t.FirstOffset > t.LastOffset {
			return fmt.Errorf("%w: %s: entry %d: first offset %d after last offset %d",
				ErrCorruptTxnIndex, x.name, i, t.FirstOffset, t.LastOffset)
		}
		if i > 0 && t.LastOffset <= x.entries[i-1].LastOffset {
			return fmt.Errorf("%w: %s: entry %d: last offset %d does not increase (previous %d)",
				ErrCorruptTxnIndex, x.name, i, t.LastOffset, x.entries[i-1].LastOffset)
		}
	}
	return nil
}

// Append adds an entry at the end of the file. The last offsets of the
// entries must strictly increase (as Kafka requires). The write is not
// synced; see Flush.
func (x *TxnIndex) Append(t AbortedTxn) error {
	x.mu.Lock()
	defer x.mu.Unlock()
	if n := len(x.entries); n > 0 && t.LastOffset <= x.entries[n-1].LastOffset {
		return fmt.Errorf("storage: %s: aborted transaction last offset %d does not follow %d",
			x.name, t.LastOffset, x.entries[n-1].LastOffset)
	}
	if t.FirstOffset > t.LastOffset {
		return fmt.Errorf("storage: %s: aborted transaction first offset %d after last offset %d",
			x.name, t.FirstOffset, t.LastOffset)
	}
	if x.file == nil {
		f, err := x.fsys.OpenFile(x.name, os.O_CREATE|os.O_RDWR, 0o644)
		if err != nil {
			return fmt.Errorf("storage: open %s: %w", x.name, err)
		}
		x.file = f
	}
	enc := AppendAbortedTxn(x.buf[:0], t)
	pos := int64(len(x.entries)) * TxnIndexEntrySize
	if n, err := x.file.WriteAt(enc, pos); err != nil || n != len(enc) {
		if err == nil {
			err = errors.New("short write")
		}
		// Drop whatever part of the entry reached the file so the index
		// stays whole entries; if that fails too, loading reports it.
		_ = x.file.Truncate(pos)
		return fmt.Errorf("storage: append to %s: %w", x.name, err)
	}
	x.entries = append(x.entries, t)
	return nil
}

// Flush syncs the file, if it exists.
func (x *TxnIndex) Flush() error {
	x.mu.RLock()
	defer x.mu.RUnlock()
	if x.file == nil {
		return nil
	}
	if err := x.file.Sync(); err != nil {
		return fmt.Errorf("storage: sync %s: %w", x.name, err)
	}
	return nil
}

// TruncateTo removes the entries whose last offset is >= offset (log
// truncation to offset).
func (x *TxnIndex) TruncateTo(offset int64) error {
	x.mu.Lock()
	defer x.mu.Unlock()
	k := 0
	for k < len(x.entries) && x.entries[k].LastOffset < offset {
		k++
	}
	return x.truncateLocked(k)
}

// Reset removes every entry (used before rebuilding the index).
func (x *TxnIndex) Reset() error {
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.truncateLocked(0)
}

// truncateLocked keeps the first k entries. REQUIRES: x.mu held for writing.
func (x *TxnIndex) truncateLocked(k int) error {
	if k == len(x.entries) && x.file == nil {
		return nil
	}
	if x.file == nil {
		f, err := x.fsys.OpenFile(x.name, os.O_CREATE|os.O_RDWR, 0o644)
		if err != nil {
			return fmt.Errorf("storage: open %s: %w", x.name, err)
		}
		x.file = f
	}
	if err := x.file.Truncate(int64(k) * TxnIndexEntrySize); err != nil {
		return fmt.Errorf("storage: truncate %s: %w", x.name, err)
	}
	x.entries = x.entries[:k]
	return nil
}

// Entries returns a copy of all entries.
func (x *TxnIndex) Entries() []AbortedTxn {
	x.mu.RLock()
	defer x.mu.RUnlock()
	return append([]AbortedTxn(nil), x.entries...)
}

// Len returns the number of entries.
func (x *TxnIndex) Len() int {
	x.mu.RLock()
	defer x.mu.RUnlock()
	return len(x.entries)
}

// CollectAborted appends to dst the aborted transactions of this index
// that overlap [fetchOffset, upperBoundOffset): LastOffset >= fetchOffset
// and FirstOffset < upperBoundOffset (Kafka's collectAbortedTxns). complete
// is true when an entry's LastStableOffset is >= upperBoundOffset: no later
// segment can hold a transaction that overlaps the range, so the caller
// composing across segments can stop.
func (x *TxnIndex) CollectAborted(fetchOffset, upperBoundOffset int64, dst []AbortedTxn) (out []AbortedTxn, complete bool) {
	x.mu.RLock()
	defer x.mu.RUnlock()
	for _, t := range x.entries {
		if t.LastOffset >= fetchOffset && t.FirstOffset < upperBoundOffset {
			dst = append(dst, t)
		}
		if t.LastStableOffset >= upperBoundOffset {
			return dst, true
		}
	}
	return dst, false
}

// Close closes the file, if open. The index must not be used afterwards.
func (x *TxnIndex) Close() error {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.file == nil {
		return nil
	}
	err := x.file.Close()
	x.file = nil
	return err
}

// Rename moves the index file to newName (for example with a ".deleted"
// suffix before deletion, as Kafka does). A missing file is not an error:
// the index may never have been written.
func (x *TxnIndex) Rename(newName string) error {
	x.mu.Lock()
	defer x.mu.Unlock()
	if err := x.fsys.Rename(x.name, newName); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("storage: rename %s: %w", x.name, err)
	}
	x.name = newName
	return nil
}

// Delete closes and removes the index file (absent is fine).
func (x *TxnIndex) Delete() error {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.file != nil {
		x.file.Close()
		x.file = nil
	}
	if err := x.fsys.Remove(x.name); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("storage: remove %s: %w", x.name, err)
	}
	x.entries = x.entries[:0]
	return nil
}

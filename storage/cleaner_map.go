package storage

import (
	"crypto/md5"
	"encoding/binary"
)

// offsetMap is the cleaner's dedupe buffer, Kafka's SkimpyOffsetMap: an
// open-addressing table of 24-byte slots (the MD5 of a key, 16 bytes, and
// the latest offset seen for it, 8 bytes), filled to at most 90%. Like
// Kafka's it compares hashes only (two keys with the same MD5 are one
// key). Its memory is the slot array: it starts small, doubles while the
// dirty section needs more slots, and never exceeds the configured buffer
// (log.cleaner.dedupe.buffer.size); full() then stops the map where it is.
type offsetMap struct {
	slots    []byte // n slots of offsetMapSlotSize bytes
	n        int    // number of slots (a power of two)
	entries  int
	maxSlots int // the buffer's bound
	latest   int64
}

const (
	offsetMapSlotSize   = 24
	offsetMapLoadFactor = 0.9
	offsetMapMinSlots   = 1 << 10
)

// newOffsetMap returns an empty map whose slot array never exceeds
// bufferBytes (at least offsetMapMinSlots slots).
func newOffsetMap(bufferBytes int64) *offsetMap {
	max := 1
	for int64(max*2)*offsetMapSlotSize <= bufferBytes {
		max *= 2
	}
	if max < offsetMapMinSlots {
		max = offsetMapMinSlots
	}
	return &offsetMap{maxSlots: max, latest: -1}
}

// reset empties the map, keeping its memory.
func (m *offsetMap) reset() {
	clear(m.slots)
	m.entries, m.latest = 0, -1
}

// bytes is the memory the map holds.
func (m *offsetMap) bytes() int64 { return int64(cap(m.slots)) }

// full reports that no new key fits: the table is at its load factor and
// cannot grow.
func (m *offsetMap) full() bool {
	return m.n >= m.maxSlots && float64(m.entries+1) > float64(m.n)*offsetMapLoadFactor
}

func (m *offsetMap) grow() {
	n := m.n * 2
	if n == 0 {
		n = min(offsetMapMinSlots, m.maxSlots)
	}
	old, oldN := m.slots, m.n
	m.slots, m.n, m.entries = make([]byte, n*offsetMapSlotSize), n, 0
	for i := 0; i < oldN; i++ {
		s := old[i*offsetMapSlotSize : (i+1)*offsetMapSlotSize]
		if off := binary.BigEndian.Uint64(s[16:]); off != 0 {
			var h [16]byte
			copy(h[:], s[:16])
			m.putHash(&h, int64(off)-1)
		}
	}
}

// put records offset as the latest offset of key. The caller checks full
// first.
func (m *offsetMap) put(key []byte, offset int64) {
	h := md5.Sum(key)
	if m.n == 0 || (float64(m.entries+1) > float64(m.n)*offsetMapLoadFactor && m.n < m.maxSlots) {
		m.grow()
	}
	m.putHash(&h, offset)
}

func (m *offsetMap) putHash(h *[16]byte, offset int64) {
	mask := m.n - 1
	for i := int(binary.BigEndian.Uint64(h[:8])) & mask; ; i = (i + 1) & mask {
		s := m.slots[i*offsetMapSlotSize : (i+1)*offsetMapSlotSize]
		stored := binary.BigEndian.Uint64(s[16:])
		if stored == 0 {
			copy(s, h[:])
			binary.BigEndian.PutUint64(s[16:], uint64(offset)+1)
			m.entries++
			return
		}
		if [16]byte(s[:16]) == *h {
			binary.BigEndian.PutUint64(s[16:], uint64(offset)+1)
			return
		}
	}
}

// get returns the latest offset recorded for key, or -1.
func (m *offsetMap) get(key []byte) int64 {
	if m.n == 0 {
		return -1
	}
	h := md5.Sum(key)
	mask := m.n - 1
	for i := int(binary.BigEndian.Uint64(h[:8])) & mask; ; i = (i + 1) & mask {
		s := m.slots[i*offsetMapSlotSize : (i+1)*offsetMapSlotSize]
		stored := binary.BigEndian.Uint64(s[16:])
		if stored == 0 {
			return -1
		}
		if [16]byte(s[:16]) == h {
			return int64(stored) - 1
		}
	}
}

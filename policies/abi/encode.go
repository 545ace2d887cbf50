package abi

import (
	"encoding/binary"
	"errors"
	"sort"
)

// Context is the partition context of a judge call.
type Context struct {
	Partition int32
	Mode      MirrorMode
	State     MirrorState
	// LeaderEpoch is the partition's current leader epoch.
	LeaderEpoch  int32
	LogEndOffset int64
	// LastBatchEpoch is the leader epoch of the last stored batch, -1 for
	// an empty log.
	LastBatchEpoch int32
	// OpenTxnProducerIDs are the producers with a transaction open before
	// the call's batches.
	OpenTxnProducerIDs []int64
}

// ErrBatches is returned when a record set does not split into whole v2
// batch headers.
var ErrBatches = errors.New("policy abi: record set does not split into whole batches")

// EncodeConfigs encodes the config table for the keys a module declared
// (sorted, keys absent from cfg left out). It returns the table and the
// number of entries.
func EncodeConfigs(keys []string, cfg map[string]string) ([]byte, int) {
	ks := append([]string(nil), keys...)
	sort.Strings(ks)
	var out []byte
	n := 0
	for i, k := range ks {
		if i > 0 && ks[i-1] == k {
			continue
		}
		v, ok := cfg[k]
		if !ok || len(k) > 0xffff || len(v) > 0xffff {
			continue
		}
		out = le.AppendUint16(out, uint16(len(k)))
		out = append(out, k...)
		out = le.AppendUint16(out, uint16(len(v)))
		out = append(out, v...)
		n++
	}
	return out, n
}

func passBytes(needs Needs, control bool) bool {
	return needs&NeedBatchBytes != 0 || (control && needs&NeedControlBytes != 0)
}

func align8(n int) int { return (n + 7) &^ 7 }

// InputSize returns the size of the input EncodeInput writes and the
// number of batches in set.
func InputSize(c *Context, topic string, configs []byte, set []byte, needs Needs) (size, nbatches int, err error) {
	size = InputHeaderSize + align8(len(topic)) + align8(len(configs)) + 8*len(c.OpenTxnProducerIDs)
	for rest := set; len(rest) > 0; nbatches++ {
		if len(rest) < BatchHeaderSize {
			return 0, 0, ErrBatches
		}
		n := int64(int32(be.Uint32(rest[8:]))) + 12
		if n < BatchHeaderSize || n > int64(len(rest)) {
			return 0, 0, ErrBatches
		}
		if passBytes(needs, be.Uint16(rest[21:])&AttrControl != 0) {
			size += align8(int(n))
		}
		rest = rest[n:]
	}
	size += nbatches * BatchEntrySize
	if size > 1<<31 || len(topic) > 0xffff {
		return 0, 0, ErrBatches
	}
	return size, nbatches, nil
}

// EncodeInput writes the input into dst, which must be at least the size
// InputSize returned (the caller sized it; set must be the same).
func EncodeInput(dst []byte, c *Context, topic string, configs []byte, nconfigs int, set []byte, nbatches int, needs Needs) []byte {
	flags := uint32(0)
	if needs&NeedBatchBytes != 0 {
		flags |= FlagBatchBytes
	}
	if needs&NeedControlBytes != 0 {
		flags |= FlagControlBytes
	}
	h := dst[:InputHeaderSize]
	clear(h)
	le.PutUint32(h[OffVersion:], Version)
	le.PutUint32(h[OffHeaderSize:], InputHeaderSize)
	le.PutUint32(h[OffFlags:], flags)
	h[OffMirrorMode] = byte(c.Mode)
	h[OffMirrorState] = byte(c.State)
	le.PutUint32(h[OffPartition:], uint32(c.Partition))
	le.PutUint32(h[OffLeaderEpoch:], uint32(c.LeaderEpoch))
	le.PutUint64(h[OffLogEndOffset:], uint64(c.LogEndOffset))
	le.PutUint32(h[OffLastEpoch:], uint32(c.LastBatchEpoch))
	le.PutUint32(h[OffBatchCount:], uint32(nbatches))
	le.PutUint32(h[OffOpenTxnCount:], uint32(len(c.OpenTxnProducerIDs)))
	le.PutUint16(h[OffTopicLen:], uint16(len(topic)))
	le.PutUint16(h[OffConfigCount:], uint16(nconfigs))

	off := InputHeaderSize
	put := func(field int, b []byte) {
		le.PutUint32(h[field:], uint32(off))
		copy(dst[off:], b)
		end := off + align8(len(b))
		clear(dst[off+len(b) : end])
		off = end
	}
	le.PutUint32(h[OffTopic:], uint32(off))
	off += copy(dst[off:], topic)
	clear(dst[off:align8(off)])
	off = align8(off)
	put(OffConfigTable, configs)
	le.PutUint32(h[OffOpenTxnTable:], uint32(off))
	for _, pid := range c.OpenTxnProducerIDs {
		le.PutUint64(dst[off:], uint64(pid))
		off += 8
	}
	le.PutUint32(h[OffBatchTable:], uint32(off))
	tab := off
	off += nbatches * BatchEntrySize
	rest := set
	for i := 0; i < nbatches; i++ {
		n := int(int32(be.Uint32(rest[8:]))) + 12
		batch := rest[:n]
		rest = rest[n:]
		e := dst[tab+i*BatchEntrySize : tab+(i+1)*BatchEntrySize]
		copy(e, batch[:BatchHeaderSize])
		clear(e[BatchHeaderSize:])
		le.PutUint32(e[EntrySize:], uint32(n))
		control := be.Uint16(batch[21:])&AttrControl != 0
		if control {
			flag := byte(EntryControl)
			if typ, ok := controlType(batch); ok {
				flag |= EntryControlKnown
				le.PutUint16(e[EntryControlType:], uint16(typ))
			}
			e[EntryFlags] = flag
		}
		if passBytes(needs, control) {
			le.PutUint32(e[EntryBytesOffset:], uint32(off))
			copy(dst[off:], batch)
			end := off + align8(n)
			clear(dst[off+n : end])
			off = end
		}
	}
	return dst[:off]
}

// controlType reads the type from the key of an uncompressed control
// batch's first record, without allocating.
func controlType(batch []byte) (int16, bool) {
	if be.Uint16(batch[21:])&AttrCodecMask != 0 || be.Uint32(batch[57:]) == 0 {
		return 0, false
	}
	b := batch[BatchHeaderSize:]
	var n int
	var v int64
	next := func() bool {
		v, n = binary.Varint(b)
		if n <= 0 {
			return false
		}
		b = b[n:]
		return true
	}
	if !next() || len(b) < 1 { // record length
		return 0, false
	}
	b = b[1:]                          // attributes
	if !next() || !next() || !next() { // timestamp delta, offset delta, key length
		return 0, false
	}
	if v < 4 || int64(len(b)) < v {
		return 0, false
	}
	return int16(be.Uint16(b[2:])), true
}

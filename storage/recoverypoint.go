package storage

import (
	"fmt"
	"math"
	"strconv"
)

// The recovery point is the first offset not known to be durable: every
// segment whose batches all lie below it was synced (log, indexes and
// transaction index) before the value was recorded. Recovery after an
// unclean shutdown validates, batch by batch, every segment with data at or
// above it (Kafka's recoveryPoint and recovery-point-offset-checkpoint).
//
// The file uses Kafka's text checkpoint format, version 0, with one entry
// "<topic> <partition> <offset>", like the log-start-offset checkpoint.
// Kafka keeps one such file per log directory; Verbatim keeps one per
// partition directory. A value recorded too low only costs recovery time;
// it is therefore lowered before anything relies on the lower value
// (truncation) and raised only after the syncs it stands for.
const RecoveryPointCheckpointFile = "recovery-point-offset-checkpoint"

// readRecoveryPoint returns the checkpointed recovery point in dir, or -1
// when there is none. A corrupt file is reported with
// ErrCorruptCheckpoint.
func readRecoveryPoint(fs FS, dir, topic string, partition int32) (int64, error) {
	return readPartitionCheckpoint(fs, dir, RecoveryPointCheckpointFile, topic, partition)
}

// RecoveryPoint returns the in-memory recovery point: every offset below it
// is durable and, when it lies at or above the end of a segment, that
// segment's indexes and transaction index are too.
func (l *Log) RecoveryPoint() int64 { return l.recoveryPoint.Load() }

// raiseRecoveryPoint moves the in-memory recovery point up to off.
// REQUIRES: l.syncMu.
func (l *Log) raiseRecoveryPoint(off int64) {
	if off > l.recoveryPoint.Load() {
		l.recoveryPoint.Store(off)
	}
}

// lowerRecoveryPoint moves the in-memory recovery point down to off (after
// a truncation). REQUIRES: l.syncMu.
func (l *Log) lowerRecoveryPoint(off int64) {
	if off < l.recoveryPoint.Load() {
		l.recoveryPoint.Store(off)
	}
}

// persistRecoveryPoint writes the recovery point when it differs from the
// recorded one. Running out of space is not a failure: the recorded value
// stays lower, which is safe. REQUIRES: l.syncMu.
//
// The leader epochs appends deferred (EpochCache.AssignDeferred) are
// written first, every time: recovery trusts what lies below a recorded
// recovery point and re-learns no epoch there (nor anywhere after a clean
// close, whose recovery point this also is). Every entry starting below
// rp was assigned before rp was read (an append assigns before it
// writes), so the checkpoint written after that read holds them.
func (l *Log) persistRecoveryPoint() error {
	rp := l.recoveryPoint.Load()
	if err := l.epochs.SyncDeferred(); err != nil {
		if isNoSpace(err) {
			return nil // the recorded recovery point stays lower
		}
		return fmt.Errorf("leader-epoch checkpoint: %w", err)
	}
	if rp == l.persistedRP {
		return nil
	}
	err := writePartitionCheckpoint(l.fs, l.dir, RecoveryPointCheckpointFile, l.cfg.Topic, l.cfg.Partition, rp)
	if err != nil {
		if isNoSpace(err) && rp > l.persistedRP {
			return nil
		}
		return fmt.Errorf("recovery-point checkpoint: %w", err)
	}
	l.persistedRP = rp
	return nil
}

// A segment that rolled but is not yet synced can lose a tail that ends
// exactly at a batch boundary while a later segment's data reaches the
// disk; validating the segment alone cannot see that. So a roll first
// records, durably, the final size and end offset of every rolled segment
// not yet known durable, before the next segment exists; recovery treats a
// segment found shorter than recorded as torn (later segments are
// deleted). The file uses Kafka's text checkpoint format, version 0, with
// entries "<base offset> <size in bytes> <end offset>". It is Verbatim's own
// (Kafka keeps no such file and its tools ignore it).
const RolledSegmentsFile = "rolled-segments-checkpoint"

// rolledSegment is one entry of the rolled-segments file.
type rolledSegment struct {
	base, size, next int64
}

// appendRolledSegments returns b with the rolled-segments file for entries.
func appendRolledSegments(b []byte, entries []unflushedSeg) []byte {
	b = append(b, "0\n"...)
	b = strconv.AppendInt(b, int64(len(entries)), 10)
	b = append(b, '\n')
	for _, e := range entries {
		b = strconv.AppendInt(b, e.seg.base, 10)
		b = append(b, ' ')
		b = strconv.AppendInt(b, e.size, 10)
		b = append(b, ' ')
		b = strconv.AppendInt(b, e.upTo, 10)
		b = append(b, '\n')
	}
	return b
}

// decodeRolledSegments parses the rolled-segments file: entries by base
// offset. Sizes must fit a segment (at most 2 GiB) and end offsets must not
// be below base offsets.
func decodeRolledSegments(b []byte) (map[int64]rolledSegment, error) {
	entries, err := parseCheckpoint(b, 0, 3)
	if err != nil {
		return nil, err
	}
	out := make(map[int64]rolledSegment, len(entries))
	for i, e := range entries {
		base, err1 := strconv.ParseInt(string(e[0]), 10, 64)
		size, err2 := strconv.ParseInt(string(e[1]), 10, 64)
		next, err3 := strconv.ParseInt(string(e[2]), 10, 64)
		if err1 != nil || err2 != nil || err3 != nil || base < 0 || size < 0 || size > math.MaxInt32 || next < base {
			return nil, fmt.Errorf("%w: entry %d %q %q %q is not \"base size end\"", ErrCorruptCheckpoint, i, e[0], e[1], e[2])
		}
		out[base] = rolledSegment{base: base, size: size, next: next}
	}
	return out, nil
}

// readRolledSegments returns the entries of the rolled-segments file in
// dir; none when it is missing or corrupt (recovery then validates what it
// can without them).
func readRolledSegments(fs FS, dir string) (map[int64]rolledSegment, error) {
	b, ok, err := readWholeFile(fs, dir+"/"+RolledSegmentsFile)
	if err != nil || !ok {
		return nil, err
	}
	m, err := decodeRolledSegments(b)
	if err != nil {
		return nil, nil
	}
	return m, nil
}

// writeRolledSegmentsLocked records the rolled segments not known durable:
// those whose end the recovery point has not passed, including any the
// flusher is syncing right now. REQUIRES: l.mu.
func (l *Log) writeRolledSegmentsLocked() error {
	rp := l.recoveryPoint.Load()
	kept := l.rollRecord[:0]
	for _, e := range l.rollRecord {
		if e.upTo > rp {
			kept = append(kept, e)
		}
	}
	clear(l.rollRecord[len(kept):])
	l.rollRecord = kept
	l.rolledBuf = appendRolledSegments(l.rolledBuf[:0], l.rollRecord)
	return AtomicWriteFile(l.fs, l.dir+"/"+RolledSegmentsFile, l.rolledBuf)
}

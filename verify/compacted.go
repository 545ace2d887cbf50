package verify

import (
	"context"
	"fmt"

	"github.com/verbatim-kafka/verbatim/client"
	"github.com/verbatim-kafka/verbatim/kbatch"
)

// Compacted sources: the superset check (source-compacted-since), the
// way to the compacted-equivalent rule (equivalent.go), and epoch answers
// that differ only across compacted-away offsets.

// compactedCompare decides a compacted source whose batches differ from
// the destination's: source-compacted-since when the destination holds
// every surviving source record unchanged, else, when the destination is
// compacted too, the compacted-equivalent rule.
func (v *partitionCheck) compactedCompare(ctx context.Context, from, to int64) error {
	if err := v.superset(ctx, from, to); err != nil || v.rep.Status != Mismatch || !v.bothCompacted {
		return err
	}
	return v.equivalent(ctx, from, to, v.lso[0], v.lso[1])
}

// superset checks, from the start of the common range, that every record
// the compacted source still holds sits on the destination at the same
// offset with the same key, value, headers and timestamp.
func (v *partitionCheck) superset(ctx context.Context, from, to int64) error {
	v.rep.Batches, v.rep.Bytes = 0, 0
	v.sampleTimes = nil
	v.compactedSince = true
	v.rep.Checks = append(v.rep.Checks, "compacted_superset")
	si := newBatches(v.sc, v.topic, v.part, from, to, client.ReadUncommitted)
	di := newBatches(v.dc, v.topic, v.part, from, to, client.ReadUncommitted)
	var drecs []record
	for {
		s, err := si.Next(ctx)
		if err != nil {
			return fmt.Errorf("source: %w", err)
		}
		if s == nil {
			break
		}
		srecs, err := decodeRecords(s)
		if err != nil {
			v.mismatch(baseOffset(s), "records", "source %s", unreadable(s, err))
			return nil
		}
		for _, sr := range srecs {
			for len(drecs) == 0 || drecs[len(drecs)-1].offset < sr.offset {
				d, err := di.Next(ctx)
				if err != nil {
					return fmt.Errorf("destination: %w", err)
				}
				if d == nil {
					v.mismatch(sr.offset, "record_missing", "the destination has no record at offset %d", sr.offset)
					return nil
				}
				v.note(d)
				v.rep.Batches++
				v.rep.Bytes += int64(len(d))
				if drecs, err = decodeRecords(d); err != nil {
					v.mismatch(baseOffset(d), "records", "destination %s", unreadable(d, err))
					return nil
				}
			}
			var dr *record
			for i := range drecs {
				if drecs[i].offset == sr.offset {
					dr = &drecs[i]
					break
				}
			}
			if dr == nil {
				v.mismatch(sr.offset, "record_missing", "the destination has no record at offset %d", sr.offset)
				return nil
			}
			if f := diffRecord(sr, *dr); f != "" {
				v.mismatch(sr.offset, f, "record at offset %d differs (%s)", sr.offset, f)
				return nil
			}
		}
	}
	return nil
}

// compactedGap reports whether two OffsetForLeaderEpoch answers differ
// only across offsets where the compacted source (and, compared as
// compacted-equivalent, the destination) holds no record.
func (v *partitionCheck) compactedGap(ctx context.Context, s, d client.EpochEnd) (bool, error) {
	if !v.compacted || s.LeaderEpoch != d.LeaderEpoch || s.EndOffset < 0 || d.EndOffset < 0 {
		return false, nil
	}
	lo, hi := min(s.EndOffset, d.EndOffset), max(s.EndOffset, d.EndOffset)
	sides := []*client.Conn{v.sc}
	if v.equiv {
		sides = append(sides, v.dc) // the destination cleaned too
	}
	for i, cn := range sides {
		it := newBatches(cn, v.topic, v.part, lo, hi, client.ReadUncommitted)
		for {
			b, err := it.Next(ctx)
			if err != nil {
				return false, fmt.Errorf("%s: %w", [2]string{"source", "destination"}[i], err)
			}
			if b == nil {
				break
			}
			h, err := kbatch.ParseHeader(b)
			if err != nil || h.RecordCount > 0 {
				return false, nil
			}
		}
	}
	return true, nil
}

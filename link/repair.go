package link

import (
	"errors"
	"fmt"
)

// The common point of a destination log and its source: Kafka's follower
// truncation rule (the replica fetcher's OffsetsForLeaderEpoch exchange,
// KIP-101 and KIP-279) applied across clusters. The destination asks the
// source for the end of its own latest epoch; the source answers the
// largest epoch it has at or below that one and where it ends; the
// destination keeps up to the smaller of that end and its own end of
// that epoch. If the answered epoch is one the destination does not have,
// it cuts there and asks again with its latest epoch below it, until both
// sides name the same epoch. Divergence repair (`mirror truncate
// --to-divergence`) and failback (`mirror create --truncate-to-common`)
// truncate to this point.

// EpochStart is one entry of the destination's leader-epoch cache: the
// epoch and the first offset written in it.
type EpochStart struct {
	Epoch       int32
	StartOffset int64
}

// EpochEnd is the source's OffsetForLeaderEpoch answer: the largest
// epoch it has at or below the one asked and the offset where it ends
// (the next epoch's start, or the source's log end for its latest epoch).
// Epoch -1 with EndOffset >= 0: the source has no epoch at or below the
// one asked, its first epoch starting at EndOffset; both -1: the source
// knows nothing of the partition's epochs.
type EpochEnd struct {
	Epoch     int32
	EndOffset int64
}

// CommonPoint is where the logs part: the destination keeps [log start,
// Offset) and removes the rest. Epoch is the leader epoch of the last
// offset kept (-1 when nothing is kept), Rounds the questions asked.
type CommonPoint struct {
	Offset int64
	Epoch  int32
	Rounds int
}

// ErrNoCommonPoint: the source answered no epoch and no offset, so no
// common point can be derived (Kafka's follower falls back to its high
// watermark, which has no meaning across clusters).
var ErrNoCommonPoint = errors.New("the source knows no leader epoch of the partition: no common point")

// FindCommonPoint applies the rule to the destination's epoch cache
// (ascending epochs and start offsets, as storage keeps it), its log start
// and log end, asking the source through ask. It is pure: everything it
// learns of the source comes from ask's answers.
func FindCommonPoint(dest []EpochStart, logStart, logEnd int64, ask func(epoch int32) (EpochEnd, error)) (CommonPoint, error) {
	end := logEnd
	view := trimEpochs(dest, end)
	for round := 1; ; round++ {
		if len(view) == 0 || end <= logStart {
			return CommonPoint{Offset: end, Epoch: epochBefore(view, end), Rounds: round - 1}, nil
		}
		asked := view[len(view)-1].Epoch
		ans, err := ask(asked)
		if err != nil {
			return CommonPoint{}, fmt.Errorf("OffsetForLeaderEpoch for epoch %d: %w", asked, err)
		}
		if ans.Epoch > asked {
			return CommonPoint{}, fmt.Errorf("the source answered epoch %d for epoch %d (an answer is at or below the epoch asked)", ans.Epoch, asked)
		}
		if ans.Epoch < 0 {
			if ans.EndOffset < 0 {
				return CommonPoint{}, ErrNoCommonPoint
			}
			// No source epoch at or below ours: the source's history
			// starts at EndOffset with later epochs (Kafka's follower
			// truncates to min(end offset, its log end)).
			off := min(ans.EndOffset, end)
			return CommonPoint{Offset: off, Epoch: epochBefore(view, off), Rounds: round}, nil
		}
		i := len(view) - 1
		for i >= 0 && view[i].Epoch > ans.Epoch {
			i--
		}
		if i < 0 {
			// Every epoch of ours is later than anything the source has
			// at or below them: nothing from our first epoch on is shared.
			off := min(ans.EndOffset, view[0].StartOffset)
			return CommonPoint{Offset: off, Epoch: epochBefore(view, off), Rounds: round}, nil
		}
		ownEnd := end
		if i+1 < len(view) {
			ownEnd = view[i+1].StartOffset
		}
		off := min(ans.EndOffset, ownEnd)
		if view[i].Epoch == ans.Epoch {
			return CommonPoint{Offset: off, Epoch: epochBefore(view, off), Rounds: round}, nil
		}
		// We lack the source's epoch: cut to where our own epoch below it
		// ends and ask again with it.
		end = off
		view = trimEpochs(view[:i+1], end)
	}
}

// trimEpochs returns the entries that start below end.
func trimEpochs(es []EpochStart, end int64) []EpochStart {
	n := len(es)
	for n > 0 && es[n-1].StartOffset >= end {
		n--
	}
	return es[:n:n]
}

// epochBefore is the epoch of offset off-1 in es (-1 when none).
func epochBefore(es []EpochStart, off int64) int32 {
	for i := len(es) - 1; i >= 0; i-- {
		if es[i].StartOffset < off {
			return es[i].Epoch
		}
	}
	return -1
}

package replica

// One followed partition: its phase and the transitions the leader's
// answers cause (Kafka's AbstractFetcherThread partition states). Every
// change of the local replica happens here, under the partition's mutex,
// and only while the partition is still followed (gone false).

import (
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/verbatim-kafka/verbatim/client"
	"github.com/verbatim-kafka/verbatim/kbatch"
)

// phase is what a partition asks the leader next.
type phase uint8

const (
	// truncating: OffsetForLeaderEpoch for the replica's latest epoch.
	truncating phase = iota
	// outOfRange: the leader's log start and end (ListOffsets).
	outOfRange
	// fetching: Fetch from the log end with LastFetchedEpoch.
	fetching
	// fenced: the leader is at a newer epoch than ours; nothing is asked
	// until the next Follow brings it.
	fenced
)

func (ph phase) String() string {
	return [...]string{"truncating", "out-of-range", "fetching", "fenced"}[ph]
}

// partition is one followed partition in its fetcher.
type partition struct {
	tp    client.TopicPartition
	id    [16]byte
	epoch int32 // the leader epoch followed (CurrentLeaderEpoch)

	// mu is held while the replica changes; Unfollow and a replacing
	// Follow set gone under it, after which nothing changes the replica.
	mu    sync.Mutex
	gone  bool
	rep   Replica // nil until Host.Replica answers
	phase phase
	delay time.Time     // nothing is asked before
	wait  time.Duration // the last backoff (0: none since progress)
}

// firstWait is a partition's first backoff after progress.
const firstWait = 100 * time.Millisecond

// backOff delays p: 100 ms after progress, doubling on each further
// error up to limit (replica.fetch.backoff.ms).
func (p *partition) backOff(now time.Time, limit time.Duration) {
	if p.wait <= 0 {
		p.wait = firstWait
	} else {
		p.wait *= 2
	}
	p.wait = min(p.wait, limit)
	p.delay = now.Add(p.wait)
}

func newPartition(tp client.TopicPartition, id [16]byte, epoch int32) *partition {
	return &partition{tp: tp, id: id, epoch: epoch, phase: truncating}
}

// leave marks p no longer followed; it returns once no change of the
// replica is under way.
func (p *partition) leave() {
	p.mu.Lock()
	p.gone = true
	p.mu.Unlock()
}

// truncateTo applies the leader's end for an epoch (an OffsetForLeaderEpoch
// answer or a fetch's DivergingEpoch) as Kafka's follower does (KIP-101,
// KIP-279): to the smaller of the leader's end and ours for that epoch,
// and when the leader answered an epoch this replica does not have, to
// our end of the largest epoch below it, and ask again (done false).
func truncateTo(rep Replica, end client.EpochEnd) (done bool, err error) {
	leo := rep.LogEndOffset()
	to := leo
	done = true
	switch {
	case end.EndOffset < 0:
		// The leader knows no epoch this old: keep the log; a fetch
		// from its end is answered or goes out of range.
		return true, nil
	case end.LeaderEpoch < 0:
		to = min(end.EndOffset, leo)
	default:
		e, ours, err := rep.EndOffsetForEpoch(end.LeaderEpoch)
		if err != nil {
			return false, err
		}
		switch {
		case e < 0 || ours < 0:
			// We have nothing of that epoch or before.
			to = min(end.EndOffset, leo)
		case e != end.LeaderEpoch:
			to, done = min(ours, leo), false
		default:
			to = min(ours, end.EndOffset, leo)
		}
	}
	if to < leo {
		if err := rep.Truncate(to); err != nil {
			return false, err
		}
	}
	return done, nil
}

// resetOutOfRange handles OFFSET_OUT_OF_RANGE with the leader's log start
// and end (Kafka's fetchOffsetAndTruncate): a leader that ends below us
// (an unclean election) truncates us to its end; one that starts above our
// end empties the replica to start at its log start.
func resetOutOfRange(rep Replica, start, end int64) (changed bool, err error) {
	leo := rep.LogEndOffset()
	switch {
	case end < leo:
		return true, rep.Truncate(end)
	case start > leo:
		return true, rep.TruncateFullyAndStartAt(start)
	}
	return false, nil // the range moved meanwhile: fetch again
}

// wholeBatches is set without a partial trailing batch (a leader may cut
// the last batch at the partition's max bytes).
func wholeBatches(set []byte) []byte {
	it := kbatch.Batches(set)
	for it.Next() {
	}
	return set[:it.Pos()]
}

// errBelowEnd: the leader answered a batch that starts below our log end
// on a log that is not empty.
var errBelowEnd = errors.New("leader answered a batch below the replica's log end")

// appendAnswer stores one fetch answer: its whole batches, the leader's
// high watermark and log start (also when there are no records: they
// move the high watermark).
func appendAnswer(rep Replica, a client.FetchResult) error {
	set := wholeBatches(a.Records)
	if len(set) > 0 {
		end := rep.LogEndOffset()
		if base := kbatch.BaseOffset(set); base < end {
			// The leader's log start is inside its first batch
			// (DeleteRecords). An empty log starts again at the batch's
			// base, as Kafka's follower does; so does a log that holds
			// nothing at or above the leader's log start (all of it is
			// deleted on the leader), where Kafka's follower would stop
			// on the overlap.
			last := base + int64(kbatch.LastOffsetDelta(set))
			if last < end || (rep.LogStartOffset() != end && a.LogStart < end) {
				return fmt.Errorf("%w: batch %d-%d, log end %d", errBelowEnd, base, last, end)
			}
			if err := rep.TruncateFullyAndStartAt(base); err != nil {
				return err
			}
		}
	}
	return rep.Append(set, a.HighWatermark, a.LogStart)
}

// outcome is what a partition does after a leader's answer: go on in
// its (possibly new) phase, or wait out the backoff first.
type outcome uint8

const (
	goOn outcome = iota
	backOff
)

// onFetch applies a fetch answer for offset (the log end the request
// named) to p, which the caller holds; it returns backOff for an error
// worth waiting for, with the reason.
func (p *partition) onFetch(a client.FetchResult, offset int64) (outcome, error) {
	if p.rep.LogEndOffset() != offset {
		return goOn, nil // the replica moved since the request: ask again
	}
	switch {
	case a.Err == nil && a.DivergingEpoch.LeaderEpoch >= 0 && a.DivergingEpoch.EndOffset >= 0:
		done, err := truncateTo(p.rep, a.DivergingEpoch)
		if err != nil {
			return backOff, err
		}
		if !done {
			p.phase = truncating
		}
		if p.rep.LogEndOffset() == offset {
			// A divergence that truncates nothing would be answered
			// again at once: pace it.
			return backOff, fmt.Errorf("diverging epoch %d end %d truncates nothing at %d", a.DivergingEpoch.LeaderEpoch, a.DivergingEpoch.EndOffset, offset)
		}
		return goOn, nil
	case a.Err == nil:
		if err := appendAnswer(p.rep, a); err != nil {
			return backOff, err
		}
		return goOn, nil
	case errors.Is(a.Err, kerr.OffsetOutOfRange):
		p.phase = outOfRange
		return goOn, nil
	}
	return p.refused(a.Err)
}

// refused applies a leader's refusal err: FENCED_LEADER_EPOCH marks p
// fenced; UNKNOWN_LEADER_EPOCH (the leader is behind the election),
// NOT_LEADER_OR_FOLLOWER, UNKNOWN_TOPIC_OR_PARTITION and the rest back
// off: the metadata will catch up, or a Follow will move us.
func (p *partition) refused(err error) (outcome, error) {
	if errors.Is(err, kerr.FencedLeaderEpoch) {
		p.phase = fenced
		return goOn, err
	}
	return backOff, err
}

// onEpochEnd applies an OffsetForLeaderEpoch answer.
func (p *partition) onEpochEnd(a epochAnswer) (outcome, error) {
	if a.Err != nil {
		return p.refused(a.Err)
	}
	done, err := truncateTo(p.rep, a.End)
	if err != nil {
		return backOff, err
	}
	if done {
		p.phase = fetching
	}
	return goOn, nil
}

// onOffsets applies a ListOffsets answer after OFFSET_OUT_OF_RANGE.
func (p *partition) onOffsets(a offsetAnswer) (outcome, error) {
	if a.Err != nil {
		return p.refused(a.Err)
	}
	changed, err := resetOutOfRange(p.rep, a.Start, a.End)
	if err != nil {
		return backOff, err
	}
	p.phase = fetching
	if !changed {
		// Within the leader's range after all (it moved, or the leader
		// answers inconsistently): fetch again, paced.
		return backOff, fmt.Errorf("log end %d within the leader's [%d, %d] after OFFSET_OUT_OF_RANGE", p.rep.LogEndOffset(), a.Start, a.End)
	}
	return goOn, nil
}

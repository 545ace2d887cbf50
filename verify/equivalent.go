package verify

import (
	"context"
	"crypto/sha256"
	"fmt"
	"sort"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/verbatim-kafka/verbatim/client"
	"github.com/verbatim-kafka/verbatim/kbatch"
)

// CompactedEquivalent: both sides are compactions of one history (each
// cleaned its own log, as every Kafka replica does). The rule, over the
// common range:
//
//   - a record present on both sides at an offset is identical (key,
//     value, headers, timestamp, control flag) in a batch with the same
//     leader epoch, producer id and epoch, and both sides agree whether
//     its transaction was aborted;
//   - a record present on one side only has a later record with the same
//     key on that side, or its transaction was aborted there, or it is a
//     tombstone and neither side has a later live value for its key, or
//     it is a transaction marker or a keyless record (both of which a
//     cleaner removes);
//   - the latest value per key that a read_committed consumer reads is the
//     same on both sides (and the last stable offsets, compared with the
//     other ListOffsets views).
const CompactedEquivalent = "compacted-equivalent"

// sideBatch is one batch of a side with what its consumers make of it.
type sideBatch struct {
	b       []byte
	h       kbatch.Header
	aborted bool // a data batch of an aborted transaction
	recs    []record
}

// sideIter walks one side's batches over [from, to): read_committed up to
// its last stable offset (so the aborted lists come with the batches and
// are applied as a consumer applies them), read_uncommitted from there.
type sideIter struct {
	cn        *client.Conn
	topic     string
	part      int32
	lso, to   int64
	rc, ru    *batches
	pending   []kmsg.FetchResponseTopicPartitionAbortedTransaction
	taken     int
	abortedBy map[int64]bool // producers inside an aborted transaction
}

func newSideIter(cn *client.Conn, topic string, part int32, from, to, lso int64) *sideIter {
	return &sideIter{cn: cn, topic: topic, part: part, lso: min(max(lso, from), to), to: to,
		rc: newBatches(cn, topic, part, from, min(max(lso, from), to), client.ReadCommitted), abortedBy: map[int64]bool{}}
}

// Next returns the next batch, decoded, or nil at the end.
func (it *sideIter) Next(ctx context.Context) (*sideBatch, error) {
	var b []byte
	var err error
	if it.ru == nil {
		if b, err = it.rc.Next(ctx); err != nil {
			return nil, err
		}
		if b == nil {
			it.ru = newBatches(it.cn, it.topic, it.part, it.lso, it.to, client.ReadUncommitted)
		}
	}
	if b == nil {
		if b, err = it.ru.Next(ctx); err != nil || b == nil {
			return nil, err
		}
	}
	h, err := kbatch.ParseHeader(b)
	if err != nil {
		return nil, fmt.Errorf("batch at %d: %v", baseOffset(b), err)
	}
	sb := &sideBatch{b: b, h: h}
	// The aborted lists as a consumer applies them (abortedData, one
	// batch at a time).
	if len(it.rc.aborted) > it.taken {
		it.pending = append(it.pending, it.rc.aborted[it.taken:]...)
		it.taken = len(it.rc.aborted)
		sort.Slice(it.pending, func(i, j int) bool { return it.pending[i].FirstOffset < it.pending[j].FirstOffset })
	}
	for len(it.pending) > 0 && it.pending[0].FirstOffset <= h.LastOffset() {
		it.abortedBy[it.pending[0].ProducerID] = true
		it.pending = it.pending[1:]
	}
	if h.IsTransactional() {
		if h.IsControl() {
			if typ, ok := kbatch.ControlType(b); ok && typ == kbatch.ControlAbort {
				delete(it.abortedBy, h.ProducerID)
			}
		} else {
			sb.aborted = it.abortedBy[h.ProducerID]
		}
	}
	if sb.recs, err = decodeRecords(b); err != nil {
		return nil, fmt.Errorf("%s", unreadable(b, err))
	}
	return sb, nil
}

// keyState is what one side's log says of a key: its last record's
// offset, the offset of its last live (non-null) value and that value's
// digest.
type keyState struct {
	last, lastLive int64
	live           [sha256.Size]byte
	deleted        bool // the last record is a tombstone
}

// sideKeys walks a side once and returns its keys' states (aborted data
// and markers excepted).
func (v *partitionCheck) sideKeys(ctx context.Context, cn *client.Conn, from, to, lso int64) (map[string]*keyState, error) {
	it := newSideIter(cn, v.topic, v.part, from, to, lso)
	keys := map[string]*keyState{}
	for {
		sb, err := it.Next(ctx)
		if err != nil || sb == nil {
			return keys, err
		}
		if sb.aborted || sb.h.IsControl() {
			continue
		}
		for _, r := range sb.recs {
			if r.rec.Key == nil {
				continue
			}
			ks := keys[string(r.rec.Key)]
			if ks == nil {
				ks = &keyState{lastLive: -1}
				keys[string(r.rec.Key)] = ks
			}
			ks.last, ks.deleted = r.offset, r.rec.Value == nil
			if r.rec.Value != nil {
				ks.lastLive, ks.live = r.offset, sha256.Sum256(r.rec.Value)
			}
		}
	}
}

// equivalent checks the compacted-equivalent rule over [from, to), with
// each side's last stable offset.
func (v *partitionCheck) equivalent(ctx context.Context, from, to, srcLSO, dstLSO int64) error {
	v.rep.Batches, v.rep.Bytes = 0, 0
	v.rep.Status, v.rep.FirstMismatch = Identical, nil
	v.sampleTimes = nil
	v.compactedSince, v.equiv = true, true
	v.rep.Checks = append(v.rep.Checks, "compacted_equivalent")
	sk, err := v.sideKeys(ctx, v.sc, from, to, srcLSO)
	if err != nil {
		return fmt.Errorf("source: %w", err)
	}
	dk, err := v.sideKeys(ctx, v.dc, from, to, dstLSO)
	if err != nil {
		return fmt.Errorf("destination: %w", err)
	}
	si := newSideIter(v.sc, v.topic, v.part, from, to, srcLSO)
	di := newSideIter(v.dc, v.topic, v.part, from, to, dstLSO)
	var s, d *sideBatch
	var sr, dr []record // the current batches' records not yet compared
	sDone, dDone := false, false
	for {
		if len(sr) == 0 && !sDone {
			if s, err = si.Next(ctx); err != nil {
				return fmt.Errorf("source: %w", err)
			}
			if sDone = s == nil; !sDone {
				sr = s.recs
				v.note(s.b)
			}
		}
		if len(dr) == 0 && !dDone {
			if d, err = di.Next(ctx); err != nil {
				return fmt.Errorf("destination: %w", err)
			}
			if dDone = d == nil; !dDone {
				dr = d.recs
				v.note(d.b)
				v.rep.Batches++
				v.rep.Bytes += int64(len(d.b))
			}
		}
		if len(sr) == 0 && len(dr) == 0 {
			if sDone && dDone {
				break
			}
			continue
		}
		switch {
		case len(sr) > 0 && len(dr) > 0 && sr[0].offset == dr[0].offset:
			if f := diffInBatch(s, d, sr[0], dr[0]); f != "" {
				v.mismatch(sr[0].offset, f, "record at offset %d differs (%s): source %s, destination %s", sr[0].offset, f, describe(s.b), describe(d.b))
				return nil
			}
			sr, dr = sr[1:], dr[1:]
		case len(dr) == 0 || (len(sr) > 0 && sr[0].offset < dr[0].offset):
			if why := oneSided(s, sr[0], sk, dk); why != "" {
				v.mismatch(sr[0].offset, "record_missing", "the destination has no record at offset %d, which the source holds (%s)", sr[0].offset, why)
				return nil
			}
			sr = sr[1:]
		default:
			if why := oneSided(d, dr[0], dk, sk); why != "" {
				v.mismatch(dr[0].offset, "record_missing", "the source has no record at offset %d, which the destination holds (%s)", dr[0].offset, why)
				return nil
			}
			dr = dr[1:]
		}
	}
	return v.compareLatest(sk, dk)
}

// diffInBatch names the first difference of a record present on both
// sides: its batch's leader epoch, producer and transactional bits, the
// consumer's view of its transaction, then the record itself.
func diffInBatch(s, d *sideBatch, sr, dr record) string {
	const bits = kbatch.TransactionalBit | kbatch.ControlBit | kbatch.TimestampTypeBit
	switch {
	case s.h.LeaderEpoch != d.h.LeaderEpoch:
		return "partition_leader_epoch"
	case s.h.ProducerID != d.h.ProducerID:
		return "producer_id"
	case s.h.ProducerEpoch != d.h.ProducerEpoch:
		return "producer_epoch"
	case s.h.Attributes&bits != d.h.Attributes&bits:
		return "attributes"
	case s.aborted != d.aborted:
		return "aborted_transactions"
	}
	return diffRecord(sr, dr)
}

// oneSided returns "" when a record one side holds and the other does not
// is explained by compaction, else why it is not.
func oneSided(b *sideBatch, r record, own, other map[string]*keyState) string {
	switch {
	case b.aborted, r.control, r.rec.Key == nil:
		return ""
	}
	k := string(r.rec.Key)
	if ks := own[k]; ks != nil && ks.last > r.offset {
		return ""
	}
	if r.rec.Value == nil {
		if o := other[k]; o == nil || o.lastLive <= r.offset {
			return ""
		}
		return "a tombstone whose key has a later live value on the other side"
	}
	return "its key has no later record on that side"
}

// compareLatest compares the latest value per key read_committed
// consumers read on each side.
func (v *partitionCheck) compareLatest(sk, dk map[string]*keyState) error {
	v.rep.Checks = append(v.rep.Checks, "latest_value_per_key")
	keys := make([]string, 0, len(sk)+len(dk))
	for k := range sk {
		keys = append(keys, k)
	}
	for k := range dk {
		if sk[k] == nil {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	live := func(ks *keyState) bool { return ks != nil && !ks.deleted }
	for _, k := range keys {
		s, d := sk[k], dk[k]
		switch {
		case !live(s) && !live(d):
		case live(s) != live(d) || s.live != d.live || s.lastLive != d.lastLive:
			off := int64(-1)
			if live(s) {
				off = s.lastLive
			}
			if live(d) && d.lastLive > off {
				off = d.lastLive
			}
			v.mismatch(off, "latest_value", "key %q: the source's latest value is %s, the destination's %s", k, latestDesc(s), latestDesc(d))
			return nil
		}
	}
	return nil
}

func latestDesc(ks *keyState) string {
	switch {
	case ks == nil:
		return "absent"
	case ks.deleted:
		return fmt.Sprintf("a tombstone at offset %d", ks.last)
	}
	return fmt.Sprintf("the value at offset %d", ks.lastLive)
}

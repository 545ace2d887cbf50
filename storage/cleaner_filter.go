package storage

import (
	"errors"
	"fmt"
	"io"
	"sort"

	"github.com/verbatim-kafka/verbatim/kbatch"
)

// What the cleaner keeps of each batch (Kafka's Cleaner.cleanInto with
// MemoryRecords.filterTo and CleanedTransactionMetadata).

// ErrUncleanable is wrapped by the error of a clean that met a batch it
// cannot decode; the log is then marked uncleanable (Kafka's
// uncleanable partitions) until it is reopened.
var ErrUncleanable = errors.New("storage: partition uncleanable")

// lastProducerBatch is what the cleaner keeps per active producer so that
// producer state survives: the last offset of its last data batch (-1
// when its last entry is a marker) and its epoch.
type lastProducerBatch struct {
	lastDataOffset int64
	epoch          int16
}

// abortedMeta tracks an aborted transaction met while cleaning a group.
type abortedMeta struct {
	txn          AbortedTxn
	lastObserved int64 // last offset of a batch of it seen, -1 when none
}

// txnTracker is Kafka's CleanedTransactionMetadata for one group: the
// aborted transactions overlapping it (by first offset), those ongoing at
// the current batch, the producers with committed data seen since their
// last marker, and the transaction index of the cleaned segment.
type txnTracker struct {
	aborted          []AbortedTxn
	next             int
	ongoingAborted   map[int64]*abortedMeta
	ongoingCommitted map[int64]bool
	cleanedIndex     []AbortedTxn
}

func newTxnTracker(aborted []AbortedTxn) *txnTracker {
	sort.SliceStable(aborted, func(i, j int) bool { return aborted[i].FirstOffset < aborted[j].FirstOffset })
	return &txnTracker{aborted: aborted, ongoingAborted: map[int64]*abortedMeta{}, ongoingCommitted: map[int64]bool{}}
}

func (t *txnTracker) consumeUpTo(offset int64) {
	for t.next < len(t.aborted) && t.aborted[t.next].FirstOffset <= offset {
		a := t.aborted[t.next]
		if _, ok := t.ongoingAborted[a.ProducerID]; !ok {
			t.ongoingAborted[a.ProducerID] = &abortedMeta{txn: a, lastObserved: -1}
		}
		t.next++
	}
}

// onBatch reports whether a data batch belongs to an aborted transaction
// (its records go).
func (t *txnTracker) onBatch(h *kbatch.Header) bool {
	t.consumeUpTo(h.LastOffset())
	if !h.IsTransactional() {
		return false
	}
	if m, ok := t.ongoingAborted[h.ProducerID]; ok {
		m.lastObserved = h.LastOffset()
		return true
	}
	t.ongoingCommitted[h.ProducerID] = true
	return false
}

// onControl reports whether a marker may be discarded (once its delete
// horizon passed): an ABORT whose transaction has no batch left in this
// group, a COMMIT whose transaction had no batch in it. An ABORT marker
// kept because data remains keeps its transaction index entry.
func (t *txnTracker) onControl(h *kbatch.Header, typ int16) bool {
	t.consumeUpTo(h.LastOffset())
	switch typ {
	case kbatch.ControlAbort:
		m, ok := t.ongoingAborted[h.ProducerID]
		delete(t.ongoingAborted, h.ProducerID)
		if ok && m.lastObserved >= 0 {
			t.cleanedIndex = append(t.cleanedIndex, m.txn)
			return false
		}
		return true
	case kbatch.ControlCommit:
		seen := t.ongoingCommitted[h.ProducerID]
		delete(t.ongoingCommitted, h.ProducerID)
		return !seen
	}
	return false
}

// batchFilter decides record by record, for one clean.
type batchFilter struct {
	m            *offsetMap
	nowMs        int64
	deleteRetain int64 // delete.retention.ms
	producers    map[int64]lastProducerBatch
	lim          kbatch.Limits
	recs         []kbatch.Record // scratch
	stats        *CleanStats
}

// retainRecord is Kafka's Cleaner.shouldRetainRecord for a v2 batch.
func (f *batchFilter) retainRecord(h *kbatch.Header, offset int64, key []byte, hasValue bool) bool {
	if offset > f.m.latest {
		return true // beyond the map: not deduplicated in this clean
	}
	if key == nil {
		return false // a keyless record on a compacted topic is invalid
	}
	if offset < f.m.get(key) {
		return false // a later record has the key
	}
	return hasValue || !h.HasDeleteHorizon() || f.nowMs < h.BaseTimestamp
}

func (f *batchFilter) lastOfProducer(h *kbatch.Header) bool {
	p, ok := f.producers[h.ProducerID]
	if !ok {
		return false
	}
	if p.lastDataOffset >= 0 {
		return h.LastOffset() == p.lastDataOffset
	}
	return h.IsControl() && h.ProducerEpoch == p.epoch
}

// filter appends to dst what the cleaner keeps of batch b: b itself when
// nothing is dropped and no delete horizon must be set, a re-encoded batch
// of the kept records (same offsets, leader epoch, producer fields, codec
// and last offset delta; record timestamps unchanged), an empty batch when
// every record goes but the batch is its producer's last, or nothing.
func (f *batchFilter) filter(dst, b []byte, t *txnTracker) ([]byte, error) {
	h, _ := kbatch.ParseHeader(b)
	canDiscard, discardRecords := false, false
	if h.IsControl() {
		ctl, err := ParseControlBatch(b)
		if err != nil {
			return dst, err
		}
		typ := ctl.Type
		if !ctl.Present {
			typ = -1
		}
		canDiscard = t.onControl(&h, typ)
		discardRecords = canDiscard && h.HasDeleteHorizon() && h.BaseTimestamp <= f.nowMs
	} else {
		canDiscard = t.onBatch(&h)
		discardRecords = canDiscard
	}
	retainEmpty := h.HasProducerID() && f.lastOfProducer(&h)
	if !retainEmpty && discardRecords {
		f.stats.BatchesDropped++
		return dst, nil // Kafka's BatchRetention.DELETE
	}
	rr, err := kbatch.NewRecordReader(b, f.lim)
	if err != nil {
		return dst, err
	}
	defer rr.Close()
	f.recs = f.recs[:0]
	all, tombstones := true, false
	for {
		info, err := rr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return dst, err
		}
		f.stats.RecordsRead++
		rec, err := rr.Record()
		if err != nil {
			return dst, err
		}
		keep := !discardRecords
		if keep && !h.IsControl() {
			keep = f.retainRecord(&h, h.BaseOffset+int64(info.OffsetDelta), rec.Key, rec.Value != nil)
		}
		if !keep {
			all = false
			continue
		}
		if rec.Value == nil {
			tombstones = true
		}
		f.recs = append(f.recs, copyRecord(rec))
	}
	f.stats.RecordsKept += int64(len(f.recs))
	needHorizon := (tombstones || (h.IsControl() && canDiscard)) && !h.HasDeleteHorizon()
	if all && !needHorizon {
		return append(dst, b...), nil
	}
	if len(f.recs) == 0 {
		if !retainEmpty {
			f.stats.BatchesDropped++
			return dst, nil
		}
		return appendEmptyBatch(dst, &h)
	}
	horizon := int64(-1)
	if needHorizon {
		horizon = f.nowMs + f.deleteRetain
	} else if h.HasDeleteHorizon() {
		horizon = h.BaseTimestamp
	}
	return appendRetained(dst, &h, f.recs, horizon)
}

func copyRecord(r kbatch.Record) kbatch.Record {
	out := kbatch.Record{Attributes: r.Attributes, TimestampDelta: r.TimestampDelta, OffsetDelta: r.OffsetDelta}
	if r.Key != nil {
		out.Key = append([]byte{}, r.Key...)
	}
	if r.Value != nil {
		out.Value = append([]byte{}, r.Value...)
	}
	if len(r.Headers) > 0 {
		out.Headers = make([]kbatch.RecordHeader, len(r.Headers))
		for i, hd := range r.Headers {
			out.Headers[i].Key = hd.Key
			if hd.Value != nil {
				out.Headers[i].Value = append([]byte{}, hd.Value...)
			}
		}
	}
	return out
}

// appendRetained re-encodes the kept records of h's batch as Kafka's
// buildRetainedRecordsInto does: same base offset, leader epoch, producer
// id, epoch and base sequence, transactional and control bits, timestamp
// type and codec; the original last offset delta (so the producer's last
// sequence survives); the base timestamp is the delete horizon when one is
// set (attribute bit 6), else the first kept record's timestamp, and the
// record timestamps are unchanged (deltas recomputed). The max timestamp is
// the kept records' (the batch's own under LogAppendTime).
func appendRetained(dst []byte, h *kbatch.Header, recs []kbatch.Record, horizon int64) ([]byte, error) {
	oldBase := h.BaseTimestamp
	attrs := h.Attributes &^ kbatch.DeleteHorizonBit
	base := oldBase + recs[0].TimestampDelta
	if horizon >= 0 {
		attrs |= kbatch.DeleteHorizonBit
		base = horizon
	}
	maxTs := int64(-1)
	for i := range recs {
		ts := oldBase + recs[i].TimestampDelta
		maxTs = max(maxTs, ts)
		recs[i].TimestampDelta = ts - base
	}
	if h.LogAppendTime() {
		maxTs = h.MaxTimestamp
	}
	if maxTs == -1 {
		maxTs = -2 // kbatch.Encode derives the max from -1; keep "none" explicit below
	}
	out, err := kbatch.Encode(kbatch.Batch{
		BaseOffset: h.BaseOffset, LeaderEpoch: h.LeaderEpoch, Attributes: attrs,
		LastOffsetDelta: h.LastOffsetDelta, BaseTimestamp: base, MaxTimestamp: maxTs,
		ProducerID: h.ProducerID, ProducerEpoch: h.ProducerEpoch, BaseSequence: h.BaseSequence,
		Records: recs,
	})
	if err != nil {
		return dst, fmt.Errorf("storage: re-encoding batch at %d: %w", h.BaseOffset, err)
	}
	if maxTs == -2 {
		kbatch.SetMaxTimestamp(out, -1)
		kbatch.SetCRC(out)
	}
	return append(dst, out...), nil
}

// appendEmptyBatch writes Kafka's empty batch header for a batch kept only
// for its producer (DefaultRecordBatch.writeEmptyHeader): no records, no
// codec, base and max timestamp the batch's max timestamp, the original
// offsets and producer fields.
func appendEmptyBatch(dst []byte, h *kbatch.Header) ([]byte, error) {
	attrs := h.Attributes & (kbatch.TimestampTypeBit | kbatch.TransactionalBit | kbatch.ControlBit)
	out, err := kbatch.Encode(kbatch.Batch{
		BaseOffset: h.BaseOffset, LeaderEpoch: h.LeaderEpoch, Attributes: attrs,
		LastOffsetDelta: h.LastOffsetDelta, BaseTimestamp: h.MaxTimestamp, MaxTimestamp: h.MaxTimestamp,
		ProducerID: h.ProducerID, ProducerEpoch: h.ProducerEpoch, BaseSequence: h.BaseSequence,
	})
	if err != nil {
		return dst, err
	}
	if h.MaxTimestamp == -1 {
		kbatch.SetMaxTimestamp(out, -1)
		kbatch.SetCRC(out)
	}
	return append(dst, out...), nil
}

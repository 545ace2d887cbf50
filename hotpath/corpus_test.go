package hotpath

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/verbatim-kafka/verbatim/kbatch"
	"github.com/verbatim-kafka/verbatim/kbatch/kbatchtest"
)

// The corpus: every batch shape a Kafka 4 log can hold, built with
// kbatch.Encode (every codec; plain, idempotent and transactional data;
// LogAppendTime; compacted with gaps; empty; delete horizon; COMMIT/ABORT
// markers including transaction-version-2 ones; MIRROR_PID_RESET; empty
// control batches). Until captured Kafka 4.4 segments are available from the
// interop harness, this is what verbatim mode is proven against.

type corpusEntry struct {
	name string
	b    []byte
	// client reports a shape a producer may send (base offset 0, dense
	// offsets, no control): normal mode must accept it too.
	client bool
}

const corpusNowMs = int64(1_764_000_000_000)

func testRecords(n, valueSize int, keyed bool) []kbatch.Record {
	recs := make([]kbatch.Record, n)
	for i := range recs {
		v := bytes.Repeat([]byte{byte('a' + i%26)}, valueSize)
		r := kbatch.Record{TimestampDelta: int64(i), OffsetDelta: int32(i), Value: v}
		if keyed {
			r.Key = []byte(fmt.Sprintf("key-%d", i))
		}
		if i%3 == 1 {
			r.Headers = []kbatch.RecordHeader{{Key: "h", Value: []byte("v")}, {Key: "null"}}
		}
		recs[i] = r
	}
	return recs
}

func controlRecord(typ int16, value []byte) kbatch.Record {
	return kbatch.Record{Key: kbatch.ControlKey(typ), Value: value}
}

func buildCorpus(tb testing.TB) []corpusEntry {
	tb.Helper()
	var out []corpusEntry
	add := func(name string, client bool, b kbatch.Batch) {
		out = append(out, corpusEntry{name: name, b: kbatchtest.Encode(tb, b), client: client})
	}
	codecs := []kbatch.Codec{kbatch.CodecNone, kbatch.CodecGzip, kbatch.CodecSnappy, kbatch.CodecLZ4, kbatch.CodecZstd}
	for _, c := range codecs {
		attrs := int16(c)
		b := kbatch.NewBatch(corpusNowMs, testRecords(5, 100, true)...)
		b.Attributes = attrs
		add("plain-"+c.String(), true, b)

		b = kbatch.NewBatch(corpusNowMs, testRecords(3, 10, false)...)
		b.Attributes = attrs
		b.ProducerID, b.ProducerEpoch, b.BaseSequence = 4000, 2, 17
		add("idempotent-"+c.String(), true, b)

		b = kbatch.NewBatch(corpusNowMs, testRecords(4, 50, true)...)
		b.Attributes = attrs | kbatch.TransactionalBit
		b.ProducerID, b.ProducerEpoch, b.BaseSequence = 4001, 0, 0
		add("transactional-"+c.String(), true, b)

		// Compaction kept offsets 0, 2 and 7 of 0..9.
		recs := testRecords(3, 20, true)
		recs[1].OffsetDelta, recs[2].OffsetDelta = 2, 7
		b = kbatch.NewBatch(corpusNowMs, recs...)
		b.Attributes = attrs
		b.LastOffsetDelta = 9
		add("compacted-"+c.String(), false, b)

		b = kbatch.NewBatch(corpusNowMs, testRecords(2, 20, true)...)
		b.Attributes = attrs | kbatch.DeleteHorizonBit
		b.BaseTimestamp = corpusNowMs + 86_400_000
		b.MaxTimestamp = corpusNowMs
		add("delete-horizon-"+c.String(), false, b)

		b = kbatch.NewBatch(corpusNowMs, testRecords(2, 20, false)...)
		b.Attributes = attrs | kbatch.TimestampTypeBit
		b.MaxTimestamp = corpusNowMs + 5
		add("log-append-time-"+c.String(), false, b)
	}

	// Compaction removed every record; the batch stays for producer state.
	b := kbatch.NewBatch(corpusNowMs)
	b.LastOffsetDelta = 4
	b.ProducerID, b.ProducerEpoch, b.BaseSequence = 4002, 1, 30
	add("empty", false, b)

	b = kbatch.NewBatch(corpusNowMs)
	b.Attributes = kbatch.TransactionalBit | kbatch.DeleteHorizonBit
	b.LastOffsetDelta = 2
	b.ProducerID, b.ProducerEpoch, b.BaseSequence = 4003, 1, 0
	add("empty-transactional-delete-horizon", false, b)

	for _, m := range []struct {
		name  string
		typ   int16
		epoch int16
	}{{"commit", kbatch.ControlCommit, 0}, {"abort", kbatch.ControlAbort, 0}, {"commit-tv2", kbatch.ControlCommit, 6}} {
		b = kbatch.NewBatch(corpusNowMs, controlRecord(m.typ, kbatch.EndTxnMarkerValue(3)))
		b.Attributes = kbatch.TransactionalBit | kbatch.ControlBit
		b.ProducerID, b.ProducerEpoch, b.BaseSequence = 4001, m.epoch, -1
		add("marker-"+m.name, false, b)
	}
	// A later marker value version with an extra field must still pass.
	b = kbatch.NewBatch(corpusNowMs, controlRecord(kbatch.ControlAbort, append([]byte{0, 1, 0, 0, 0, 9}, 0, 0)))
	b.Attributes = kbatch.TransactionalBit | kbatch.ControlBit
	b.ProducerID, b.ProducerEpoch, b.BaseSequence = 4001, 7, -1
	add("marker-value-v1", false, b)

	b = kbatch.NewBatch(corpusNowMs)
	b.Attributes = kbatch.TransactionalBit | kbatch.ControlBit | kbatch.DeleteHorizonBit
	b.LastOffsetDelta = 0
	b.ProducerID, b.ProducerEpoch, b.BaseSequence = 4001, 0, -1
	add("marker-compacted-away", false, b)

	b = kbatch.NewBatch(corpusNowMs, controlRecord(kbatch.ControlMirrorPidReset, kbatch.MirrorPidResetValue("src-cluster-1")))
	b.Attributes = kbatch.ControlBit
	add("mirror-pid-reset", false, b)

	// Group coordinator writes transactional offset commits without a
	// sequence; they exist in real logs.
	b = kbatch.NewBatch(corpusNowMs, testRecords(1, 8, true)...)
	b.Attributes = kbatch.TransactionalBit
	b.ProducerID, b.ProducerEpoch, b.BaseSequence = 4004, 0, -1
	add("transactional-no-sequence", false, b)
	return out
}

// withBase returns a copy of batch with its base offset and leader epoch set
// (both outside the CRC).
func withBase(batch []byte, base int64, epoch int32) []byte {
	c := append([]byte(nil), batch...)
	kbatch.SetBaseOffset(c, base)
	kbatch.SetLeaderEpoch(c, epoch)
	return c
}

// verbatimSet lays corpus batches back to back at increasing offsets with a
// gap between them, as a compacted source log looks.
func verbatimSet(entries []corpusEntry, start int64) []byte {
	var set []byte
	off := start
	for i, e := range entries {
		b := withBase(e.b, off, int32(i/4))
		set = append(set, b...)
		off += int64(kbatch.LastOffsetDelta(b)) + 1 + int64(i%2)
	}
	return set
}

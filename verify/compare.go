package verify

import (
	"bytes"
	"fmt"
	"sort"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/verbatim-kafka/verbatim/kbatch"
)

func baseOffset(b []byte) int64 { return kbatch.BaseOffset(b) }

// headerFields are the v2 batch header fields in wire order, with the
// name verify reports for a difference.
var headerFields = []struct {
	name     string
	from, to int
}{
	{"base_offset", kbatch.BaseOffsetOffset, kbatch.LengthOffset},
	{"batch_length", kbatch.LengthOffset, kbatch.LeaderEpochOffset},
	{"partition_leader_epoch", kbatch.LeaderEpochOffset, kbatch.MagicOffset},
	{"magic", kbatch.MagicOffset, kbatch.CRCOffset},
	{"attributes", kbatch.AttributesOffset, kbatch.LastOffsetDeltaOffset},
	{"last_offset_delta", kbatch.LastOffsetDeltaOffset, kbatch.BaseTimestampOffset},
	{"base_timestamp", kbatch.BaseTimestampOffset, kbatch.MaxTimestampOffset},
	{"max_timestamp", kbatch.MaxTimestampOffset, kbatch.ProducerIDOffset},
	{"producer_id", kbatch.ProducerIDOffset, kbatch.ProducerEpochOffset},
	{"producer_epoch", kbatch.ProducerEpochOffset, kbatch.BaseSequenceOffset},
	{"base_sequence", kbatch.BaseSequenceOffset, kbatch.RecordCountOffset},
	{"record_count", kbatch.RecordCountOffset, kbatch.HeaderSize},
}

// diffBatch names the first field in which two batches differ ("" when
// they are byte-identical). Header fields are compared in wire order
// (except the CRC), then the records, then the CRC, which only
// summarises the others.
func diffBatch(src, dst []byte) string {
	if bytes.Equal(src, dst) {
		return ""
	}
	if len(src) < kbatch.HeaderSize || len(dst) < kbatch.HeaderSize {
		return "batch_length"
	}
	for _, f := range headerFields {
		if !bytes.Equal(src[f.from:f.to], dst[f.from:f.to]) {
			return f.name
		}
	}
	if !bytes.Equal(src[kbatch.HeaderSize:], dst[kbatch.HeaderSize:]) {
		return "records"
	}
	return "crc"
}

// record is one record with its absolute offset and timestamp.
type record struct {
	offset    int64
	timestamp int64
	control   bool
	rec       kbatch.Record
}

// decodeRecords returns a batch's records with absolute offsets and
// timestamps (LogAppendTime batches: every record has MaxTimestamp).
func decodeRecords(b []byte) ([]record, error) {
	h, err := kbatch.ParseHeader(b)
	if err != nil {
		return nil, err
	}
	recs, err := kbatch.Records(b)
	if err != nil {
		return nil, err
	}
	out := make([]record, len(recs))
	for i, r := range recs {
		ts := h.BaseTimestamp + r.TimestampDelta
		if h.LogAppendTime() {
			ts = h.MaxTimestamp
		}
		out[i] = record{offset: h.BaseOffset + int64(r.OffsetDelta), timestamp: ts, control: h.IsControl(), rec: r}
	}
	return out, nil
}

// diffRecord names the first field in which two records differ.
func diffRecord(s, d record) string {
	switch {
	case s.control != d.control:
		return "record.control"
	case !bytes.Equal(s.rec.Key, d.rec.Key) || (s.rec.Key == nil) != (d.rec.Key == nil):
		return "record.key"
	case !bytes.Equal(s.rec.Value, d.rec.Value) || (s.rec.Value == nil) != (d.rec.Value == nil):
		return "record.value"
	case len(s.rec.Headers) != len(d.rec.Headers):
		return "record.headers"
	case s.timestamp != d.timestamp:
		return "record.timestamp"
	}
	for i := range s.rec.Headers {
		sh, dh := s.rec.Headers[i], d.rec.Headers[i]
		if sh.Key != dh.Key || !bytes.Equal(sh.Value, dh.Value) || (sh.Value == nil) != (dh.Value == nil) {
			return "record.headers"
		}
	}
	return ""
}

// abortedRange is one run of a producer's transactional data that a
// read_committed consumer drops.
type abortedRange struct {
	pid         int64
	first, last int64
}

func (a abortedRange) String() string {
	return fmt.Sprintf("producer %d offsets %d-%d", a.pid, a.first, a.last)
}

// abortedData applies a read_committed response's aborted-transaction
// list to its batches as a consumer does, and returns which producer's
// data at which offsets is aborted: the meaning of the list, which is
// what must agree (the lists themselves may be cut differently).
func abortedData(bs [][]byte, list []kmsg.FetchResponseTopicPartitionAbortedTransaction) []abortedRange {
	l := append([]kmsg.FetchResponseTopicPartitionAbortedTransaction(nil), list...)
	sort.Slice(l, func(i, j int) bool { return l[i].FirstOffset < l[j].FirstOffset })
	active := map[int64]bool{}
	var out []abortedRange
	for _, b := range bs {
		h, err := kbatch.ParseHeader(b)
		if err != nil {
			continue
		}
		last := h.LastOffset()
		for len(l) > 0 && l[0].FirstOffset <= last {
			active[l[0].ProducerID] = true
			l = l[1:]
		}
		if !h.IsTransactional() {
			continue
		}
		if h.IsControl() {
			if typ, ok := kbatch.ControlType(b); ok && typ == 0 {
				delete(active, h.ProducerID)
			}
			continue
		}
		if active[h.ProducerID] {
			out = append(out, abortedRange{pid: h.ProducerID, first: h.BaseOffset, last: last})
		}
	}
	return out
}

package verify

import (
	"bytes"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/verbatim-kafka/verbatim/kbatch"
	"github.com/verbatim-kafka/verbatim/mirror"
)

func fuzzBatch(base int64, txn bool) []byte {
	b := kbatch.NewBatch(1000, kbatch.Record{Key: []byte("k"), Value: []byte("v"), Headers: []kbatch.RecordHeader{{Key: "h"}}})
	b.BaseOffset = base
	if txn {
		b.Attributes, b.ProducerID, b.ProducerEpoch, b.BaseSequence = kbatch.TransactionalBit, 5, 0, 0
	}
	out, err := kbatch.Encode(b)
	if err != nil {
		panic(err)
	}
	return out
}

// FuzzCompare: verify's comparisons accept any bytes a broker could send:
// no panic, a batch always equals itself, and decoded records compare
// equal to themselves.
func FuzzCompare(f *testing.F) {
	a, b := fuzzBatch(0, false), fuzzBatch(1, true)
	f.Add(a, b, int64(0))
	f.Add(append(a, b...), b, int64(5))
	f.Add(a[:40], a, int64(-1))
	f.Fuzz(func(t *testing.T, s, d []byte, first int64) {
		if diffBatch(s, s) != "" {
			t.Fatal("a batch differs from itself")
		}
		_ = diffBatch(s, d)
		bs, _, err := splitRecordSet(s, -1)
		if err != nil {
			return
		}
		for _, b := range bs {
			recs, err := decodeRecords(b)
			if err != nil {
				continue
			}
			for _, r := range recs {
				if f := diffRecord(r, r); f != "" {
					t.Fatalf("record differs from itself in %s", f)
				}
			}
		}
		_ = abortedData(bs, []kmsg.FetchResponseTopicPartitionAbortedTransaction{{ProducerID: 5, FirstOffset: first}})
	})
}

// FuzzSplitRecordSet: whatever a broker sends, splitRecordSet never
// panics, returns only whole v2 batches ending at or after from, in order,
// and agrees with the pusher's own splitter (an independent
// implementation) on the batches and on whether the set was cut.
func FuzzSplitRecordSet(f *testing.F) {
	a, b := fuzzBatch(0, false), fuzzBatch(1, true)
	set := append(append([]byte{}, a...), b...)
	f.Add(set, int64(0))
	f.Add(set[:len(set)-7], int64(1))
	f.Add(set, int64(1))
	f.Add([]byte{}, int64(0))
	f.Fuzz(func(t *testing.T, set []byte, from int64) {
		bs, partial, err := splitRecordSet(set, from)
		mbs, _, mpartial, merr := mirror.Split(set, from)
		if (err == nil) != (merr == nil) {
			t.Fatalf("verify's split error %v, the pusher's %v", err, merr)
		}
		if err != nil {
			return
		}
		if partial != mpartial || len(bs) != len(mbs) {
			t.Fatalf("verify's split: %d batches partial %v; the pusher's: %d partial %v", len(bs), partial, len(mbs), mpartial)
		}
		for i, b := range bs {
			if !bytes.Equal(b, mbs[i]) {
				t.Fatalf("batch %d differs between the splitters", i)
			}
			if len(b) < kbatch.HeaderSize || kbatch.Magic(b) != 2 || batchLastOffset(b) < from || int(kbatch.Length(b))+kbatch.LogOverhead != len(b) {
				t.Fatalf("bad batch returned: %d bytes", len(b))
			}
		}
	})
}

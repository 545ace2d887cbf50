package abi

import (
	"bytes"
	"errors"
	"testing"

	"github.com/verbatim-kafka/verbatim/kbatch"
	"github.com/verbatim-kafka/verbatim/kbatch/kbatchtest"
)

func testSet(t testing.TB) []byte {
	data := kbatch.NewBatch(1000, kbatch.Record{Key: []byte("k"), Value: []byte("v")})
	data.BaseOffset, data.LeaderEpoch = 10, 3
	ctl := kbatch.NewBatch(1001, kbatch.Record{Key: kbatch.ControlKey(kbatch.ControlCommit), Value: kbatch.EndTxnMarkerValue(4)})
	ctl.BaseOffset, ctl.LeaderEpoch = 11, 4
	ctl.Attributes = kbatch.ControlBit | kbatch.TransactionalBit
	ctl.ProducerID, ctl.ProducerEpoch = 77, 2
	return append(kbatchtest.Encode(t, data), kbatchtest.Encode(t, ctl)...)
}

func encode(t testing.TB, c *Context, topic string, cfg map[string]string, keys []string, set []byte, needs Needs) []byte {
	t.Helper()
	table, n := EncodeConfigs(keys, cfg)
	size, nb, err := InputSize(c, topic, table, set, needs)
	if err != nil {
		t.Fatal(err)
	}
	dst := bytes.Repeat([]byte{0xAA}, size) // garbage must be overwritten
	out := EncodeInput(dst, c, topic, table, n, set, nb, needs)
	if len(out) != size {
		t.Fatalf("encoded %d bytes, InputSize said %d", len(out), size)
	}
	return out
}

func TestInputRoundTrip(t *testing.T) {
	set := testSet(t)
	c := &Context{Partition: 7, Mode: ModePush, State: StateStopping, LeaderEpoch: 20, LogEndOffset: 10, LastBatchEpoch: 2, OpenTxnProducerIDs: []int64{5, 77}}
	for _, needs := range []Needs{0, NeedControlBytes, NeedBatchBytes} {
		b := encode(t, c, "orders", map[string]string{"cleanup.policy": "compact", "other": "x"}, []string{"cleanup.policy", "missing"}, set, needs)
		in, err := ParseInput(b)
		if err != nil {
			t.Fatal(err)
		}
		if in.Topic() != "orders" || in.Partition() != 7 || in.MirrorMode() != ModePush || in.MirrorState() != StateStopping ||
			in.CurrentLeaderEpoch() != 20 || in.LogEndOffset() != 10 || in.LastBatchEpoch() != 2 {
			t.Fatalf("context mismatch: topic %q partition %d", in.Topic(), in.Partition())
		}
		if !in.HasOpenTransaction(77) || in.HasOpenTransaction(6) || in.NumOpenTransactions() != 2 {
			t.Fatal("open transactions mismatch")
		}
		if v, ok := in.Config("cleanup.policy"); !ok || v != "compact" {
			t.Fatalf("config = %q %v", v, ok)
		}
		if _, ok := in.Config("other"); ok {
			t.Fatal("undeclared config passed")
		}
		if in.NumBatches() != 2 {
			t.Fatalf("batches = %d", in.NumBatches())
		}
		b0, b1 := in.Batch(0), in.Batch(1)
		if b0.Header.BaseOffset != 10 || b0.Header.LeaderEpoch != 3 || b0.Control || b1.Header.ProducerID != 77 || !b1.Control ||
			!b1.ControlTypeKnown || b1.ControlType != kbatch.ControlCommit {
			t.Fatalf("batches decoded wrong: %+v %+v", b0, b1)
		}
		first := len(kbatchtest.Encode(t, kbatch.NewBatch(1000, kbatch.Record{Key: []byte("k"), Value: []byte("v")})))
		switch needs {
		case 0:
			if b0.Bytes != nil || b1.Bytes != nil {
				t.Fatal("bytes passed without being asked for")
			}
		case NeedControlBytes:
			if b0.Bytes != nil || !bytes.Equal(b1.Bytes, set[first:]) {
				t.Fatal("control bytes wrong")
			}
		case NeedBatchBytes:
			if !bytes.Equal(b0.Bytes, set[:first]) || !bytes.Equal(b1.Bytes, set[first:]) {
				t.Fatal("batch bytes wrong")
			}
		}
	}
}

func TestInputSizeRefusesTornSets(t *testing.T) {
	set := testSet(t)
	for _, cut := range []int{1, 60, len(set) - 1} {
		if _, _, err := InputSize(&Context{}, "t", nil, set[:cut], 0); !errors.Is(err, ErrBatches) {
			t.Fatalf("cut at %d: err = %v", cut, err)
		}
	}
}

func TestVerdictsRoundTrip(t *testing.T) {
	rs := []Rejection{{Batch: 1, Code: 44, Reason: "epoch rewind"}, {Batch: 0, Code: 87, Reason: string(bytes.Repeat([]byte("x"), 2000))}}
	b := AppendVerdicts(nil, rs)
	var got []Rejection
	if err := DecodeVerdicts(b, 2, func(i int, code int16, reason []byte) {
		got = append(got, Rejection{Batch: i, Code: code, Reason: string(reason)})
	}); err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0] != rs[0] || len(got[1].Reason) != MaxReasonLen || got[1].Code != 87 {
		t.Fatalf("got %+v", got)
	}
	if err := DecodeVerdicts(b, 1, func(int, int16, []byte) {}); !errors.Is(err, ErrMalformed) {
		t.Fatalf("index out of range accepted: %v", err)
	}
	if err := DecodeVerdicts(append(b, 0), 2, func(int, int16, []byte) {}); !errors.Is(err, ErrMalformed) {
		t.Fatalf("trailing byte accepted: %v", err)
	}
}

// FuzzParseInput: arbitrary bytes never panic the guest decoder, and every
// accessor of an accepted input stays inside it.
func FuzzParseInput(f *testing.F) {
	set := testSet(f)
	c := &Context{Partition: 1, OpenTxnProducerIDs: []int64{1}}
	f.Add(encode(f, c, "t", map[string]string{"a": "b"}, []string{"a"}, set, NeedBatchBytes))
	f.Add(encode(f, c, "", nil, nil, nil, 0))
	f.Fuzz(func(t *testing.T, b []byte) {
		in, err := ParseInput(b)
		if err != nil {
			return
		}
		_ = in.Topic()
		for i := 0; i < in.NumOpenTransactions(); i++ {
			in.OpenTransaction(i)
		}
		in.Config("a")
		for i := 0; i < in.NumBatches(); i++ {
			bt := in.Batch(i)
			if bt.Bytes != nil && len(bt.Bytes) != bt.Size {
				t.Fatal("bytes length differs from size")
			}
		}
	})
}

// FuzzDecodeVerdicts: the host's decoder of guest output never panics and
// only reports indexes below the batch count.
func FuzzDecodeVerdicts(f *testing.F) {
	f.Add(AppendVerdicts(nil, []Rejection{{Batch: 0, Code: 44, Reason: "r"}}), 1)
	f.Add([]byte{1, 0, 0, 0}, 3)
	f.Fuzz(func(t *testing.T, b []byte, n int) {
		if n < 0 || n > 1<<20 {
			return
		}
		_ = DecodeVerdicts(b, n, func(i int, _ int16, reason []byte) {
			if i < 0 || i >= n || len(reason) > MaxReasonLen {
				t.Fatalf("index %d of %d, reason %d bytes", i, n, len(reason))
			}
		})
	})
}

// FuzzEncodeInput: any record set either is refused by InputSize or
// encodes to an input the decoder accepts with the same batch count.
func FuzzEncodeInput(f *testing.F) {
	f.Add(testSet(f), uint8(0))
	f.Add(testSet(f)[:70], uint8(2))
	f.Fuzz(func(t *testing.T, set []byte, needs uint8) {
		c := &Context{}
		nd := Needs(needs & 3)
		size, nb, err := InputSize(c, "t", nil, set, nd)
		if err != nil {
			return
		}
		out := EncodeInput(make([]byte, size), c, "t", nil, 0, set, nb, nd)
		in, err := ParseInput(out)
		if err != nil || in.NumBatches() != nb {
			t.Fatalf("encoded input refused: %v", err)
		}
	})
}

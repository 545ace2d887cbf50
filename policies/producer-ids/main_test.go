package main

import (
	"testing"

	"github.com/verbatim-kafka/verbatim/kbatch"
	"github.com/verbatim-kafka/verbatim/kbatch/kbatchtest"
	"github.com/verbatim-kafka/verbatim/policies/sdk"
)

func enc(t *testing.T, mod func(*kbatch.Batch)) []byte {
	b := kbatch.NewBatch(1, kbatch.Record{Value: []byte("v")})
	mod(&b)
	return kbatchtest.Encode(t, b)
}

func TestProducerIDs(t *testing.T) {
	c := &sdk.Context{Mode: sdk.ModePush, LastBatchEpoch: -1}
	accept := map[string]func(*kbatch.Batch){
		"plain":                              func(*kbatch.Batch) {},
		"plain, franz-go style (sequence 0)": func(b *kbatch.Batch) { b.BaseSequence = 0 },
		"idempotent":                         func(b *kbatch.Batch) { b.ProducerID, b.ProducerEpoch, b.BaseSequence = 4, 0, 0 },
		"sequence wrap":                      func(b *kbatch.Batch) { b.ProducerID, b.ProducerEpoch, b.BaseSequence = 4, 1, 0x7fffffff },
		"marker": func(b *kbatch.Batch) {
			b.ProducerID, b.ProducerEpoch, b.Attributes = 4, 3, kbatch.ControlBit|kbatch.TransactionalBit
			b.Records = []kbatch.Record{{Key: kbatch.ControlKey(1), Value: kbatch.EndTxnMarkerValue(0)}}
		},
	}
	for name, mod := range accept {
		if rs, err := sdk.Judge(&policy, c, "t", nil, enc(t, mod)); err != nil || rs != nil {
			t.Errorf("%s: rejected %+v %v", name, rs, err)
		}
	}
	reject := map[string]func(*kbatch.Batch){
		"negative id":       func(b *kbatch.Batch) { b.ProducerID, b.ProducerEpoch, b.BaseSequence = -3, 0, 0 },
		"epoch below -1":    func(b *kbatch.Batch) { b.ProducerID, b.ProducerEpoch, b.BaseSequence = 1, -2, 0 },
		"sequence below -1": func(b *kbatch.Batch) { b.ProducerID, b.ProducerEpoch, b.BaseSequence = 1, 0, -5 },
		"txn without id":    func(b *kbatch.Batch) { b.Attributes = kbatch.TransactionalBit },
		"id without epoch":  func(b *kbatch.Batch) { b.ProducerID, b.BaseSequence = 9, 0 },
		"idempotent no seq": func(b *kbatch.Batch) { b.ProducerID, b.ProducerEpoch = 9, 0 },
		"control with sequence": func(b *kbatch.Batch) {
			b.ProducerID, b.ProducerEpoch, b.BaseSequence, b.Attributes = 9, 0, 0, kbatch.ControlBit
		},
	}
	for name, mod := range reject {
		rs, err := sdk.Judge(&policy, c, "t", nil, enc(t, mod))
		if err != nil || len(rs) != 1 || rs[0].Code != sdk.InvalidRecord || rs[0].Reason == "" {
			t.Errorf("%s: got %+v %v", name, rs, err)
		}
	}
	// Epoch going back for one producer within a call.
	set := append(enc(t, func(b *kbatch.Batch) { b.ProducerID, b.ProducerEpoch, b.BaseSequence = 5, 3, 0 }),
		enc(t, func(b *kbatch.Batch) { b.BaseOffset, b.ProducerID, b.ProducerEpoch, b.BaseSequence = 1, 6, 0, 0 })...)
	set = append(set, enc(t, func(b *kbatch.Batch) { b.BaseOffset, b.ProducerID, b.ProducerEpoch, b.BaseSequence = 2, 5, 2, 1 })...)
	rs, _ := sdk.Judge(&policy, c, "t", nil, set)
	if len(rs) != 1 || rs[0].Batch != 2 || rs[0].Code != sdk.InvalidProducerEpoch {
		t.Fatalf("epoch rewind: %+v", rs)
	}
}

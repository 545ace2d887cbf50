package main

import (
	"testing"

	"github.com/verbatim-kafka/verbatim/internal/kbatch"
	"github.com/verbatim-kafka/verbatim/policies/sdk"
)

func batchAt(t *testing.T, off int64, epoch int32) []byte {
	b := kbatch.NewBatch(1, kbatch.Record{Value: []byte("v")})
	b.BaseOffset, b.LeaderEpoch = off, epoch
	out, err := kbatch.Encode(b)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func TestEpochMonotonic(t *testing.T) {
	set := append(append(append(batchAt(t, 10, 5), batchAt(t, 11, 7)...), batchAt(t, 12, 6)...), batchAt(t, 13, 7)...)
	c := &sdk.Context{Mode: sdk.ModePush, State: sdk.StateMirroring, LastBatchEpoch: 5, LogEndOffset: 10}
	rs, err := sdk.Judge(&policy, c, "t", nil, set)
	if err != nil {
		t.Fatal(err)
	}
	if len(rs) != 1 || rs[0].Batch != 2 || rs[0].Code != sdk.PolicyViolation || rs[0].Reason != "leader epoch 6 rewinds below 7" {
		t.Fatalf("rejections %+v", rs)
	}
	c.LastBatchEpoch = 8 // everything in the call is below the stored epoch
	rs, _ = sdk.Judge(&policy, c, "t", nil, set)
	if len(rs) != 4 {
		t.Fatalf("want all 4 rejected, got %+v", rs)
	}
	c.LastBatchEpoch = -1 // empty log: any epoch starts
	if rs, _ = sdk.Judge(&policy, c, "t", nil, batchAt(t, 0, 0)); rs != nil {
		t.Fatalf("empty log rejected %+v", rs)
	}
}

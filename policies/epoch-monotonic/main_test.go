package main

import (
	"encoding/binary"
	"reflect"
	"testing"

	"github.com/verbatim-kafka/verbatim/kbatch"
	"github.com/verbatim-kafka/verbatim/kbatch/kbatchtest"
	"github.com/verbatim-kafka/verbatim/policies/internal/wasmjudge"
	"github.com/verbatim-kafka/verbatim/policies/sdk"
)

func batchAt(t testing.TB, off int64, epoch int32) []byte {
	b := kbatch.NewBatch(1, kbatch.Record{Value: []byte("v")})
	b.BaseOffset, b.LeaderEpoch = off, epoch
	return kbatchtest.Encode(t, b)
}

// judgeBoth runs the Go reference implementation natively and the
// built-in module (policy.wat, as committed in policies/builtin) in the
// host, and fails unless both give the same verdicts and reasons.
func judgeBoth(t testing.TB, c *sdk.Context, set []byte) []sdk.Rejection {
	t.Helper()
	goRs, err := sdk.Judge(&policy, c, "t", nil, set)
	if err != nil {
		t.Fatal(err)
	}
	wasmRs, err := wasmjudge.Judge(t, "epoch-monotonic", c, set)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(goRs, wasmRs) {
		t.Fatalf("Go reference and module disagree:\n  Go:     %+v\n  module: %+v", goRs, wasmRs)
	}
	return goRs
}

func TestEpochMonotonic(t *testing.T) {
	set := append(append(append(batchAt(t, 10, 5), batchAt(t, 11, 7)...), batchAt(t, 12, 6)...), batchAt(t, 13, 7)...)
	c := &sdk.Context{Mode: sdk.ModePush, State: sdk.StateMirroring, LastBatchEpoch: 5, LogEndOffset: 10}
	rs := judgeBoth(t, c, set)
	if len(rs) != 1 || rs[0].Batch != 2 || rs[0].Code != sdk.PolicyViolation || rs[0].Reason != "leader epoch 6 rewinds below 7" {
		t.Fatalf("rejections %+v", rs)
	}
	c.LastBatchEpoch = 8 // everything in the call is below the stored epoch
	if rs = judgeBoth(t, c, set); len(rs) != 4 || rs[3].Reason != "leader epoch 7 rewinds below 8" {
		t.Fatalf("want all 4 rejected, got %+v", rs)
	}
	c.LastBatchEpoch = -1 // empty log: any epoch starts
	if rs = judgeBoth(t, c, batchAt(t, 0, 0)); rs != nil {
		t.Fatalf("empty log rejected %+v", rs)
	}
	// Extreme epochs format the same in both (sign, width).
	c.LastBatchEpoch = 2147483647
	if rs = judgeBoth(t, c, batchAt(t, 0, -2147483648)); len(rs) != 1 || rs[0].Reason != "leader epoch -2147483648 rewinds below 2147483647" {
		t.Fatalf("extremes: %+v", rs)
	}
}

// FuzzEpochMonotonic: the module and the Go reference agree on any epoch
// sequence (up to 64 batches, epochs from the fuzzer's bytes) and floor.
func FuzzEpochMonotonic(f *testing.F) {
	f.Add([]byte{0, 0, 0, 5, 0, 0, 0, 7, 0, 0, 0, 6}, int32(5))
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 0x80, 0, 0, 0}, int32(-1))
	f.Fuzz(func(t *testing.T, epochs []byte, floor int32) {
		var set []byte
		for i := 0; i+4 <= len(epochs) && i < 64*4; i += 4 {
			set = append(set, batchAt(t, int64(i/4), int32(binary.BigEndian.Uint32(epochs[i:])))...)
		}
		if len(set) == 0 {
			return
		}
		judgeBoth(t, &sdk.Context{Mode: sdk.ModePush, LastBatchEpoch: floor}, set)
	})
}
